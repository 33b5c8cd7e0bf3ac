"""Every table a doc keeps of something the code holds is derived from the code and fails on drift.

Five tables: the settings (docs/settings.md ↔ the declaration,
lambdas/models/setting_declarations.py), the report mapping
(docs/training.md ↔ trainer_emitter/mapping.py `Attribution`), the permissions (docs/deploy.md ↔ the function
roles of the synthesized stack), each function's environment (docs/pipeline.md ↔ the functions
of the synthesized stack) and the incident states (docs/pipeline.md ↔ `IncidentState`,
`TRANSITIONS`). Each comparison (tests/docs/tables.py) runs on the real pair, and on copies
changed on one side only, to show that it notices. A sixth, the calls per function in
docs/deploy.md, is generated (`python -m sdc_remediation.infra.local.drill.calls --write`) and compared with the
drill's calls by tests/e2e/test_drill.py; its comparison is shown noticing here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from sdc_remediation.infra.local.drill import calls as drill_calls
from sdc_remediation.infra.stack.synth import synthesize_once
from sdc_remediation.lambdas.logic.core.lifecycle import TRANSITIONS
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.setting_declarations import SETTINGS, Form, Setting
from tests.docs import tables
from trainer_emitter.contract import Metric, Role
from trainer_emitter.mapping import Attribution

REPO = Path(__file__).resolve().parents[2]
DEPLOY = (REPO / "docs" / "deploy.md").read_text()
PIPELINE = (REPO / "docs" / "pipeline.md").read_text()
SETTINGS_DOC = (REPO / "docs" / "settings.md").read_text()
TRAINING = (REPO / "docs" / "training.md").read_text()

CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/ab12cd34ef56"
FULL_CONTEXT: dict[str, Any] = {
    "sdc:clusters": {"ml-cluster-1": CLUSTER_ARN, "ml-slurm-1": "cd34ef56ab12"},
    "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
    "sdc:slurmControllers": {"ml-slurm-1": "i-0c0000000000000c1"},
    "sdc:recoveryThroughNodeLabel": ["ml-cluster-1"],
    "sdc:jobPods": {"ml-cluster-1": "training.kubeflow.org/job-name"},
    "sdc:telemetry": {"ml-cluster-1": {"workspace": "ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"}},
    "sdc:idleSweep": {"clusters": ["ml-cluster-1", "ml-slurm-1"]},
}
"""Every setting that grants or sets something only when given: the tables show them all."""


@pytest.fixture(scope="module")
def full_template() -> dict[str, Any]:
    return synthesize_once(FULL_CONTEXT).template


def edited(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced once; fails if `old` is not there (an edit that changes
    nothing would show nothing)."""
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


def without_line(text: str, start: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(start)]
    assert len(kept) == len(lines) - 1, start
    return "".join(kept)


# --- the real tables are in step --------------------------------------------------------------


def test_the_settings_table_is_the_one_the_declaration_gives():
    assert tables.settings_table_drift(SETTINGS_DOC, SETTINGS) == []


def test_the_environment_table_names_the_settings_each_variable_carries_and_no_default():
    assert tables.environment_settings_drift(PIPELINE, SETTINGS) == []


def test_settings_are_in_one_table_only():
    # Given every document, When the documents with a table row per `sdc:*` key are listed,
    # Then only docs/settings.md has one
    from tests.docs.blocks import DOCUMENTS

    holding = [
        document
        for document in DOCUMENTS
        if any(line.startswith("| `sdc:") for line in (REPO / document).read_text().splitlines())
    ]

    assert holding == ["docs/settings.md"]


def test_the_hardware_alert_thresholds_table_is_the_rules_thresholds():
    assert tables.thresholds_drift(DEPLOY) == []


def test_a_changed_hardware_alert_default_in_the_doc_is_drift():
    changed = edited(
        DEPLOY, "| `linkDowntimeSeconds` | `120` |", "| `linkDowntimeSeconds` | `90` |"
    )

    assert tables.thresholds_drift(changed) != []


def test_the_training_report_mapping_table_is_the_mapping_rules():
    assert tables.report_mapping_drift(TRAINING, list(Attribution)) == []


def test_the_training_watch_decision_table_is_the_watch_rows():
    from sdc_remediation.lambdas.logic.evidence.policy import WATCH_ROWS

    lines = TRAINING[TRAINING.index("| evidence | recommend | the card says |") :].splitlines()[2:]
    rows = lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]

    assert rows == [f"| {r.evidence} | {r.advice.tier} | {r.action} |" for r in WATCH_ROWS]


@pytest.mark.synth
def test_the_permission_table_is_what_each_function_role_allows(full_template):
    assert tables.permissions_drift(DEPLOY, tables.granted_actions(full_template)) == []


@pytest.mark.synth
def test_the_environment_table_is_what_the_stack_gives_each_function(full_template):
    assert tables.environment_drift(PIPELINE, tables.function_environment(full_template)) == []


@pytest.mark.synth
def test_the_stack_sets_every_environment_variable_name_for_some_function(full_template):
    given = set().union(*tables.function_environment(full_template).values())

    assert {name.value for name in EnvVar} - given == set()


def test_the_state_table_is_the_incident_states_and_their_transitions():
    terminal = [state for state in IncidentState if state.terminal]

    assert tables.states_drift(PIPELINE, TRANSITIONS, terminal, list(IncidentState)) == []


# --- a change on one side only is noticed ----------------------------------------------------


@dataclass(frozen=True)
class ChangedRule:
    """A stand-in for an `Attribution` member: the same fields, other values."""

    evidence: str
    role: Role
    metric: Metric
    scope: str = ""


A_SETTING = Setting("sdc:newKey", "new_key", Form.BOOLEAN, default=False, doc="new")

SETTINGS_CHANGES: dict[str, Callable[[], list[str]]] = {
    "doc drops a row": lambda: tables.settings_table_drift(
        without_line(SETTINGS_DOC, "| `sdc:dryRun` |"), SETTINGS
    ),
    "doc changes a default": lambda: tables.settings_table_drift(
        edited(SETTINGS_DOC, "| `86400` |", "| `86401` |"), SETTINGS
    ),
    "doc changes a range": lambda: tables.settings_table_drift(
        edited(SETTINGS_DOC, "| integer, 1 .. 10000 |", "| integer, 1 .. 100 |"), SETTINGS
    ),
    "declaration adds a setting": lambda: tables.settings_table_drift(
        SETTINGS_DOC, [*SETTINGS, A_SETTING]
    ),
    "declaration drops a setting": lambda: tables.settings_table_drift(SETTINGS_DOC, SETTINGS[1:]),
    "declaration changes a default": lambda: tables.settings_table_drift(
        SETTINGS_DOC,
        [replace(s, default=600) if s.key == "sdc:stormWindowSeconds" else s for s in SETTINGS],
    ),
    "environment table names another setting": lambda: tables.environment_settings_drift(
        edited(
            PIPELINE, "the setting `sdc:stormThreshold`", "the setting `sdc:stormWindowSeconds`"
        ),
        SETTINGS,
    ),
    "environment table restates a default": lambda: tables.environment_settings_drift(
        edited(
            PIPELINE,
            "the setting `sdc:stormThreshold` ([settings.md](settings.md))",
            "the setting `sdc:stormThreshold`, default 4",
        ),
        SETTINGS,
    ),
}

MAPPING_CHANGES: dict[str, Callable[[], list[str]]] = {
    "doc drops a row": lambda: tables.report_mapping_drift(
        without_line(TRAINING, "| rank in `nonfinite` |"), list(Attribution)
    ),
    "doc changes a role": lambda: tables.report_mapping_drift(
        edited(
            TRAINING,
            "| check `weights`, rank in `suspects` | culprit |",
            "| check `weights`, rank in `suspects` | involved |",
        ),
        list(Attribution),
    ),
    "code drops a rule": lambda: tables.report_mapping_drift(TRAINING, list(Attribution)[1:]),
    "code adds a rule": lambda: tables.report_mapping_drift(
        TRAINING,
        [*Attribution, ChangedRule("rank in `stragglers`", Role.INVOLVED, Metric.NONFINITE_GRAD)],
    ),
    "code changes a metric": lambda: tables.report_mapping_drift(
        TRAINING,
        [
            ChangedRule(r.evidence, r.role, Metric.REPLAY_MISMATCH, r.scope)
            if r is Attribution.NONFINITE_INVOLVED
            else r
            for r in Attribution
        ],
    ),
}


def _granted_with(template: dict[str, Any], module: str, extra: str) -> dict[str, set[str]]:
    granted = tables.granted_actions(template)
    return {**granted, module: granted[module] | {extra}}


def _environment_with(template: dict[str, Any], module: str, extra: str) -> dict[str, set[str]]:
    environment = tables.function_environment(template)
    return {**environment, module: environment[module] | {extra}}


TEMPLATE_CHANGES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "permissions: doc drops an action": lambda t: tables.permissions_drift(
        edited(
            DEPLOY,
            "on the configured clusters; `ssm:GetParameter` on the pause switch (its last poll",
            "on the configured clusters (its last poll",
        ),
        tables.granted_actions(t),
    ),
    "permissions: doc drops a function": lambda t: tables.permissions_drift(
        without_line(DEPLOY, "| `verify_audit` |"), tables.granted_actions(t)
    ),
    "permissions: code grants one more action": lambda t: tables.permissions_drift(
        DEPLOY, _granted_with(t, "check_reboot", "sagemaker:BatchRebootClusterNodes")
    ),
    "permissions: code drops a function": lambda t: tables.permissions_drift(
        DEPLOY, {k: v for k, v in tables.granted_actions(t).items() if k != "decide"}
    ),
    "environment: doc drops a function from a variable": lambda t: tables.environment_drift(
        edited(
            PIPELINE,
            "`start_health_check`, `check_health`, `replace_node`",
            "`start_health_check`, `replace_node`",
        ),
        tables.function_environment(t),
    ),
    "environment: doc drops a variable": lambda t: tables.environment_drift(
        without_line(PIPELINE, "| `TELEMETRY` |"), tables.function_environment(t)
    ),
    "environment: code gives a function one more variable": lambda t: tables.environment_drift(
        PIPELINE, _environment_with(t, "check_reboot", EnvVar.PAUSE_PARAMETER.value)
    ),
    "environment: code adds a variable": lambda t: tables.environment_drift(
        PIPELINE, _environment_with(t, "decide", "DECISION_TIMEOUT")
    ),
}

TERMINAL = [state for state in IncidentState if state.terminal]

STATE_CHANGES: dict[str, Callable[[], list[str]]] = {
    "doc drops a state": lambda: tables.states_drift(
        without_line(PIPELINE, "| `rebooting` |"), TRANSITIONS, TERMINAL, list(IncidentState)
    ),
    "doc drops a transition": lambda: tables.states_drift(
        edited(
            PIPELINE,
            "`replaced_by_hyperpod`, `rebooted`, `failed`",
            "`replaced_by_hyperpod`, `failed`",
        ),
        TRANSITIONS,
        TERMINAL,
        list(IncidentState),
    ),
    "code adds a transition": lambda: tables.states_drift(
        PIPELINE,
        {
            **TRANSITIONS,
            IncidentState.REPLACING: TRANSITIONS[IncidentState.REPLACING]
            | {IncidentState.REJECTED},
        },
        TERMINAL,
        list(IncidentState),
    ),
    "code adds a state": lambda: tables.states_drift(
        PIPELINE, TRANSITIONS, TERMINAL, [*IncidentState, "quarantined"]
    ),
    "code makes a final state open": lambda: tables.states_drift(
        PIPELINE,
        TRANSITIONS,
        [s for s in TERMINAL if s is not IncidentState.HELD],
        list(IncidentState),
    ),
}


def documented_calls(doc: str) -> dict[str, list[str]]:
    """The drill's calls per function as docs/deploy.md shows them (the generated table)."""
    return {
        row[0].strip("`"): tables.ticked(row[1])
        for row in tables.table_after(doc, drill_calls.TABLE_START)
    }


def calls_drift(doc: str, per_function: dict[str, list[str]]) -> list[str]:
    """tests/e2e/test_drill.py's comparison of the generated calls table with the drill's calls
    (`drill_calls.documented(doc) == drill_calls.calls_table(calls)`), as a list of what differs."""
    if drill_calls.documented(doc) == drill_calls.calls_table(per_function):
        return []
    return ["run: python -m sdc_remediation.infra.local.drill.calls --write"]


def test_the_generated_calls_table_reads_back_as_the_calls_it_was_written_from():
    # The drill itself runs in tests/e2e/test_drill.py; here, its table read back and rendered
    # again is the same text, so the one-sided changes below change only what they say.
    assert calls_drift(DEPLOY, documented_calls(DEPLOY)) == []


CALLS_CHANGES: dict[str, Callable[[], list[str]]] = {
    "doc drops a function": lambda: calls_drift(
        without_line(DEPLOY, "| `check_reboot` | `dynamodb:GetItem`"), documented_calls(DEPLOY)
    ),
    "code calls one more action": lambda: calls_drift(
        DEPLOY,
        {
            **documented_calls(DEPLOY),
            "reconcile": [*documented_calls(DEPLOY)["reconcile"], "sns:Publish"],
        },
    ),
}


@pytest.mark.parametrize(
    "change",
    [
        *SETTINGS_CHANGES.values(),
        *MAPPING_CHANGES.values(),
        *STATE_CHANGES.values(),
        *CALLS_CHANGES.values(),
    ],
    ids=[
        *(f"settings keys: {n}" for n in SETTINGS_CHANGES),
        *(f"report mapping: {n}" for n in MAPPING_CHANGES),
        *(f"states: {n}" for n in STATE_CHANGES),
        *(f"drill calls: {n}" for n in CALLS_CHANGES),
    ],
)
def test_a_change_to_one_side_of_a_table_is_reported_as_drift(change):
    assert change() != []


@pytest.mark.synth
@pytest.mark.parametrize("change", list(TEMPLATE_CHANGES.values()), ids=list(TEMPLATE_CHANGES))
def test_a_change_to_one_side_of_a_stack_table_is_reported_as_drift(change, full_template):
    assert change(full_template) != []
