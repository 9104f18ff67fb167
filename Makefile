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

# The Ray tests first, alone: their nodes mostly wait (health checks, worker start-up), and beside
# busy workers, starved of CPU, they took 300–700 s instead of 100 s and timed out. Then the rest:
# three workers, each test file on one of them (module fixtures stay shared); on a 2-core machine
# the tests spend part of their time waiting on subprocesses, so a third worker fills it. Files
# start in the order tests/conftest.py gives (longest first); xdist would otherwise reorder them
# by their number of tests.
test: lint browser
	$(BIN)/python -m pytest tests/test_distributed.py
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder --ignore=tests/test_distributed.py

demo: $(STAMP)
	$(BIN)/infercast demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
