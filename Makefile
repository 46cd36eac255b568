# The two commands of the README. Both install what they need into the current Python.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
DEMO := out/demo
# TensorFlow for the trainers (the extras of pyproject.toml): the CUDA build where an NVIDIA
# driver is present.
TF := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
	&& echo cuda || echo cpu)
PORT ?= 8888
# pytest-xdist workers for `make test` (files that must not overlap share one: tests/conftest.py).
# Three on a 2-core machine: much of the suite waits on servers, trainers and browsers, and two
# workers left the cores idle more than a quarter of the time (docs/architecture.md).
TEST_WORKERS ?= 3

.PHONY: start test test-fast simulate lint node generate

## Install and start JupyterLab with the scheduler embedded (this machine's GPUs, or simulated
## GPUs where there are none; SQLite in the Jupyter data dir), on the demo notebook: the URL
## it prints opens the notebook (LabApp.default_url; the file as an argument is opened only by
## the browser the server starts, and makes its folder the root). LAB_ARGS=--no-browser on a
## machine without one.
DEMO_NOTEBOOK := examples/elastic-training.ipynb
# Jupyter refuses to start as root without --allow-root, and root is who runs containers and
# cloud GPU boxes: passed as root only.
ALLOW_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
start: node
	$(PIP) install -q -e ".[$(TF)]"
	$(PYTHON) -m jupyter lab --ip=127.0.0.1 --port=$(PORT) \
		--LabApp.default_url=/lab/tree/$(DEMO_NOTEBOOK) $(ALLOW_ROOT) $(LAB_ARGS)

## Install everything the tests need and run them all (slow suites included). The PyTorch
## tests run on the CPU: TORCH_TEST is installed first so that the test extras' `torch` is
## satisfied by it (a plain `torch` from the registry is a CUDA build of several GB).
## (pip compiles each module at install: keep it. Where PYTHONDONTWRITEBYTECODE is set, as on
## CI's machines, a module left uncompiled is compiled again by every process that imports it;
## TensorFlow's import then took 11.3 s of CPU instead of 7.2 s.)
TORCH_TEST ?= torch==2.13.0
test: node
	bash .ci/install-test-deps
	$(PIP) install -q "$(TORCH_TEST)"
	$(PIP) install -q -e ".[test]"
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25 --cpu-report 25

## The fast tier only (the core, the simulator, the models, the service's units: no server,
## trainer or browser; tests/conftest.py FAST_TIER), in about a minute. It waits on nothing,
## so one worker per core (on 2 cores: 67 s, against 84 s on three).
test-fast:
	$(PIP) install -q "$(TORCH_TEST)"
	$(PIP) install -q -e ".[test]"
	$(PYTHON) -m pytest -m fast -n auto -q

## Node.js builds the JupyterLab extension from a checkout (a wheel needs none): from Debian's
## packages where it is missing.
node:
	@command -v node >/dev/null 2>&1 || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q nodejs npm; }

## Replay a generated lab workload through the policies side by side (no GPUs needed): the
## docs/benchmarks.md's "generated 1" workload and settings, so its row is this table's adaptive, static,
## termination and termination-aware.
SIM_WORKLOAD := --seed 1 --jobs 60 --window 21600 --max-gpus 16 \
	--gpu-mix 1:0.4,2:0.25,4:0.2,8:0.15
simulate:
	$(PIP) install -q -e .
	$(PYTHON) -m jupyter_elastic_gpu.cli workload generate --out $(DEMO) $(SIM_WORKLOAD)
	$(PYTHON) -m jupyter_elastic_gpu.cli simulate --jobs $(DEMO)/jobs.csv --profiles $(DEMO)/profiles.csv \
		--name "generated 1 (seed 1)" --nodes 4 --gpus-per-node 4 --start-cost 6 \
		--policy adaptive,static,termination,termination-aware,tiresias,optimus,srtf \
		--json $(DEMO)/comparison.json --plot $(DEMO)/comparison.png

lint:
	ruff check . && ruff format --check .

## Write the files made from the route table and the models: the OpenAPI document
## (jupyter_elastic_gpu/server/openapi.yaml) and the front end's API types
## (labextension/src/api-types.ts). Run it after changing a model or a route; a test fails
## while either is stale.
generate:
	$(PYTHON) -m jupyter_elastic_gpu.scheduler.port.generate
