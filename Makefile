# minihpc — run `make` or `make help` for the list of targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV ?= .venv
PY := $(VENV)/bin/python
MINIHPC := $(VENV)/bin/minihpc
WORKERS ?= 2
# The local cluster's Redis port; `minihpc up --local` refuses a port in use.
LOCAL_PORT ?= 6379

# Compose v2 (`docker compose`) or v1 (`docker-compose`), whichever is installed.
COMPOSE := $(shell if docker compose version >/dev/null 2>&1; then echo "docker compose"; \
	elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)
# A command in the control container (the CLI beside the scheduler); a TTY only when we have one (not in CI or pipes).
IN_MASTER = tty=$$([ -t 0 ] && [ -t 1 ] || echo -T); $(COMPOSE) exec $$tty control
NEED_COMPOSE = @if [ -z "$(COMPOSE)" ]; then echo "make: neither 'docker compose' nor 'docker-compose' is installed" >&2; exit 1; fi

##@ Help
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m [VAR=value]\n"} /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Quick start
.PHONY: demo
demo: venv ## Build, start the cluster, train MNIST with DDP on 3 nodes, validate, show the result.
	$(NEED_COMPOSE)
	@COMPOSE="$(COMPOSE)" bash scripts/demo.sh

##@ Cluster (Docker Compose)
.PHONY: build up down status clean token
build: venv ## Build every image; works without a registry (bootstraps a Debian base; the packages come from .venv).
	@VENV=$(VENV) bash scripts/build-images.sh

up: venv ## Start the cluster and wait until healthy (builds missing images; WORKERS=N for more workers).
	$(NEED_COMPOSE)
	@COMPOSE="$(COMPOSE)" $(if $(filter command line,$(origin WORKERS)),WORKERS=$(WORKERS)) bash scripts/up.sh

down: ## Stop the cluster; jobs, data, models and logs stay in their volumes.
	$(NEED_COMPOSE)
	@$(COMPOSE) down --remove-orphans

status: ## Containers with their health, and the nodes as the scheduler sees them.
	$(NEED_COMPOSE)
	@$(COMPOSE) ps
	@echo
	@$(IN_MASTER) minihpc nodes

clean: ## Stop the cluster and DELETE its volumes (jobs, data, models, logs); remove local build outputs.
	@if [ -n "$(COMPOSE)" ]; then $(COMPOSE) down --volumes --remove-orphans; fi
	rm -rf $(VENV) .pytest_cache bench/results build/node-src src/*.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

token: ## An API token for the REST API and web page: make token [USER=name] [ADMIN=1] (printed once).
	$(NEED_COMPOSE)
	@$(COMPOSE) exec -T control minihpc token create $(or $(USER),$(shell id -un)) $(if $(ADMIN),--admin)

##@ Jobs
.PHONY: submit queue logs cancel history prepare-data validate-model
submit: ## Submit a job: make submit JOB=jobs/hello.py [TREE=dir JOB's folder to bring] [NODES=3] [PRIORITY=high] [SUBMIT_OPTS='--elastic ...' more submit options] [ARGS='...'] (unset: the script's own #SBATCH/#MINIHPC lines)
	@if [ -z "$(JOB)" ]; then echo "usage: make submit JOB=path/to/script.py [TREE=dir] [NODES=n] [PRIORITY=high|normal|low] [ARGS='...']" >&2; exit 2; fi
	@if [ ! -f "$(JOB)" ]; then echo "make submit: error: script '$(JOB)' does not exist" >&2; exit 2; fi
	@if [ -n "$(TREE)" ] && [ ! -d "$(TREE)" ]; then echo "make submit: error: TREE '$(TREE)' is not a directory" >&2; exit 2; fi
	$(NEED_COMPOSE)
ifneq ($(TREE),)
	@tar -C "$(TREE)" --exclude=.git --exclude=__pycache__ --exclude=.venv -czf - . | $(COMPOSE) exec -T control minihpc submit $(if $(NODES),-N $(NODES)) $(if $(PRIORITY),--priority $(PRIORITY)) $(SUBMIT_OPTS) --tree - "$$(realpath --relative-to="$(TREE)" "$(JOB)")" $(ARGS)
else
	@$(COMPOSE) exec -T control minihpc submit $(if $(NODES),-N $(NODES)) $(if $(PRIORITY),--priority $(PRIORITY)) $(SUBMIT_OPTS) --script-name $(notdir $(JOB)) - $(ARGS) < $(JOB)
endif

queue: ## Pending and running jobs.
	$(NEED_COMPOSE)
	@$(IN_MASTER) minihpc queue

logs: ## A job's output (make logs ID=3), or the cluster's container logs without ID.
	$(NEED_COMPOSE)
	@if [ -n "$(ID)" ]; then $(IN_MASTER) minihpc logs $(ID); else $(COMPOSE) logs --tail=50; fi

cancel: ## Cancel a job: make cancel ID=3
	@if [ -z "$(ID)" ]; then echo "usage: make cancel ID=<job id>" >&2; exit 2; fi
	$(NEED_COMPOSE)
	@$(IN_MASTER) minihpc cancel $(ID)

history: ## Ended jobs.
	$(NEED_COMPOSE)
	@$(IN_MASTER) minihpc history

prepare-data: ## Put MNIST on the data volume (scikit-learn's digits when offline).
	$(NEED_COMPOSE)
	@$(IN_MASTER) python /opt/minihpc/jobs/prepare_mnist.py --root /shared/data

validate-model: ## Test accuracy of a trained MNIST model: make validate-model [ID=<training job>]
	$(NEED_COMPOSE)
	@$(IN_MASTER) python /opt/minihpc/jobs/validate_mnist.py --models-root /shared/models \
		--data-root /shared/data $(if $(ID),--job $(ID))

##@ Operations
.PHONY: monitor health watch-recovery drill report
monitor: ## Live view of nodes, queue and running jobs (Ctrl-C ends it).
	$(NEED_COMPOSE)
	@$(IN_MASTER) minihpc monitor

health: ## Containers' health, every node's state and heartbeat, and recent incidents.
	$(NEED_COMPOSE)
	@$(COMPOSE) ps
	@echo
	@$(IN_MASTER) minihpc nodes
	@echo
	@echo "recent incidents (node down / restart / back / drained, job requeued):"
	@$(IN_MASTER) minihpc incidents -n 15

watch-recovery: ## Live: node down, restarted, back, jobs requeued, with times (try: docker kill a worker).
	$(NEED_COMPOSE)
	@$(IN_MASTER) minihpc incidents --follow -n 10

drill: venv ## Inject a fault, time the recovery: make drill KIND=stop|kill|pause|disconnect|redis-restart NODE=worker-node-1
	@if [ -z "$(KIND)" ]; then echo "usage: make drill KIND=stop|kill|pause|disconnect|redis-restart [NODE=worker-node-1] [JOB=id] [DURATION=s]" >&2; exit 2; fi
	@VENV=$(VENV) bash scripts/host-cli.sh drill $(KIND) $(if $(NODE),--node $(NODE)) $(if $(JOB),--job $(JOB)) \
		$(if $(DURATION),--duration $(DURATION)) $(if $(JSON),--json)

report: venv ## Plots and a summary of a job in reports/job-ID/: make report ID=3
	@if [ -z "$(ID)" ]; then echo "usage: make report ID=<job id>" >&2; exit 2; fi
	@VENV=$(VENV) bash scripts/host-cli.sh report $(ID) --out reports/job-$(ID)

##@ Local mode (every node a process on this machine; no Docker)
.PHONY: local-up local-down local-demo
local-up: venv ## Start redis, the master and WORKERS+1 node agents as local processes.
	@bash scripts/host-deps.sh local
	@$(MINIHPC) up --local --workers $(WORKERS) --port $(LOCAL_PORT)

local-down: venv ## Stop the local cluster (its data stays).
	@$(MINIHPC) down

local-demo: venv ## A local 3-node cluster running jobs/hello.py across all three nodes.
	@bash scripts/host-deps.sh local
	@bash scripts/demo-local.sh

##@ Real hosts (Ansible)
.PHONY: ansible-setup ansible-check
ansible-setup: venv ## Provision hosts into a cluster: make ansible-setup INVENTORY=ansible/inventory/hosts.yml [ARGS='--check --diff' or '--limit host']
	@if [ -z "$(INVENTORY)" ]; then echo "usage: make ansible-setup INVENTORY=path/to/inventory.yml [ARGS='--check --diff']  (start from ansible/inventory.example.yml)" >&2; exit 2; fi
	@if [ ! -f "$(INVENTORY)" ]; then echo "make ansible-setup: error: inventory '$(INVENTORY)' does not exist (start from ansible/inventory.example.yml)" >&2; exit 2; fi
	@bash scripts/host-deps.sh ansible
	@wheelhouse=$$(PYTHON=$(VENV)/bin/python bash scripts/wheelhouse.sh) && ANSIBLE_CONFIG=ansible/ansible.cfg $(VENV)/bin/ansible-playbook \
		-i "$(abspath $(INVENTORY))" ansible/site.yml -e minihpc_wheelhouse_src="$$wheelhouse" $(ARGS)

ansible-check: venv ## Check ansible/: syntax, and ansible-lint with its production profile.
	@cd ansible && ANSIBLE_CONFIG=ansible.cfg ../$(VENV)/bin/ansible-playbook --syntax-check -i inventory.example.yml site.yml setup_cluster.yml
	@cd ansible && PATH="$(abspath $(VENV))/bin:$$PATH" ANSIBLE_CONFIG=ansible.cfg ../$(VENV)/bin/ansible-lint --profile production --offline

VALIDATE_DIR ?= reports/validate
BASELINE ?= stable_v1

##@ Validation
.PHONY: validate
validate: venv ## Validate distributed training locally (no cluster): 1 vs 4 workers at 1e-5, fault-test, baseline (reports/validate/).
	@mkdir -p $(VALIDATE_DIR)
	@$(MINIHPC) validate run --workers 1 --steps 50 --batch-size 64 --seed 42 --output $(VALIDATE_DIR)/single.json
	@$(MINIHPC) validate run --workers 4 --steps 50 --batch-size 64 --seed 42 --output $(VALIDATE_DIR)/multi.json
	@$(MINIHPC) validate compare $(VALIDATE_DIR)/single.json $(VALIDATE_DIR)/multi.json --tolerance 1e-5 \
	  --output $(VALIDATE_DIR)/compare.json --plot $(VALIDATE_DIR)/loss.png
	@$(MINIHPC) validate fault-test --steps 50 --tolerance 0.01 --output $(VALIDATE_DIR)/faults.json
	@if [ -f .minihpc/baselines/$(BASELINE).json ]; then \
	  $(MINIHPC) validate baseline compare --metrics $(VALIDATE_DIR)/multi.json --name $(BASELINE) \
	    --latency-threshold 5.0 --throughput-threshold 5.0 --allow-spread --output $(VALIDATE_DIR)/baseline.json; \
	else echo "no baseline $(BASELINE) yet: this run becomes its first"; fi
	@$(MINIHPC) validate baseline save --metrics $(VALIDATE_DIR)/multi.json --name $(BASELINE)

##@ Development
.PHONY: venv test test-unit test-integration test-ansible test-e2e test-gpu docs bench bench-api bench-recovery bench-balance bench-scale bench-tenancy bench-demo lock
venv: ## Create .venv from the wheelhouse (built once per machine).
	@bash scripts/host-deps.sh venv
	@VENV=$(VENV) bash scripts/venv.sh

test: ## All tests, tier by tier: unit, integration (real local clusters, three side by side; TEST_WORKERS=1 for one), Ansible (systemd hosts over SSH) beside e2e (real containers), those two when Docker runs (TEST_DOCKER_TIERS=serial: one after the other); installs what they need; ends with each tier's time and the slowest tests (build/test-report.txt).
	@bash scripts/host-deps.sh test
	@bash scripts/images-early.sh
	@$(MAKE) --no-print-directory venv
	@$(PY) scripts/test_tiers.py

test-unit: venv ## Only the unit tests (no Redis needed).
	@$(PY) scripts/test_tiers.py unit

test-integration: venv ## Only the integration tests (real redis-server, agents, torchrun), three clusters side by side (TEST_WORKERS=N).
	@bash scripts/host-deps.sh test
	@$(PY) scripts/test_tiers.py integration

test-ansible: venv ## Only the Ansible tests: provision systemd hosts (containers) over real SSH, run jobs and drills on them.
	@bash scripts/host-deps.sh test
	@$(PY) scripts/test_tiers.py ansible

test-e2e: venv ## Only the end-to-end tests against the Compose cluster.
	@bash scripts/host-deps.sh test
	@$(PY) scripts/test_tiers.py e2e

test-gpu: ## The GPU tests (tests/gpu/: NCCL DDP one rank per GPU, GPU isolation, checkpoint and preempt under NCCL, MNIST on CUDA) on a local cluster; each skips with its reason without CUDA. Uses .venv, else GPU_PYTHON with minihpc[node,api,test] installed (a GPU machine without network). Never in CI.
	@bash scripts/test-gpu.sh

docs: venv ## The documentation site (docs/, MkDocs Material) into build/site, strict: a broken link, anchor or page left out of the nav fails it. Open build/site/index.html.
	@$(PY) -m mkdocs build --strict -d build/site

bench: venv ## Benchmarks (bench/results/): the engine against raw torchrun and rq, recovery drills, balanced batches.
	@$(PY) scripts/bench.py
	@$(PY) scripts/bench_api.py
	@$(PY) scripts/bench_recovery.py $(if $(DRILLS),--drills $(DRILLS)) $(if $(CLUSTER),--cluster $(CLUSTER))
	@$(PY) scripts/bench_recovery.py --spare --kinds kill $(if $(DRILLS),--drills $(DRILLS)) $(if $(CLUSTER),--cluster $(CLUSTER))
	@$(PY) scripts/bench_balance.py

bench-balance: venv ## Equal vs speed-balanced batches on a Compose cluster of 0.8, 0.4 and 0.2-CPU nodes (CPUS=a,b,c).
	@$(PY) scripts/bench_balance.py $(if $(CPUS),--cpus $(CPUS))

bench-api: venv ## The REST API under load: CLIENTS (50) SSE clients on one job, /health p50/p95 meanwhile.
	@$(PY) scripts/bench_api.py $(if $(CLIENTS),--clients $(CLIENTS))

bench-scale: venv ## The control plane against size, on simulated nodes: NODES ("10 100 1000") x queued JOBS ("1000 10000 100000"; past 10,000 on the most nodes only unless FULL_GRID=1); goals and verdicts, bench/results/scale.json and scale.svg.
	@$(PY) scripts/bench_scale.py $(if $(NODES),--nodes "$(NODES)") $(if $(JOBS),--jobs "$(JOBS)") $(if $(FULL_GRID),--full-grid)

bench-tenancy: venv ## On Compose: submit -> first barrier of a 3-node job with every job as one account vs each as its owner (SAMPLES, 5).
	@$(PY) scripts/bench_tenancy.py

bench-recovery: venv ## Only the recovery benchmark: DRILLS (5) each of kill, stop, pause (disconnect), heartbeats only vs crash events; then kills with a node to spare; then a fixed-size job beside an elastic one.
	@$(PY) scripts/bench_recovery.py $(if $(DRILLS),--drills $(DRILLS)) $(if $(CLUSTER),--cluster $(CLUSTER))
	@$(PY) scripts/bench_recovery.py --spare --kinds kill $(if $(DRILLS),--drills $(DRILLS)) $(if $(CLUSTER),--cluster $(CLUSTER))
	@$(PY) scripts/bench_recovery.py --elastic $(if $(DRILLS),--drills $(DRILLS)) $(if $(CLUSTER),--cluster $(CLUSTER))

bench-demo: ## The first make demo as on a fresh machine, then a second: DELETES minihpc's images, volumes, venv and caches first (FRESH=1).
	$(NEED_COMPOSE)
	@COMPOSE="$(COMPOSE)" VENV=$(VENV) $(if $(FRESH),FRESH=$(FRESH)) bash scripts/bench-demo.sh

lock: venv ## Re-pin requirements.lock (with hashes) and constraints.txt from pyproject.toml's ranges (needs PyPI; UPGRADE=1 takes the newest they allow).
	@$(VENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --extra node --extra api --extra vision --extra test $(if $(UPGRADE),--upgrade) -o requirements.lock pyproject.toml
	@{ head -2 constraints.txt; sed -n 's/^\([A-Za-z0-9][^ ]*==[^ ]*\).*/\1/p' requirements.lock; } > constraints.txt.new && \
	  mv constraints.txt.new constraints.txt && echo "requirements.lock and constraints.txt updated"
