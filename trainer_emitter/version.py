"""The project's one version: both distributions (the root pyproject.toml and
distributions/emitter/pyproject.toml) read it, `sdc --version` and `sdc-replay-spool --version`
print it, and `trainer_emitter.__version__` is it. A module of its own, which imports nothing,
so that whatever prints it adds no import cycle, and the Lambda asset (which ships the package's
`__init__` and contract only) never loads it."""

__version__ = "0.1.0"
