"""Closed vocabularies are enums: each member is named by the code that uses it, and no value of
one is compared as text, so grep finds every place a value is tested. (The audit actions have
their own, stricter test: tests/unit/test_audit_actions.py.)"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path

import pytest

from sdc_remediation.infra.cli.render import Output
from sdc_remediation.lambdas.models.approvals import AnswerState, PrincipalSource
from sdc_remediation.lambdas.models.evidence import TriggerSource
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.hardware_alert import (
    AlertLabel,
    AlertSeverity,
    AlertStatus,
    HardwareRule,
)
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.hyperpod import AwsVocabulary, NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.incident import IncidentState, Scope
from sdc_remediation.lambdas.models.isolation import IsolationCause, IsolationState
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import Decision, OpenAction, Outcome, RecoveryStatus
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from tests.conftest import REPO
from trainer_emitter.sinks import SinkName

OURS: tuple[type[StrEnum], ...] = (
    Advice,
    AlertLabel,
    AlertSeverity,
    AlertStatus,
    Decision,
    AnswerState,
    HardwareRule,
    HealthCheckResult,
    HoldKind,
    IncidentState,
    IsolationCause,
    IsolationState,
    NoticeKind,
    OpenAction,
    Outcome,
    Output,
    PrincipalSource,
    RecoveryStatus,
    Scope,
    SinkName,
    TelemetryState,
    TriggerSource,
)
"""The pipeline's own vocabularies: every member is used somewhere."""

AWS: tuple[type[StrEnum], ...] = (NodeRecovery, NodeStatus)
"""Values AWS documents: the code may name only some, but compares none as text."""

PRODUCTION = ("lambdas", "infra", "trainer_emitter")
COMPARED_IN = (
    "lambdas/logic",
    "lambdas/wording",
    "lambdas/models",
    "lambdas/handlers",
    "infra/cli",
    "infra/local/drill",
    "infra/stack",
)
"""Where a value is judged: the functions' logic, the operator CLI, the drill, and the stack
(whose state machines' Choice states compare what the functions return). (Adapters compare
AWS's own keys and codes, some of which spell like a value here.)"""
CHOICE_TESTS = frozenset({"StringEquals", "StringMatches"})
"""The Amazon States Language comparisons a Choice state makes on a string."""


def _trees(*packages: str) -> Iterator[tuple[Path, ast.AST]]:
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path, ast.parse(path.read_text())


def members_named(trees: Iterable[ast.AST], vocabulary: type[StrEnum]) -> set[str]:
    """The members some `Vocabulary.MEMBER` attribute of the code names (or `S.MEMBER`, where
    a module binds the vocabulary to a short name: `S = IncidentState`, `import ... as S`)."""
    named = set()
    for tree in trees:
        names = {vocabulary.__name__} | _aliases(tree, vocabulary.__name__)
        named |= {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in names
        }
    return named


def _aliases(tree: ast.AST, name: str) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            if node.value.id == name:
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            found |= {a.asname for a in node.names if a.name == name and a.asname}
    return found


def compared_as_text(tree: ast.AST, values: set[str]) -> list[tuple[int, str]]:
    """Each comparison (`==`, `!=`, `in`, `not in`), `case` pattern or state machine Choice test
    (`{"StringEquals": ...}`) with a string literal that is a vocabulary's value: line,
    source."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value in CHOICE_TESTS
                    and value is not None
                    and _is_value(value, values)
                ):
                    found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            literals = [
                item
                for side in sides
                for item in (
                    side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                )
            ]
            if any(_is_value(item, values) for item in literals):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and _is_value(node.value, values):
            found.append((node.lineno, f"case {ast.unparse(node.value)}"))
    return found


def _is_value(node: ast.AST, values: set[str]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values


@pytest.mark.parametrize("vocabulary", OURS, ids=lambda v: v.__name__)
def test_every_member_is_named_by_the_code(vocabulary):
    trees = [tree for _, tree in _trees(*PRODUCTION)]

    unused = sorted(m.name for m in vocabulary if m.name not in members_named(trees, vocabulary))

    assert unused == [], f"{vocabulary.__name__}: declared but never named: {unused}"


def test_no_value_of_a_vocabulary_is_compared_as_text():
    values = {str(m.value) for vocabulary in (*OURS, *AWS) for m in vocabulary}

    spelled = [
        f"{path.relative_to(REPO)}:{line}: {source}"
        for path, tree in _trees(*COMPARED_IN)
        for line, source in compared_as_text(tree, values)
    ]

    assert spelled == [], f"vocabulary values compared as text, not as members: {spelled}"


def test_a_value_compared_as_text_is_found():
    tree = ast.parse(
        "if health.result == 'passed': pass\n"
        "if state in ('isolated', 'kept'): pass\n"
        "if source != TriggerSource.ALARM: pass\n"
        "match kind:\n"
        "    case 'storm': pass\n"
        "if name == 'unrelated': pass\n"
    )

    found = compared_as_text(tree, {"passed", "isolated", "kept", "storm"})

    assert [line for line, _ in found] == [1, 2, 5]


def test_a_choice_state_comparing_a_value_as_text_is_found():
    tree = ast.parse(
        'a = when("$.status", {"StringEquals": "held"})\n'
        'b = {"Variable": "$.status", "StringEquals": RecoveryStatus.GONE}\n'
        'c = {"StringEquals": {"events:source": "held"}}\n'
    )

    found = compared_as_text(tree, {"held", "gone"})

    assert [line for line, _ in found] == [1]


def test_a_member_no_code_names_is_reported():
    tree = ast.parse(
        "x = HoldKind.PAUSED\nH = HoldKind\ny = H.MUTED\nz = HoldKind.STORM\nr = H.RATE\n"
        "n = HoldKind.NOTICE\n"
    )

    assert {m.name for m in HoldKind} - members_named([tree], HoldKind) == {"GUARD"}


def test_an_aws_value_this_code_does_not_know_reads_as_itself():
    """AWS may add a node status: a record or an answer carrying it is kept, not refused."""
    unknown = NodeStatus("Rebooting")

    assert (unknown, unknown.value) == ("Rebooting", "Rebooting")
    assert unknown not in list(NodeStatus)
    assert NodeStatus("Running") is NodeStatus.RUNNING
    assert issubclass(NodeRecovery, AwsVocabulary)
