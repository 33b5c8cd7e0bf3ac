# Every target sets itself up on a fresh machine: the first run creates .venv and installs
# the project with its development extras; later runs reuse it until pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# The outside validators (parliament, checkov) in an environment of their own: checkov pins
# packages the project's own environment has at other versions.
VALIDATORS_VENV  := $(VENV)/validators
VALIDATORS_STAMP := $(VALIDATORS_VENV)/.installed
# The hardware-telemetry tests query a real Prometheus: Debian's package (prometheus, promtool).
# The binary is the stamp: installed once, as root, whenever it is missing.
PROMETHEUS := /usr/bin/prometheus
# The dashboard page's tests render the widget in headless Chromium: Debian's package, the same way.
CHROMIUM := /usr/bin/chromium
# The hardware alert manager definition is checked by amtool: Debian's prometheus-alertmanager,
# installed the same way.
AMTOOL := /usr/bin/amtool
# The Slurm tests run a real controller: Debian's slurmctld, scontrol (slurm-client) and munge.
SLURMCTLD := /usr/sbin/slurmctld
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
# Node 20 is what the machine has; jsii warns that it is past end of life on every call.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

# pytest-xdist: a worker per core; a module's tests stay on one worker (tests/conftest.py), so
# what its module fixtures build is built once.
XDIST := -n auto --dist loadscope
# pytest exits 5 when it collects nothing: that is a failure here, said out loud, never a silent
# green. $(1): the selection.
MYPY = $(PY) -m mypy trainer_emitter lambdas infra tests/unit/fakes.py tests/contract
# Node.js and npm, checked before anything runs them: one line that says what to install.
# Standard library only, with the system Python: it runs before .venv exists.
CHECK_NODE = $(PYTHON) -m infra.stack.toolchain --npm --for "make $@"
RUN_PYTEST = $(PY) -m pytest $(XDIST) $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests; refusing to call that a pass" >&2; exit 1; fi; \
	exit $$rc

.PHONY: help test test-fast lint format typecheck synth deploy drill bench bench-gpu clean
.DEFAULT_GOAL := help

# `make` alone, or `make help`: each target and its one line (the `## ` text on its rule line).
help: ## list the targets, one line each
	@echo "make TARGET, one of these (a target that needs .venv or node_modules sets it up first):"
	@sed -n 's/^\([a-z][a-z-]*\):.*## \(.*\)$$/\1\t\2/p' $(firstword $(MAKEFILE_LIST)) | \
		while IFS="$$(printf '\t')" read -r target text; do printf '  %-10s %s\n' "$$target" "$$text"; done

# The set-up steps say what they do and how long it took: the first one takes minutes.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	@echo "make: setting up $(VENV): the project with its dev extras (torch, the CDK, moto, ...); the first time takes minutes"
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VENV) && \
	$(PY) -m pip install --quiet --upgrade pip && \
	$(PY) -m pip install --quiet -e '.[dev]' && \
	echo "make: $(VENV) ready in $$(( $$(date +%s) - start )) s"
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	@$(CHECK_NODE)
	@echo "make: installing the pinned CDK CLI and ASL validator into node_modules (npm ci)"
	@start=$$(date +%s); \
	npm ci --no-audit --no-fund --loglevel=error && \
	echo "make: node_modules ready in $$(( $$(date +%s) - start )) s"
	@touch $@

$(VALIDATORS_STAMP): requirements-validators.txt
	@echo "make: setting up the outside validators (parliament, checkov) in $(VALIDATORS_VENV)"
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VALIDATORS_VENV) && \
	$(VALIDATORS_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	$(VALIDATORS_VENV)/bin/python -m pip install --quiet -r requirements-validators.txt && \
	echo "make: validators ready in $$(( $$(date +%s) - start )) s"
	@touch $@

# As root (CI) it installs the package; otherwise it says what to run, and stops. On a host run
# by systemd the package also enables its own service on :9090: the tests never use it.
$(PROMETHEUS):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's prometheus package for the hardware-telemetry tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus; \
	else \
		echo "make test needs Debian's prometheus package (prometheus and promtool in /usr/bin)." >&2; \
		echo "Install it as root:  apt-get update && apt-get install -y prometheus" >&2; \
		exit 1; \
	fi
	@test -x $@ && test -x /usr/bin/promtool || { echo "make: $@ or /usr/bin/promtool still missing" >&2; exit 1; }

# As root it installs Debian's chromium package (the page's browser tests); otherwise it says what
# to run, and stops.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's chromium package for the dashboard page's browser tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
		echo "make test needs Debian's chromium package (/usr/bin/chromium, run headless)." >&2; \
		echo "Install it as root:  apt-get update && apt-get install -y chromium" >&2; \
		exit 1; \
	fi
	@test -x $@ || { echo "make: $@ still missing" >&2; exit 1; }

$(AMTOOL):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's prometheus-alertmanager package (amtool) for the alert manager test"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus-alertmanager; \
	else \
		echo "make test needs Debian's prometheus-alertmanager package (amtool in /usr/bin)." >&2; \
		echo "Install it as root:  apt-get update && apt-get install -y prometheus-alertmanager" >&2; \
		exit 1; \
	fi
	@test -x $@ || { echo "make: $@ still missing" >&2; exit 1; }

# As for prometheus: as root it installs Debian's Slurm packages, otherwise it says what to run.
$(SLURMCTLD):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's slurmctld, slurm-client and munge for the Slurm tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slurmctld slurm-client munge; \
	else \
		echo "make test needs Debian's slurmctld, slurm-client and munge packages." >&2; \
		echo "Install them as root:  apt-get update && apt-get install -y slurmctld slurm-client munge" >&2; \
		exit 1; \
	fi
	@test -x $@ && test -x /usr/bin/scontrol && test -x /usr/sbin/munged || { echo "make: $@, /usr/bin/scontrol or /usr/sbin/munged still missing" >&2; exit 1; }

# The README's test command: every test. The infra tests run the outside validators too.
test: $(STAMP) $(NODE_STAMP) $(VALIDATORS_STAMP) $(PROMETHEUS) $(CHROMIUM) $(AMTOOL) $(SLURMCTLD) ## every test (the README's test command)
	@$(call RUN_PYTEST,)

# The everyday loop: the tests that need no synthesized template, no torch and no end-to-end
# run (markers synth, torch, slow; tests/e2e and tests/torch are not even imported).
test-fast: $(STAMP) $(PROMETHEUS) $(CHROMIUM) $(AMTOOL) $(SLURMCTLD) ## the tests that need no template, no torch, no end-to-end run
	@$(call RUN_PYTEST,-m "not synth and not torch and not slow" --ignore=tests/e2e --ignore=tests/torch)

# The whole pipeline on this machine (moto + a fake HyperPod): make drill ARGS="--list"
drill: $(STAMP) ## the whole pipeline on this machine, on moto (ARGS="--list")
	@$(PY) -m infra.local.drill $(ARGS)

# Figures, not timed tests: prints a table and writes bench-results.json (make bench ARGS=emitter)
bench: $(STAMP) ## the benchmarks: a table and bench-results.json (ARGS=emitter)
	@$(PY) -m tests.bench $(ARGS)

# The checks on one GPU, under 5 minutes: fused fingerprint parity and throughput, the weight
# check of a 953M-parameter model, step overhead, the fingerprint tests on CUDA tensors.
# Exits 2, measuring nothing, where no CUDA device is. Writes bench-gpu.json.
bench-gpu: $(STAMP) ## the checks on one CUDA GPU, under 5 minutes: bench-gpu.json
	@$(PY) -m tests.bench.gpu $(ARGS)

# ruff, mypy, then the outside validators on the synthesized templates (docs/deploy.md).
lint: $(STAMP) $(NODE_STAMP) $(VALIDATORS_STAMP) ## ruff, mypy, the outside validators on the templates
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(MYPY)
	$(PY) -m infra.stack.validate

# mypy alone (make lint runs it too).
typecheck: $(STAMP) ## mypy on the code and the test fakes
	$(MYPY)

format: $(STAMP) ## ruff format, then ruff check --fix
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Writes the CloudFormation template to cdk.out/ with the pinned CDK CLI; offline, no credentials.
synth: $(STAMP) $(NODE_STAMP) ## the CloudFormation template into cdk.out/ (offline, no credentials)
	@$(CHECK_NODE)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk synth --quiet $(CDK_ARGS)

deploy: $(STAMP) $(NODE_STAMP) ## cdk deploy with the pinned CLI (CDK_ARGS="-c sdc:...")
	@$(CHECK_NODE)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk deploy $(CDK_ARGS)

clean: ## remove .venv, node_modules and what the tools wrote
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache
