# The two commands of the README. Both install what they need into the current Python.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
DEMO := out/demo

.PHONY: start test lint

## Install and start: replay a generated lab workload through the policies side by side.
start:
	$(PIP) install -q -e .
	jupyter-elastic-gpu workload generate --out $(DEMO) --seed 1 --jobs 60 --window 21600 --max-gpus 16
	jupyter-elastic-gpu simulate --jobs $(DEMO)/jobs.csv --profiles $(DEMO)/profiles.csv \
		--nodes 4 --gpus-per-node 4 --start-cost 6 \
		--policy adaptive,static,termination,termination-aware,tiresias,optimus,srtf \
		--json $(DEMO)/comparison.json --plot $(DEMO)/comparison.png

## Install everything the tests need and run them all (slow suites included).
test:
	$(PIP) install -q -e ".[test]"
	$(PYTHON) -m pytest

lint:
	ruff check . && ruff format --check .
