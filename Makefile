# Two commands set everything up on a fresh machine:
#   make demo   install into .venv and run the main job (infercast demo)
#   make test   install into .venv and run ruff + the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test lint demo clean browser

# Reinstall only when the project metadata or the pins change: the second run is a no-op.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[zoo,test,ray]"
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# The report test opens the HTML in headless Chromium: Debian's package, installed when missing
# (apt needs root; elsewhere that test is skipped, and under CI it fails).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		echo "warning: could not install chromium: the report's browser check will be skipped"

# Three workers, each test file on one of them (module fixtures stay shared): on a 2-core machine
# the suite's tests spend part of their time waiting (Ray nodes, subprocess deadlines), so a third
# worker fills it (measured: 425 s of pytest against 478 s with two). Files start in the order
# tests/conftest.py gives (longest first); xdist would otherwise reorder them by their number of
# tests, which started the 4-test Ray file last and left it running alone for minutes.
test: lint browser
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

demo: $(STAMP)
	$(BIN)/infercast demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
