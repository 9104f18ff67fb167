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
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools

# The report test opens the HTML in headless Chromium: Debian's package, installed when missing
# (apt needs root; elsewhere that test is skipped, and under CI it fails).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		echo "warning: could not install chromium: the report's browser check will be skipped"

# The Ray tests run beside the rest, the rest at a lower priority (and the test cluster's workers
# at niceness 0, not Ray's 15: tests/test_distributed.py): the Ray nodes mostly wait (health
# checks, worker start-up) and, beside busy workers of the same priority, starved of CPU, they
# ran several times longer and timed out; one after the other, the two take twice as long.
# Their output follows the rest's. The rest: six workers, each test file on one of them (module
# fixtures stay shared); tests wait on subprocesses part of the time, so more workers than cores
# keep the cores busy.
# Files start in the order tests/conftest.py gives (longest first); xdist would otherwise
# reorder them by their number of tests.
# A background command of a non-interactive shell ignores Ctrl-C: the Ray tests' Python restores
# it before it becomes pytest, so an interrupted `make test` still stops their cluster.
test: lint browser
	@ray_log=$$(mktemp); \
	$(BIN)/python -c "import os, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); \
		os.execv(sys.executable, [sys.executable, '-m', 'pytest', 'tests/test_distributed.py'])" \
		> $$ray_log 2>&1 & ray=$$!; \
	nice -n 10 $(BIN)/python -m pytest -n 6 --dist loadfile --no-loadscope-reorder \
		--ignore=tests/test_distributed.py; rest=$$?; \
	wait $$ray; ray_status=$$?; \
	echo "--- tests/test_distributed.py (Ray), run beside the rest:"; cat $$ray_log; rm -f $$ray_log; \
	test $$rest -eq 0 && test $$ray_status -eq 0

demo: $(STAMP)
	$(BIN)/infercast demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
