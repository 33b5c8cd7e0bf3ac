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
# The tests run real outside programs, from Debian's packages: Prometheus and promtool (the
# hardware telemetry and alert rules), amtool (the alert manager definition), Chromium (the
# dashboard page, headless), a Slurm controller with scontrol and munge (the Slurm drain). Each
# is `binary=package`; the binaries are the stamps: whatever is missing is installed, as root,
# in one apt-get run.
DEBIAN_TOOLS := /usr/bin/prometheus=prometheus /usr/bin/promtool=prometheus \
	/usr/bin/amtool=prometheus-alertmanager /usr/bin/chromium=chromium \
	/usr/sbin/slurmctld=slurmctld /usr/bin/scontrol=slurm-client /usr/sbin/munged=munge
DEBIAN_BINARIES := $(foreach tool,$(DEBIAN_TOOLS),$(firstword $(subst =, ,$(tool))))
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
# Node 20 is what the machine has; jsii warns that it is past end of life on every call.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

# pytest-xdist: a worker per core; a module's tests stay on one worker (tests/conftest.py), so
# what its module fixtures build is built once.
XDIST := -n auto --dist loadscope
# pytest exits 5 when it collects nothing: that is a failure here, said out loud, never a silent
# green. $(1): the selection.
MYPY = $(PY) -m mypy trainer_emitter sdc_remediation tests/contract
# Node.js and npm, checked before anything runs them: one line that says what to install.
# Standard library only, with the system Python: it runs before .venv exists.
CHECK_NODE = $(PYTHON) -m sdc_remediation.infra.stack.toolchain --npm --for "make $@"
RUN_PYTEST = $(PY) -m pytest $(XDIST) $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests; refusing to call that a pass" >&2; exit 1; fi; \
	exit $$rc

.PHONY: help test test-fast lint format typecheck synth deploy drill bench bench-gpu clean fleet
.DEFAULT_GOAL := help

# `make` alone, or `make help`: each target and its one line (the `## ` text on its rule line).
help: ## list the targets, one line each
	@echo "make TARGET, one of these (a target that needs .venv or node_modules sets it up first):"
	@sed -n 's/^\([a-z][a-z-]*\):.*## \(.*\)$$/\1\t\2/p' $(firstword $(MAKEFILE_LIST)) | \
		while IFS="$$(printf '\t')" read -r target text; do printf '  %-10s %s\n' "$$target" "$$text"; done

# The set-up steps say what they do and how long it took: the first one takes minutes. Each long
# command runs through STEP (infra/stack/steps.py, standard library only), which prints a line at
# least every 8 s while it runs (the time so far and pip's or npm's latest line) and the
# command's last lines if it fails.
STEP := $(PYTHON) -m sdc_remediation.infra.stack.steps
PIP_TALKS := --progress-bar off --disable-pip-version-check

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	@echo "make: setting up $(VENV): the project with its dev extras (torch, the CDK, moto, ...); the first time takes minutes"
	@start=$$(date +%s); \
	$(STEP) "creating $(VENV)" -- $(PYTHON) -m venv $(VENV) && \
	$(STEP) "upgrading pip in $(VENV)" -- $(PY) -m pip install $(PIP_TALKS) --upgrade pip && \
	$(STEP) "installing the project with its dev extras" -- $(PY) -m pip install $(PIP_TALKS) -e '.[dev]' && \
	echo "make: $(VENV) ready in $$(( $$(date +%s) - start )) s"
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	@$(CHECK_NODE)
	@start=$$(date +%s); \
	$(STEP) "installing the pinned CDK CLI and ASL validator into node_modules (npm ci)" -- \
		npm ci --no-audit --no-fund --loglevel=http && \
	echo "make: node_modules ready in $$(( $$(date +%s) - start )) s"
	@touch $@

$(VALIDATORS_STAMP): requirements-validators.txt
	@echo "make: setting up the outside validators (parliament, checkov) in $(VALIDATORS_VENV)"
	@start=$$(date +%s); \
	$(STEP) "creating $(VALIDATORS_VENV)" -- $(PYTHON) -m venv $(VALIDATORS_VENV) && \
	$(STEP) "upgrading pip in $(VALIDATORS_VENV)" -- \
		$(VALIDATORS_VENV)/bin/python -m pip install $(PIP_TALKS) --upgrade pip && \
	$(STEP) "installing the validators" -- \
		$(VALIDATORS_VENV)/bin/python -m pip install $(PIP_TALKS) -r requirements-validators.txt && \
	echo "make: validators ready in $$(( $$(date +%s) - start )) s"
	@touch $@

# As root (CI) it installs the missing packages; otherwise it says what to run, and stops. On a
# host run by systemd, prometheus and slurmctld also enable their own services: the tests never
# use them (they start their own on free ports).
$(DEBIAN_BINARIES) &:
	@missing=$$(for tool in $(DEBIAN_TOOLS); do test -x "$${tool%%=*}" || echo "$${tool#*=}"; done | sort -u | tr '\n' ' ' | sed 's/ $$//'); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's $$missing (real Prometheus, Alertmanager, Chromium and Slurm for the tests)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	else \
		echo "make test needs Debian's packages: $$missing" >&2; \
		echo "Install them as root:  apt-get update && apt-get install -y $$missing" >&2; \
		exit 1; \
	fi
	@for binary in $(DEBIAN_BINARIES); do test -x $$binary || { echo "make: $$binary still missing" >&2; exit 1; }; done

# The README's test command: every test. The infra tests run the outside validators too.
test: $(STAMP) $(NODE_STAMP) $(VALIDATORS_STAMP) $(DEBIAN_BINARIES) ## every test (the README's test command)
	@$(call RUN_PYTEST,)

# The everyday loop: the tests that need no synthesized template, no torch and no end-to-end
# run (markers synth, torch, slow; tests/e2e and tests/torch are not even imported).
test-fast: $(STAMP) $(DEBIAN_BINARIES) ## the tests that need no template, no torch, no end-to-end run
	@$(call RUN_PYTEST,-m "not synth and not torch and not slow" --ignore=tests/e2e --ignore=tests/torch)

# The whole pipeline on this machine (moto + a fake HyperPod): make drill ARGS="--list"
drill: $(STAMP) ## the whole pipeline on this machine, on moto (ARGS="--list")
	@$(PY) -m sdc_remediation.infra.local.drill $(ARGS)

# A failure history replayed through the pipeline's logic on a 2,048-instance fake cluster, beside
# HyperPod's own recovery: make fleet ARGS="--history ours.csv --settings ours.json"
fleet: $(STAMP) ## the fleet what-if: Llama 3's failure history through the pipeline (ARGS="--history F.csv")
	@$(PY) -m sdc_remediation.infra.local.fleet $(ARGS)

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
	$(PY) -m sdc_remediation.infra.stack.validate

# mypy alone (make lint runs it too).
typecheck: $(STAMP) ## mypy on the code (the in-memory fakes included) and the contract tests
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
