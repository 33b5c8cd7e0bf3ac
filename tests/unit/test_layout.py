"""The layout reads as the pipeline: the import graph of the project's code has no cycle and no
arrow against its layers, `lambdas/logic/` keeps its stages on top and its machinery in folders,
and `sdc_remediation.lambdas.logic.STAGES` is the map of what each handler calls."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import sdc_remediation.infra
import sdc_remediation.lambdas
import trainer_emitter
from sdc_remediation.lambdas.logic import STAGES
from tests.conftest import REPO

IMPORT_NAMES = {
    Path(str(sdc_remediation.lambdas.__file__))
    .resolve()
    .parent.name: sdc_remediation.lambdas.__name__,
    Path(str(sdc_remediation.infra.__file__)).resolve().parent.name: sdc_remediation.infra.__name__,
    Path(str(trainer_emitter.__file__)).resolve().parent.name: trainer_emitter.__name__,
}
"""Each folder of the project's code → the name its modules are imported by."""
PACKAGES = tuple(IMPORT_NAMES)
LOGIC = REPO / "lambdas" / "logic"
FOLDERS = ("core", "evidence", "safety", "opening")
"""The logic's folders, bottom up: each imports only the ones before it (and no stage)."""
STAGE_MODULES = frozenset(
    path.stem
    for path in [*LOGIC.glob("*.py"), *LOGIC.glob("*/__init__.py")]
    if path.stem not in {"__init__", "ports"}
) | frozenset(
    path.parent.name for path in LOGIC.glob("*/__init__.py") if path.parent.name not in FOLDERS
)
"""The stages: a module, or a package whose steps are in its `__init__` (`recovery`)."""

NEVER: tuple[tuple[str, str, str], ...] = (
    (
        sdc_remediation.lambdas.__name__,
        sdc_remediation.infra.__name__,
        "the functions ship without the stack, CLI or local run",
    ),
    (
        trainer_emitter.__name__,
        sdc_remediation.lambdas.__name__,
        "training code installs the emitter alone",
    ),
    (
        trainer_emitter.__name__,
        sdc_remediation.infra.__name__,
        "training code installs the emitter alone",
    ),
    ("sdc_remediation.lambdas.models", "sdc_remediation.lambdas.logic", "records know no logic"),
    ("sdc_remediation.lambdas.models", "sdc_remediation.lambdas.adapters", "records know no AWS"),
    (
        "sdc_remediation.lambdas.models",
        "sdc_remediation.lambdas.handlers",
        "records know no handler",
    ),
    (
        "sdc_remediation.lambdas.models",
        "sdc_remediation.lambdas.wording",
        "records know no wording",
    ),
    (
        "sdc_remediation.lambdas.wording",
        "sdc_remediation.lambdas.logic",
        "wording reads the incident record only",
    ),
    (
        "sdc_remediation.lambdas.wording",
        "sdc_remediation.lambdas.adapters",
        "wording reads the incident record only",
    ),
    (
        "sdc_remediation.lambdas.wording",
        "sdc_remediation.lambdas.handlers",
        "wording reads the incident record only",
    ),
    (
        "sdc_remediation.lambdas.logic.core",
        "sdc_remediation.lambdas.wording",
        "the step every handler runs as words nothing",
    ),
    (
        "sdc_remediation.lambdas.logic.evidence",
        "sdc_remediation.lambdas.wording",
        "knowing the evidence never words it",
    ),
    (
        "sdc_remediation.lambdas.logic",
        "sdc_remediation.lambdas.adapters",
        "the logic reaches AWS through its ports only",
    ),
    (
        "sdc_remediation.lambdas.logic",
        "sdc_remediation.lambdas.handlers",
        "handlers call the logic, not the other way",
    ),
    (
        "sdc_remediation.lambdas.adapters",
        "sdc_remediation.lambdas.handlers",
        "handlers build the adapters",
    ),
    (
        "sdc_remediation.lambdas.adapters",
        "sdc_remediation.lambdas.logic.",
        "adapters implement the ports, nothing more",
    ),
    (
        "sdc_remediation.infra.stack",
        "sdc_remediation.infra.cli",
        "the stack deploys without the operator CLI",
    ),
    (
        "sdc_remediation.infra.stack",
        "sdc_remediation.infra.local",
        "the stack deploys without the local run",
    ),
    (
        "sdc_remediation.infra.cli",
        "sdc_remediation.infra.local",
        "the operator CLI runs against an account, never the simulator",
    ),
    *(
        (
            f"sdc_remediation.lambdas.logic.{folder}",
            f"sdc_remediation.lambdas.logic.{stage}",
            "machinery never reaches up",
        )
        for folder in FOLDERS
        for stage in sorted(STAGE_MODULES)
    ),
    *(
        (
            f"sdc_remediation.lambdas.logic.{lower}",
            f"sdc_remediation.lambdas.logic.{higher}",
            "the folders are layered",
        )
        for i, lower in enumerate(FOLDERS)
        for higher in FOLDERS[i + 1 :]
    ),
)
"""(importer prefix, imported prefix, why): an import the layers forbid. `sdc_remediation.lambdas.adapters` may
import `sdc_remediation.lambdas.logic.ports` (the Protocols it implements) and nothing else of the logic."""


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(REPO).with_suffix("").parts
    parts = [*IMPORT_NAMES[folder].split("."), *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def imports_of(path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The project modules `path` imports anywhere in it (functions and TYPE_CHECKING blocks
    included): `from package import name` counts as an import of the submodule where one is
    named so."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return {name for name in found if name in modules}


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def violations(edges: Mapping[str, Iterable[str]]) -> list[str]:
    def under(name: str, prefix: str) -> bool:
        return name == prefix.rstrip(".") or name.startswith(prefix.rstrip(".") + ".")

    return sorted(
        f"{importer} -> {imported}: {why}"
        for importer, targets in edges.items()
        for imported in targets
        for source, forbidden, why in NEVER
        if under(importer, source)
        and under(imported, forbidden)
        and not (
            forbidden == "sdc_remediation.lambdas.logic."
            and imported == "sdc_remediation.lambdas.logic.ports"
        )
    )


def test_the_import_graph_of_the_project_has_no_cycle():
    assert cycles(graph()) == []


def test_a_cycle_is_found_where_two_modules_import_each_other():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(edges) == [["a", "b", "c"]]


def test_no_import_runs_against_the_layers():
    assert violations(graph()) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("sdc_remediation.lambdas.wording.cards", "sdc_remediation.lambdas.logic.approval"),
        ("sdc_remediation.lambdas.wording.cards", "sdc_remediation.lambdas.logic.core.lifecycle"),
        (
            "sdc_remediation.lambdas.wording.card_lines",
            "sdc_remediation.lambdas.logic.evidence.summaries",
        ),
        ("sdc_remediation.lambdas.logic.core.steps", "sdc_remediation.lambdas.wording.chat"),
        (
            "sdc_remediation.lambdas.logic.core.steps",
            "sdc_remediation.lambdas.logic.evidence.recommendation",
        ),
        ("sdc_remediation.lambdas.logic.evidence.history", "sdc_remediation.lambdas.wording.cards"),
        ("sdc_remediation.lambdas.models.lifecycle_event", "sdc_remediation.lambdas.wording.cards"),
        ("sdc_remediation.lambdas.logic.core.steps", "sdc_remediation.lambdas.logic.safety.guard"),
        (
            "sdc_remediation.lambdas.logic.safety.guard",
            "sdc_remediation.lambdas.logic.recovery.engine",
        ),
        ("sdc_remediation.lambdas.logic.opening.claims", "sdc_remediation.lambdas.logic.recovery"),
        ("sdc_remediation.lambdas.models.incident", "sdc_remediation.lambdas.logic.core.lifecycle"),
        ("sdc_remediation.lambdas.logic.intake", "sdc_remediation.lambdas.adapters.dynamodb"),
        ("sdc_remediation.infra.stack.functions", "sdc_remediation.infra.local.run"),
        ("sdc_remediation.lambdas.handlers.decide", "sdc_remediation.infra.stack.settings"),
    ],
)
def test_an_import_against_the_layers_is_reported(importer, imported):
    assert len(violations({importer: {imported}})) >= 1


def test_the_logic_lists_at_most_thirteen_entries_each_folder_saying_what_it_holds():
    entries = sorted(p.name for p in LOGIC.iterdir() if p.name != "__pycache__")
    folders = [p for p in LOGIC.iterdir() if p.is_dir() and p.name != "__pycache__"]

    assert len(entries) <= 13, entries
    assert folders
    for folder in folders:
        assert importlib.import_module(f"sdc_remediation.lambdas.logic.{folder.name}").__doc__, (
            folder.name
        )


def _imported_function(handler: str) -> set[tuple[str, str]]:
    """(module, name) of each `from sdc_remediation.lambdas.logic... import name` of a handler module."""
    tree = ast.parse((REPO / "lambdas" / "handlers" / f"{handler}.py").read_text())
    return {
        (node.module.removeprefix("sdc_remediation.lambdas.logic."), alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("sdc_remediation.lambdas.logic.")
        for alias in node.names
    }


def test_the_map_in_the_docstring_is_the_stage_map():
    import sdc_remediation.lambdas.logic

    rows = [
        [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        for line in (sdc_remediation.lambdas.logic.__doc__ or "").splitlines()
        if line.startswith("| `")
    ]

    assert [(row[0], row[1]) for row in rows] == [
        (stage.handler, stage.function.replace(":", ".")) for stage in STAGES
    ]


def test_the_stage_map_names_every_handler_once():
    handlers = sorted(p.stem for p in (REPO / "lambdas" / "handlers").glob("[a-z]*.py"))

    assert sorted(stage.handler for stage in STAGES) == handlers


@pytest.mark.parametrize("stage", STAGES, ids=[stage.handler for stage in STAGES])
def test_each_handler_calls_the_function_the_stage_map_names(stage):
    module, function = stage.function.split(":")

    assert (module, function) in _imported_function(stage.handler)
    assert callable(
        getattr(importlib.import_module(f"sdc_remediation.lambdas.logic.{module}"), function)
    )


def test_the_stage_map_names_the_states_that_invoke_each_handler():
    from sdc_remediation.infra.stack.definitions import approval_definition, remediation_definition
    from sdc_remediation.infra.stack.settings import DeploymentSettings

    arns = {stage.handler: f"arn:function:{stage.handler}" for stage in STAGES}
    definitions = (
        remediation_definition(arns, DeploymentSettings.from_context({}), "arn:approval"),
        approval_definition(arns["decide"]),
    )
    invoked_by: dict[str, set[str]] = {}

    def walk(states: Mapping[str, dict]) -> None:
        for name, state in states.items():
            target = state.get("Parameters", {}).get("FunctionName")
            if target:
                invoked_by.setdefault(target.rpartition(":")[2], set()).add(name)
            for branch in state.get("Branches", []):
                walk(branch["States"])

    for definition in definitions:
        walk(definition["States"])

    assert {stage.handler: set(stage.states) for stage in STAGES if stage.states} == invoked_by


def test_an_execution_first_calls_the_function_the_stage_map_says_it_calls_first():
    # Given the remediation definition, and the map that says an execution isolates first
    from sdc_remediation.infra.stack.definitions import remediation_definition
    from sdc_remediation.infra.stack.settings import DeploymentSettings

    arns = {stage.handler: f"arn:function:{stage.handler}" for stage in STAGES}
    definition = remediation_definition(arns, DeploymentSettings.from_context({}), "arn:approval")
    # When an execution runs from its start through the states that call no function
    name = definition["StartAt"]
    while "FunctionName" not in definition["States"][name].get("Parameters", {}):
        name = definition["States"][name]["Next"]
    # Then the first function it calls is the first the map names for a state, isolate_node
    first = next(stage for stage in STAGES if stage.states)
    assert (name, first.handler) == ("IsolateNode", "isolate_node")
    assert name in first.states
    assert definition["States"][name]["Parameters"]["FunctionName"] == arns[first.handler]


def _reaches_the_tests(path: Path) -> list[str]:
    """The imports of `path` that name the tests' package (`tests` or one of its modules)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [n for n in names if n == "tests" or n.startswith("tests.")]
    return found


def test_nothing_that_ships_imports_the_tests():
    """The wheel holds no tests: a module that imports them fails where a team installs it
    (the fleet what-if once took its fakes and fixtures from there)."""
    reaching = {
        name: found
        for name, path in project_modules().items()
        if (found := _reaches_the_tests(path))
    }

    assert reaching == {}


def test_an_import_of_the_tests_is_found(tmp_path):
    module = tmp_path / "whatif.py"
    module.write_text("from tests.unit.world import World\nimport json\n")

    assert _reaches_the_tests(module) == ["tests.unit.world"]
