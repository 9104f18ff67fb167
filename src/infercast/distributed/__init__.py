"""Ray: profiling campaigns across machines and device kinds, screening beyond one machine.

The only package that imports Ray (an optional extra: ``pip install 'ray>=2.40'``, or
``pip install -e '.[ray]'`` in a checkout).

- ``profile_on_ray(spec, db, backend, kinds=…, address=…)``: a ``CampaignSpec``'s campaign measured
  on every device kind named; each kind is a custom resource ``device:KIND`` that a node offers
  when it joins (``ray start --address HEAD --resources '{"device:KIND": 1}'``); the driver alone
  writes the store; killed workers / nodes are retried, a killed driver resumes from the store.
- ``screen_on_ray(predictor, space, n, budgets, objectives, address, …)``: stage 1 sharded over
  the cluster, only survivors returned; stage 2 and the shortlist on the driver.

Every node runs the same infercast (and its Python packages) as the driver.
"""

from __future__ import annotations

from infercast.distributed.campaign import DEVICE_PREFIX, device_kinds, device_resource, profile_on_ray
from infercast.distributed.cluster import ClusterError
from infercast.distributed.screening import screen_on_ray, shard_seed

__all__ = [
    "DEVICE_PREFIX",
    "ClusterError",
    "device_kinds",
    "device_resource",
    "profile_on_ray",
    "screen_on_ray",
    "shard_seed",
]
