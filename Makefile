# minihpc — run `make` or `make help` for the list of targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV ?= .venv
PY := $(VENV)/bin/python
MINIHPC := $(VENV)/bin/minihpc
WORKERS ?= 2
NODES ?= 1
PRIORITY ?= normal
# The local cluster's Redis port; `minihpc up --local` refuses a port in use.
LOCAL_PORT ?= 6379

##@ Help
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m [VAR=value]\n"} /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Quick start
.PHONY: demo
demo: venv ## Start a local 3-node cluster, run a DDP job across it, show the result.
	@bash scripts/demo-local.sh

##@ Local cluster (processes on this machine)
.PHONY: local-up local-down submit queue logs nodes history
local-up: venv ## Start redis, the master and WORKERS+1 node agents as local processes.
	@$(MINIHPC) up --local --workers $(WORKERS) --port $(LOCAL_PORT)

local-down: venv ## Stop the local cluster (its data stays).
	@$(MINIHPC) down

submit: venv ## Submit a job: make submit JOB=jobs/hello.py NODES=3 PRIORITY=high
	@if [ -z "$(JOB)" ]; then echo "usage: make submit JOB=path/to/script.py [NODES=1] [PRIORITY=high|normal|low] [ARGS='...']" >&2; exit 2; fi
	@$(MINIHPC) submit -N $(NODES) --priority $(PRIORITY) $(JOB) $(ARGS)

queue: venv ## Show pending and running jobs.
	@$(MINIHPC) queue

logs: venv ## Show a job's logs: make logs ID=3
	@if [ -z "$(ID)" ]; then echo "usage: make logs ID=<job id>" >&2; exit 2; fi
	@$(MINIHPC) logs $(ID)

nodes: venv ## Show the nodes.
	@$(MINIHPC) nodes

history: venv ## Show ended jobs.
	@$(MINIHPC) history

##@ Development
.PHONY: venv test test-unit test-integration bench lock clean
venv: ## Create .venv from the wheelhouse (built once per machine).
	@bash scripts/venv.sh

test: venv ## Run the whole test suite (unit + integration with a real cluster).
	@$(PY) -m pytest tests/unit tests/integration -p no:cacheprovider

test-unit: venv ## Run only the unit tests (no Redis needed).
	@$(PY) -m pytest tests/unit -p no:cacheprovider

test-integration: venv ## Run only the integration tests (real redis-server, agents, torchrun).
	@$(PY) -m pytest tests/integration -p no:cacheprovider

bench: venv ## Benchmark the engine against raw torchrun and raw rq (bench/results/).
	@$(PY) scripts/bench.py

lock: ## Re-pin constraints.txt from requirements.txt (needs PyPI).
	@d=$$(mktemp -d) && python3 -m venv $$d && $$d/bin/pip install --quiet -r requirements.txt && \
	  { head -2 constraints.txt; $$d/bin/pip freeze | grep -v '^minihpc'; } > constraints.txt.new && \
	  mv constraints.txt.new constraints.txt && rm -rf $$d && echo "constraints.txt updated"

clean: ## Remove the venv, caches and benchmark results (not the wheelhouse).
	rm -rf $(VENV) .pytest_cache bench/results src/*.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
