"""Each construct takes what it uses: a frozen props dataclass of its own module, never the whole
`DeploymentSettings`; the stack's and `Functions`' constructors stay a short list of parts."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from types import ModuleType

import pytest
from aws_cdk import Stack
from constructs import Construct

from sdc_remediation.infra.stack.functions import Functions
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.stack import SdcRemediation, SdcRemediationStack
from tests.conftest import REPO

STACK = REPO / "infra" / "stack"
MAX_CONSTRUCTOR_LINES = 60
"""The stack's and `Functions`' constructors, signature included: a list of parts, each built
by the props and helpers it names."""


def stack_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"sdc_remediation.infra.stack.{path.stem}")
        for path in sorted(STACK.glob("*.py"))
        if path.stem != "__init__"
    ]


def constructs() -> list[type[Construct]]:
    """The constructs `infra/stack/` defines, but the stack: it is where `DeploymentSettings` is taken
    apart."""
    return sorted(
        {
            cls
            for module in stack_modules()
            for cls in vars(module).values()
            if inspect.isclass(cls)
            and cls.__module__ == module.__name__
            and issubclass(cls, Construct)
            and not issubclass(cls, Stack)
        },
        key=lambda cls: cls.__qualname__,
    )


def props_problems(cls: type) -> list[str]:
    """What is wrong with `cls`'s constructor: anything besides `scope` and `construct_id` but
    one keyword-only `props`, a frozen dataclass of `cls`'s own module; `DeploymentSettings` anywhere."""
    hints = typing.get_type_hints(cls.__init__)
    parameters = list(inspect.signature(cls.__init__).parameters.values())[3:]
    problems = [
        f"{cls.__qualname__}.__init__ takes {name}: DeploymentSettings"
        for name, hint in hints.items()
        if hint is DeploymentSettings
    ]
    if not parameters:
        return problems
    props = hints.get("props")
    if [(p.name, p.kind) for p in parameters] != [("props", inspect.Parameter.KEYWORD_ONLY)]:
        problems.append(
            f"{cls.__qualname__}.__init__ takes {', '.join(p.name for p in parameters)}, "
            "not one keyword-only props"
        )
    elif not (
        dataclasses.is_dataclass(props)
        and isinstance(props, type)
        and props.__dataclass_params__.frozen
        and props.__module__ == cls.__module__
    ):
        problems.append(f"{cls.__qualname__}'s props is not a frozen dataclass of its module")
    for field in dataclasses.fields(props) if dataclasses.is_dataclass(props) else ():
        if typing.get_type_hints(props).get(field.name) is DeploymentSettings:
            problems.append(f"{props.__qualname__}.{field.name} is the whole DeploymentSettings")
    return problems


def test_the_constructs_are_found():
    names = {cls.__name__ for cls in constructs()}
    assert {"Functions", "Notifications", "RemediationWorkflow", "Storage"} <= names


@pytest.mark.parametrize("cls", constructs(), ids=lambda cls: cls.__qualname__)
def test_a_construct_takes_a_frozen_props_of_its_own_module_and_never_the_settings(cls):
    assert props_problems(cls) == []


@dataclasses.dataclass(frozen=True)
class _GoodProps:
    name: str


@dataclasses.dataclass(frozen=True)
class _SettingsProps:
    settings: DeploymentSettings


class _TakesSettings(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, settings: DeploymentSettings
    ) -> None:
        super().__init__(scope, construct_id)


class _TakesSiblings(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: _GoodProps, topic: str
    ) -> None:
        super().__init__(scope, construct_id)


class _SettingsInProps(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: _SettingsProps) -> None:
        super().__init__(scope, construct_id)


class _Good(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: _GoodProps) -> None:
        super().__init__(scope, construct_id)


@pytest.mark.parametrize("cls", [_TakesSettings, _TakesSiblings, _SettingsInProps])
def test_a_construct_taking_the_settings_or_more_than_props_is_reported(cls):
    assert props_problems(cls)


def test_a_construct_taking_its_props_passes():
    assert props_problems(_Good) == []


@pytest.mark.parametrize(
    "cls", [SdcRemediationStack, SdcRemediation, Functions], ids=lambda cls: cls.__name__
)
def test_the_constructor_reads_as_a_list_of_parts(cls):
    lines = len(inspect.getsource(cls.__init__).splitlines())
    assert lines <= MAX_CONSTRUCTOR_LINES, (
        f"{cls.__name__}.__init__ has {lines} lines: move a part's details into a helper or "
        "its props"
    )
