"""What to do next is one table (`sdc_remediation.lambdas.logic.evidence.policy.Row`): every advice the logic
gives is a row's, the emitter's attributions (evidence → role) read like no row of it, and the
state machine branches on the decision each advice is carried out by."""

from __future__ import annotations

import ast
import json

from sdc_remediation.infra.stack.definitions import remediation_definition
from sdc_remediation.infra.stack.functions import SPECS
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.lambdas.logic.evidence.policy import (
    DECISION_OF,
    MIN_AGREEING_SIGNALS,
    WATCH_ROWS,
    Row,
)
from sdc_remediation.lambdas.logic.evidence.recommendation import assess_watch
from sdc_remediation.lambdas.models.evidence import evidence_of
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.recommendation import Advice, Course
from tests.conftest import REPO
from trainer_emitter.contract import Check, Role
from trainer_emitter.mapping import Attribution

TABLE = REPO / "lambdas" / "logic" / "evidence" / "policy.py"


def advice_named(path) -> list[str]:
    """Each `Advice.<MEMBER>` a module names: an advice decided there."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(REPO)}:{node.lineno}: Advice.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Advice"
    ]


def test_no_advice_is_decided_in_the_logic_outside_the_table():
    found = [
        line
        for path in sorted((REPO / "lambdas" / "logic").rglob("*.py"))
        if path != TABLE
        for line in advice_named(path)
    ]

    assert found == []


def test_every_advice_and_course_is_some_rows():
    assert {row.advice for row in Row} == set(Advice)
    assert {row.course for row in Row} == set(Course)
    assert all(row.reason for row in Row)


def test_the_emitters_attributions_read_like_no_row_of_the_table():
    rows = {row.name for row in Row}

    for attribution in Attribution:
        assert attribution.name not in rows, attribution
        assert attribution.name.endswith(attribution.role.name), attribution


def test_a_hang_the_emitter_calls_localised_acts_only_with_enough_agreeing_signals():
    # Given a hang report whose rank on this instance the emitter made a culprit, localised by
    # one signal
    report = evidence_of(
        {
            "kind": "report",
            "key": "report:hang",
            "check": Check.HANG,
            "role": Role.CULPRIT,
            "ranks": [3],
            "hang": {"missing_ranks": [3], "signals": ["collective"]},
        }
    )
    # When the table reads it, without and with a hardware signal agreeing
    alone, _ = assess_watch(report, ())
    agreed, _ = assess_watch(report, ("XID 79 on GPU 5",))
    # Then one signal is ambiguous (checked, nothing isolated), two act
    assert MIN_AGREEING_SIGNALS == 2
    assert (alone, alone.course) == (Row.HANG_AMBIGUOUS, Course.CHECK)
    assert (agreed, agreed.course) == (Row.HANG_LOCALISED_BY_AGREEING_SIGNALS, Course.ACT)


def test_the_state_machine_branches_on_the_decision_each_advice_is_carried_out_by():
    arns = {spec.module: f"arn:{spec.module}" for spec in SPECS}
    definition = remediation_definition(arns, DeploymentSettings.from_context({}), "arn:approval")

    compared = set()
    for choice in definition["States"]["Decision?"]["Choices"]:
        for test in json.loads(json.dumps(choice)).get("And", []):
            for inner in [test, *test.get("And", [])]:
                if inner.get("Variable") == "$.decision.decision" and "StringEquals" in inner:
                    compared.add(inner["StringEquals"])

    assert compared == {d.value for d in (*DECISION_OF.values(), Decision.REJECT)}


def test_the_watch_rows_are_the_hang_and_straggler_rows_with_what_the_card_says():
    assert [row.name for row in WATCH_ROWS] == [
        "HANG_LOCALISED_BY_AGREEING_SIGNALS",
        "HANG_AMBIGUOUS",
        "STRAGGLER_CORROBORATED",
        "STRAGGLER_ALONE",
    ]
