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
RUN_PYTEST = $(PY) -m pytest $(XDIST) $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests; refusing to call that a pass" >&2; exit 1; fi; \
	exit $$rc

.PHONY: test test-fast lint format typecheck synth deploy drill bench bench-gpu clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(VALIDATORS_STAMP): requirements-validators.txt
	$(PYTHON) -m venv $(VALIDATORS_VENV)
	$(VALIDATORS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VALIDATORS_VENV)/bin/python -m pip install --quiet -r requirements-validators.txt
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
test: $(STAMP) $(NODE_STAMP) $(VALIDATORS_STAMP) $(PROMETHEUS) $(SLURMCTLD)
	@$(call RUN_PYTEST,)

# The everyday loop: the tests that need no synthesized template, no torch and no end-to-end
# run (markers synth, torch, slow; tests/e2e and tests/torch are not even imported).
test-fast: $(STAMP) $(PROMETHEUS) $(SLURMCTLD)
	@$(call RUN_PYTEST,-m "not synth and not torch and not slow" --ignore=tests/e2e --ignore=tests/torch)

# The whole pipeline on this machine (moto + a fake HyperPod): make drill ARGS="--list"
drill: $(STAMP)
	@$(PY) -m infra.local.drill $(ARGS)

# Figures, not timed tests: prints a table and writes bench-results.json (make bench ARGS=emitter)
bench: $(STAMP)
	@$(PY) -m tests.bench $(ARGS)

# The checks on one GPU, under 5 minutes: fused fingerprint parity and throughput, the weight
# check of a 953M-parameter model, step overhead, the fingerprint tests on CUDA tensors.
# Exits 2, measuring nothing, where no CUDA device is. Writes bench-gpu.json.
bench-gpu: $(STAMP)
	@$(PY) -m tests.bench.gpu $(ARGS)

# ruff, mypy, then the outside validators on the synthesized templates (docs/deploy.md).
lint: $(STAMP) $(NODE_STAMP) $(VALIDATORS_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy trainer_emitter lambdas infra tests/unit/fakes.py tests/contract
	$(PY) -m infra.stack.validate

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Writes the CloudFormation template to cdk.out/ with the pinned CDK CLI; offline, no credentials.
synth: $(STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk synth --quiet $(CDK_ARGS)

deploy: $(STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk deploy $(CDK_ARGS)

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache
