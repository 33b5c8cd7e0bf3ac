"""Each setting is declared once (`sdc_remediation.lambdas.models.setting_declarations`): its context key, its
default and its range are written nowhere else in the pipeline's code, and the typed settings of
both sides, the construct's props and the function environment follow the declaration."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.stack import SdcRemediationProps
from sdc_remediation.lambdas.models import settings as functions_side
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.setting_declarations import (
    BY_ATTR,
    DECLARED,
    RENAMED,
    SETTINGS,
    Form,
    with_declared_defaults,
)

REPO = Path(__file__).resolve().parents[2]
DECLARATION = REPO / "lambdas" / "models" / "setting_declarations.py"
ENVIRONMENT = REPO / "lambdas" / "models" / "environment.py"
PIPELINE_CODE = ("lambdas", "trainer_emitter", "infra/stack", "infra/cli", "infra/construct.py")
USERS_OF_THE_SETTINGS = {REPO / "infra" / "stack" / "validate.py"}
"""The example context the outside validators synthesize: it gives values, as a `cdk.json` or the
drill's scenarios (`infra/local`) do, and declares nothing."""


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        path = REPO / root
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            if file not in USERS_OF_THE_SETTINGS:
                yield file


def string_constants(file: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno


def where_written(texts: set[str], roots: tuple[str, ...]) -> dict[str, list[str]]:
    """Each text → the places (file:line) it is written as a whole string literal."""
    found: dict[str, list[str]] = {text: [] for text in texts}
    for file in python_files(*roots):
        for value, line in string_constants(file):
            if value in found:
                found[value].append(f"{file.relative_to(REPO)}:{line}")
    return found


def literal_constants(file: Path) -> Iterator[tuple[str, int]]:
    """Module-level names assigned a literal (a number, a string, a tuple of them)."""
    for node in ast.parse(file.read_text(), str(file)).body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        literal = isinstance(value, ast.Constant) or (
            isinstance(value, ast.Tuple) and all(isinstance(e, ast.Constant) for e in value.elts)
        )
        if isinstance(target, ast.Name) and literal:
            yield target.id, node.lineno


def test_each_context_key_is_written_in_the_declaration_only():
    keys = {setting.key for setting in SETTINGS} | set(RENAMED)
    declaration = str(DECLARATION.relative_to(REPO))

    written = where_written(keys, PIPELINE_CODE)

    assert {
        key: places
        for key, places in written.items()
        if [place.split(":")[0] for place in places] != [declaration]
    } == {}


def test_each_environment_variable_name_is_written_once_in_its_enum():
    environment = str(ENVIRONMENT.relative_to(REPO))

    written = where_written({name.value for name in EnvVar}, ("lambdas", "infra/stack"))

    assert {
        name: places
        for name, places in written.items()
        if [place.split(":")[0] for place in places] != [environment]
    } == {}


def test_no_module_writes_a_settings_default_or_range_of_its_own():
    own = {f"DEFAULT_{s.attr.upper()}" for s in SETTINGS} | {
        f"{s.attr.upper()}_RANGE" for s in SETTINGS
    }

    found = [
        f"{file.relative_to(REPO)}:{line} {name}"
        for file in python_files(*PIPELINE_CODE)
        for name, line in literal_constants(file)
        if name in own
    ]

    assert found == []


def test_the_deployment_settings_hold_every_declared_setting_and_nothing_else():
    fields = [field.name for field in dataclasses.fields(DeploymentSettings)]

    assert sorted(fields) == sorted(BY_ATTR)


def test_the_construct_props_are_the_declared_settings_and_the_code_asset():
    fields = {field.name for field in dataclasses.fields(SdcRemediationProps)}

    assert fields - {"code_asset"} == set(BY_ATTR)


def test_the_deployment_defaults_are_the_declared_defaults_parsed():
    declared = {s.key: s.default for s in SETTINGS if s.default is not None}

    assert DeploymentSettings.from_context(declared) == DeploymentSettings()


UNCHECKED_WITHOUT_ITS_VARIABLE = {"sdc:approvalTimeoutSeconds"}
"""The functions' own default is None here: without the variable a late decision is left to Step
Functions' refusal of the expired token (the stack always sets it)."""


@pytest.mark.parametrize(
    "setting",
    [
        s
        for s in SETTINGS
        if s.env and not s.env_built and s.key not in UNCHECKED_WITHOUT_ITS_VARIABLE
    ],
    ids=lambda s: s.key,
)
def test_a_setting_carried_as_it_is_defaults_alike_on_the_functions_side(setting):
    base = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "arn:aws:sns:r:1:t"}

    read = functions_side.Settings.from_env(base)

    assert getattr(read, setting.attr) == getattr(DeploymentSettings(), setting.attr)


@pytest.mark.parametrize(
    "setting", [s for s in SETTINGS if s.form is Form.INTEGER and s.env], ids=lambda s: s.key
)
def test_the_functions_accept_exactly_the_declared_range(setting):
    base = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "arn:aws:sns:r:1:t"}

    def accepts(value: int) -> bool:
        try:
            functions_side.Settings.from_env({**base, setting.env: str(value)})
        except ValueError:
            return False
        return True

    assert [accepts(v) for v in (setting.low - 1, setting.low, setting.high, setting.high + 1)] == [
        False,
        True,
        True,
        False,
    ]


def test_an_attribute_marked_declared_that_no_setting_holds_is_refused_at_import():
    class Typo:
        guard_max_open_node: int = DECLARED

    with pytest.raises(TypeError, match="guard_max_open_node"):
        with_declared_defaults(Typo)
