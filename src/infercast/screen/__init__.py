"""Two-stage deployment screening (CARB): a million candidates to a validated Pareto shortlist.

- **Stage 1** (``stage_one``): candidates featurised in closed form (no module is built) in
  chunks, every target predicted by the predictor's fast screening models, and each budget applied
  with a safety margin from those models' out-of-fold residuals: a feasible candidate is wrongly
  discarded with probability about ``risk``.
- **Stage 2** (``stage_two``): the survivors re-scored by the full cascade blend (optionally a second
  platform's predictor, as CARB re-scores with the target GPU's model), the budgets applied to the
  point predictions, non-dominated sorting on the objectives, and a shortlist ranked by crowding
  distance or a user weighting.
- **Validation** (``validate``): the shortlist (and the rejected candidates closest to the
  budgets) measured with the measurement engine: predicted vs measured, correct accept / false
  accept / false reject, all stored.

One module each: ``request`` (objectives, budgets, checks), ``candidates`` (what to screen),
``stages`` (stage 1, stage 2, the shortlist), ``pareto`` (fronts and crowding), ``validation``
(the only one that measures and writes a store). ``screen`` never imports a learner library itself.
"""

from __future__ import annotations

from infercast.screen.candidates import Candidates, from_configs, from_models, from_space
from infercast.screen.request import OBJECTIVES, Budgets, ScreenError, check_request
from infercast.screen.stages import CHUNK, ScreenResult, screen, stage_one, stage_two
from infercast.screen.validation import validate

__all__ = [
    "CHUNK",
    "OBJECTIVES",
    "Budgets",
    "Candidates",
    "ScreenError",
    "ScreenResult",
    "check_request",
    "from_configs",
    "from_models",
    "from_space",
    "screen",
    "stage_one",
    "stage_two",
    "validate",
]
