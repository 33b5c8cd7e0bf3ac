"""The pipeline's own metrics: one list of names, each emitted by some step, and the values that
are more than a counter (time to decision, time to recovery, approvals waiting)."""

from __future__ import annotations

import ast
from datetime import datetime

import pytest

from sdc_remediation.lambdas.logic import approval, closing, recovery
from sdc_remediation.lambdas.metric_names import (
    CLOSE_OUTCOMES,
    PipelineMetric,
    closed_metric,
    reboot_metric,
    replace_metric,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import (
    ApprovalRequest,
    CloseRequest,
    IncidentRef,
    Outcome,
    RecoveryStatus,
)
from sdc_remediation.lambdas.observability import metrics
from tests.conftest import REPO
from tests.unit.world import TOKEN, World, settings

M = PipelineMetric


def emitted() -> dict[str, dict]:
    """What the logic added since the last flush: metric name → {Unit, Value: [...]}."""
    return dict(metrics.provider.metric_set)


def values(metric: PipelineMetric) -> list[float]:
    return list(emitted().get(metric.value, {}).get("Value", []))


def close(world: World, incident_id: str, outcome: Outcome) -> None:
    closing.close_incident(CloseRequest(incident_id, outcome, None), world.deps)


def replaced(world: World) -> str:
    world.hyperpod.replacement_polls = 0
    incident_id = world.decided("approve")
    recovery.replace_node(IncidentRef(incident_id), world.deps)
    recovery.check_replacement(IncidentRef(incident_id), world.deps)
    return incident_id


# -- the names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("state", CLOSE_OUTCOMES)
def test_every_closing_state_has_its_counter(state):
    assert closed_metric(state).value == "Closed" + state.value.title().replace("_", "")


@pytest.mark.parametrize("status", RecoveryStatus.answers())
def test_every_replace_result_has_its_counter(status):
    assert replace_metric(status).value.startswith("Replace")


def test_close_outcomes_are_every_state_a_close_request_can_end_in():
    reachable = {IncidentState(o.value) for o in Outcome} | {IncidentState.FAILED}
    assert reachable <= set(CLOSE_OUTCOMES)


def _names_the_logic_uses() -> set[str]:
    """`M.<NAME>` attributes and the families built by closed_metric / replace_metric /
    reboot_metric."""
    used: set[str] = set()
    calls: set[str] = set()
    for path in (REPO / "lambdas" / "logic").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.value if isinstance(node, ast.Attribute) else None
            if isinstance(name, ast.Name) and name.id == "M":
                used.add(node.attr)  # type: ignore[union-attr]
            if isinstance(node, ast.Name):  # called, or handed on (recovery.Kind's metric)
                calls.add(node.id)
    if "closed_metric" in calls:
        used |= {closed_metric(s).name for s in CLOSE_OUTCOMES}
    if "replace_metric" in calls:
        used |= {replace_metric(s).name for s in RecoveryStatus.answers()}
    if "reboot_metric" in calls:
        used |= {reboot_metric(s).name for s in RecoveryStatus.answers()}
    return used


def test_every_declared_metric_is_emitted_by_some_step():
    used = _names_the_logic_uses()
    never = sorted(m.name for m in PipelineMetric if m.name not in used)
    assert never == [], f"declared but never emitted (a dashboard would plot nothing): {never}"


# -- time to decision, time to recovery --------------------------------------------------------


def test_a_decision_records_the_seconds_since_the_incident_opened(world):
    incident_id = world.awaiting_approval()
    metrics.clear_metrics()
    opened = datetime.fromisoformat(world.incident(incident_id).created_at)

    approval.decide(world.decision(incident_id, "reject"), world.deps)

    (latency,) = values(M.DECISION_LATENCY)
    decided_at = datetime.fromisoformat(world.incident(incident_id).decision.at)
    span = (decided_at - opened).total_seconds()
    # The clock steps a second per reading: the decision is read a moment before the latency.
    assert span <= latency <= span + 5
    assert emitted()[M.DECISION_LATENCY.value]["Unit"] == "Seconds"


def test_a_refused_decision_records_no_latency(world):
    incident_id = world.decided("approve")
    metrics.clear_metrics()

    with pytest.raises(Exception, match="already decided"):
        approval.decide(world.decision(incident_id, "approve", execution="arn:second"), world.deps)

    assert values(M.DECISION_LATENCY) == []


def test_closing_replaced_records_the_seconds_from_opened_to_recovered(world):
    incident_id = replaced(world)
    metrics.clear_metrics()

    close(world, incident_id, Outcome.REPLACED)

    incident = world.incident(incident_id)
    span = datetime.fromisoformat(incident.closed_at) - datetime.fromisoformat(incident.created_at)
    (latency,) = values(M.RECOVERY_LATENCY)
    assert span.total_seconds() <= latency <= span.total_seconds() + 5
    assert values(M.CLOSED_REPLACED) == [1.0]


def test_a_dry_run_recovers_nothing_and_records_no_recovery_time(world):
    world.settings = settings(dry_run=True)
    incident_id = replaced(world)
    metrics.clear_metrics()

    close(world, incident_id, Outcome.REPLACED)

    assert values(M.RECOVERY_LATENCY) == []
    assert values(M.CLOSED_REPLACED) == [1.0]


def test_a_rejected_incident_records_no_recovery_time(world):
    incident_id = world.decided("reject")
    metrics.clear_metrics()

    close(world, incident_id, Outcome.REJECTED)

    assert values(M.RECOVERY_LATENCY) == []


# -- approvals waiting --------------------------------------------------------------------------


def test_requesting_approval_reports_the_incidents_now_waiting(world):
    world.awaiting_approval()

    assert values(M.APPROVALS_WAITING) == [1.0]


def test_the_waiting_incident_counts_even_before_the_index_shows_it(world, monkeypatch):
    monkeypatch.setattr(world.store, "in_state", lambda state: [])  # a lagging index

    world.awaiting_approval()

    assert values(M.APPROVALS_WAITING) == [1.0]


def test_a_decision_takes_the_incident_out_of_the_waiting_count(world):
    incident_id = world.awaiting_approval()
    metrics.clear_metrics()

    approval.decide(world.decision(incident_id, "approve"), world.deps)

    assert values(M.APPROVALS_WAITING) == [0.0]


def test_an_expired_approval_leaves_the_waiting_count(world):
    incident_id = world.awaiting_approval()
    metrics.clear_metrics()

    close(world, incident_id, Outcome.EXPIRED)

    assert values(M.APPROVALS_WAITING) == [0.0]
    assert values(M.CLOSED_EXPIRED) == [1.0]


def test_an_incident_that_never_waited_does_not_report_the_waiting_count(world):
    incident_id = world.health_checked()
    metrics.clear_metrics()

    close(world, incident_id, Outcome.HELD)

    assert values(M.APPROVALS_WAITING) == []


def test_an_unreadable_index_costs_the_gauge_not_the_approval(world, monkeypatch):
    def broken(state):
        raise RuntimeError("index unavailable")

    monkeypatch.setattr(world.store, "in_state", broken)
    incident_id = world.health_checked()
    world.workflow.waiting_tokens.add(TOKEN)

    approval.request_approval(ApprovalRequest(incident_id, TOKEN), world.deps)

    assert world.incident(incident_id).state is IncidentState.AWAITING_APPROVAL
    assert values(M.APPROVALS_WAITING) == []
