"""The package's public names are what the docs say they are, whatever is imported first.

`from trainer_emitter import setup, report` once returned the submodule `trainer_emitter.report`
as `report`: importing the first name imported a submodule of the same name as the second,
and Python binds a submodule onto its package. Each test below starts a fresh interpreter, since
only a fresh one shows what a training job's first import does.
"""

from __future__ import annotations

import inspect
import json
import pkgutil
import random
import subprocess
import sys
import textwrap
from types import ModuleType

import pytest

import trainer_emitter
from tests.conftest import REPO

PUBLIC = list(trainer_emitter.__all__)

# What each public name is, as README.md and the package docstring document it.
FUNCTIONS = {"report", "setup", "gather_rank_map", "local_rank_info"}
CLASSES = {
    "AwsSink",
    "ConfigurationError",
    "DeliveryError",
    "EmfSink",
    "Emitter",
    "EmitterConfig",
    "MemorySink",
    "Metric",
    "RankInfo",
    "RankMap",
    "ReportResult",
    "Role",
}
CONSTANTS = {"DIMENSIONS", "NAMESPACE", "REPORT_DETAIL_TYPE", "REPORT_SOURCE", "__version__"}

# In a fresh interpreter: import `first` alone, then every other name in `order`, each with its
# own `from trainer_emitter import NAME`; print what each name turned out to be.
PROBE = """
import importlib, inspect, json, sys, types
import trainer_emitter
first, order = {first!r}, {order!r}
seen = {{}}
for name in [first, *order]:
    value = getattr(importlib.import_module("trainer_emitter"), name)
    exec(f"from trainer_emitter import {{name}} as _v", globals())
    assert _v is value, name
    kind = (
        "module" if isinstance(value, types.ModuleType)
        else "class" if inspect.isclass(value)
        else "function" if inspect.isfunction(value)
        else "constant"
    )
    home = getattr(value, "__module__", None)
    seen[name] = [kind, home]
print(json.dumps(seen))
"""


def probe(first: str, order: list[str]) -> dict[str, list[str | None]]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE.format(first=first, order=order))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def expected_kind(name: str) -> str:
    if name in FUNCTIONS:
        return "function"
    if name in CLASSES:
        return "class"
    assert name in CONSTANTS, f"{name} is public but this test does not say what it is"
    return "constant"


def test_every_public_name_is_documented_here_as_a_function_class_or_constant():
    assert set(PUBLIC) == FUNCTIONS | CLASSES | CONSTANTS


def test_no_submodule_is_named_like_a_public_name():
    # Given the package's submodules and subpackages
    submodules = {info.name for info in pkgutil.iter_modules(trainer_emitter.__path__)}

    # Then none can be bound over a public name of the package when it is imported
    assert submodules.isdisjoint(PUBLIC), sorted(submodules & set(PUBLIC))


def test_the_readme_import_gives_the_report_function():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from trainer_emitter import setup, report; assert callable(report), report; "
            "assert callable(setup); assert report.__module__ == 'trainer_emitter.emitter'",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("first", PUBLIC)
def test_each_public_name_is_what_the_docs_say_whichever_is_imported_first(first):
    # Given a fresh interpreter whose first import is `first`, then every other name in an
    # order of its own (forward for some, shuffled for others)
    rest = [name for name in PUBLIC if name != first]
    random.Random(first).shuffle(rest)

    # When each name is imported
    seen = probe(first, rest)

    # Then each is the function, class or constant its documentation names, never a module
    for name, (kind, home) in seen.items():
        assert kind == expected_kind(name), (name, kind, home)
        if kind in ("function", "class"):
            value = getattr(trainer_emitter, name)
            assert home == value.__module__, (name, home)
            assert home.startswith("trainer_emitter."), (name, home)


def test_the_names_bound_here_are_not_modules():
    # The same, in this interpreter, where every test before has imported what it liked
    for name in PUBLIC:
        value = getattr(trainer_emitter, name)
        assert not isinstance(value, ModuleType), name
        if name in FUNCTIONS:
            assert inspect.isfunction(value), name
