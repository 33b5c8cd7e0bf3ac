"""The fleet figures (`sdc_remediation.lambdas.logic.core.figures`): each computed from audit chains whose times and
outcomes are known, and once from a chain the logic itself wrote."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import recovery
from sdc_remediation.lambdas.logic.core.audit import GENESIS, seal
from sdc_remediation.lambdas.logic.core.figures import (
    Figure,
    Ratio,
    Spread,
    compute,
    quantile,
    since_of,
)
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.unit.world import CLUSTER, EKS, World, settings

A = AuditAction
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=10)


def chain(
    incident_id: str, steps: Sequence[tuple[float, AuditAction, dict[str, Any]]], *, start=T0
) -> list[AuditEntry]:
    """A sealed chain: each step `(seconds after start, action, details)`."""
    entries: list[AuditEntry] = []
    prev = GENESIS
    for seq, (offset, action, details) in enumerate(steps, start=1):
        entry = seal(
            incident_id=incident_id,
            seq=seq,
            at=(start + timedelta(seconds=offset)).isoformat(),
            actor="test",
            action=action,
            details=details,
            request_ids=[],
            prev_hash=prev,
        )
        entries.append(entry)
        prev = entry.hash
    return entries


def opened(instance: str = "i-01", source: str = "alarm", metric: str = "sdc_replay_mismatch"):
    return (0, A.INCIDENT_OPENED, {"instance_id": instance, "source": source, "metric": metric})


def replaced_chain(
    incident_id: str,
    *,
    isolate: float,
    request: float,
    decide: float,
    close: float,
    health: str = "passed",
    instance: str = "i-01",
    start=T0,
) -> list[AuditEntry]:
    return chain(
        incident_id,
        [
            opened(instance),
            (isolate, A.NODE_ISOLATED, {"instance_id": instance}),
            (isolate + 1, A.HEALTH_CHECK_STATUS, {"result": health}),
            (request, A.APPROVAL_REQUESTED, {}),
            (decide, A.DECISION_ACCEPTED, {"decision": "approve"}),
            (close - 1, A.REPLACEMENT_DONE, {"dry_run": False}),
            (close, A.INCIDENT_CLOSED, {"state": "replaced", "dry_run": False}),
        ],
        start=start,
    )


def report(*chains: list[AuditEntry], incidents=None, since=None):
    return compute({c[0].incident_id: c for c in chains}, incidents, until=NOW, since=since)


def test_quantiles_are_nearest_rank():
    assert quantile([4, 1, 3, 2], 0.5) == 2
    assert quantile(list(range(1, 11)), 0.9) == 9
    assert quantile([7], 0.9) == 7
    assert quantile([], 0.5) is None


def test_time_to_isolate_decide_and_recover_are_the_median_and_p90_of_the_chains():
    chains = [
        replaced_chain(f"inc-{n}", isolate=n, request=10 * n, decide=100 * n, close=1000 * n)
        for n in range(1, 11)
    ]

    figures = report(*chains).values

    assert figures[Figure.TIME_TO_ISOLATE] == Spread(10, 5, 9)
    assert figures[Figure.TIME_TO_DECISION] == Spread(10, 500, 900)
    assert figures[Figure.DECISION_LATENCY] == Spread(10, 450, 810)
    assert figures[Figure.TIME_TO_RECOVERY] == Spread(10, 5000, 9000)


def test_a_dry_run_or_a_rejected_incident_has_no_time_to_recovery():
    rejected = chain(
        "inc-r",
        [
            opened(),
            (5, A.DECISION_ACCEPTED, {"decision": "reject"}),
            (9, A.INCIDENT_CLOSED, {"state": "rejected"}),
        ],
    )
    dry = chain(
        "inc-d",
        [opened("i-02"), (9, A.INCIDENT_CLOSED, {"state": "replaced", "dry_run": True})],
    )

    figures = report(rejected, dry).values

    assert figures[Figure.TIME_TO_RECOVERY] == Spread(0, None, None)
    assert figures[Figure.OUTCOMES] == {"rejected": 1, "replaced": 1}


def test_a_storm_reset_is_no_human_decision_on_an_incident():
    hold = chain("inc-h", [opened(), (5, A.DECISION_ACCEPTED, {"decision": "reset"})])

    figures = report(hold).values

    assert figures[Figure.TIME_TO_DECISION].n == 0
    assert figures[Figure.APPROVALS_PER_WEEK] == {}


def test_incidents_count_by_trigger_and_by_the_alarm_metric_without_records():
    chains = [
        chain("a", [opened("i-1", "alarm", "sdc_replay_mismatch")]),
        chain("b", [opened("i-2", "report", "sdc_hang")]),
        chain("c", [opened("i-3", "hardware", "")]),
    ]

    figures = report(*chains).values

    assert figures[Figure.INCIDENTS] == 3
    assert figures[Figure.BY_TRIGGER] == {"alarm": 1, "hardware": 1, "report": 1}
    assert figures[Figure.BY_CHECK] == {"hardware": 1, "sdc_hang": 1, "sdc_replay_mismatch": 1}


def test_the_check_is_the_first_reports_check_when_the_record_is_given():
    record = incident(
        "a", reports=[{"kind": "report", "key": "report:w", "check": "weights", "suspects": []}]
    )

    figures = report(chain("a", [opened()]), incidents={"a": record}).values

    assert figures[Figure.BY_CHECK] == {"weights": 1}


def test_held_incidents_count_by_hold_kind():
    chains = [
        chain(
            "a", [(0, A.INCIDENT_HELD, {"kind": "guard", "instance_id": "i-1", "source": "alarm"})]
        ),
        chain("b", [opened("i-2"), (3, A.HELD, {"kind": "storm"})]),
    ]

    figures = report(*chains).values

    assert figures[Figure.HELD] == {"guard": 1, "storm": 1}
    assert figures[Figure.OUTCOMES] == {"held": 1}


def test_precision_counts_acted_on_nodes_confirmed_by_a_failed_check_or_hardware_or_history():
    failed = replaced_chain(
        "f", isolate=1, request=5, decide=9, close=20, health="failed", instance="i-1"
    )
    unconfirmed = replaced_chain("u", isolate=1, request=5, decide=9, close=20, instance="i-2")
    hardware = chain(
        "h",
        [
            opened("i-3", "hardware", ""),
            (5, A.REBOOT_DONE, {"dry_run": False}),
            (9, A.INCIDENT_CLOSED, {"state": "rebooted"}),
        ],
    )
    history = chain(
        "y",
        [
            opened("i-4"),
            (3, A.RECOMMENDED, {"history": ["older"]}),
            (5, A.REPLACEMENT_DONE, {"dry_run": False}),
            (9, A.INCIDENT_CLOSED, {"state": "replaced"}),
        ],
    )

    figures = report(failed, unconfirmed, hardware, history).values

    assert figures[Figure.ACTED_ON] == 4
    assert figures[Figure.PRECISION] == Ratio(3, 4)


def test_a_dry_run_replacement_is_not_a_node_acted_on():
    dry = chain("d", [opened(), (5, A.REPLACEMENT_DONE, {"dry_run": True})])

    assert report(dry).values[Figure.ACTED_ON] == 0


def test_a_second_incident_in_the_window_confirms_the_first_as_a_repeat():
    first = replaced_chain("one", isolate=1, request=5, decide=9, close=20)
    again = chain("two", [opened()], start=T0 + timedelta(days=1))

    assert report(first, again).values[Figure.PRECISION] == Ratio(1, 1)


def released(incident_id: str, instance: str, start=T0) -> list[AuditEntry]:
    return chain(
        incident_id,
        [
            opened(instance),
            (2, A.HEALTH_CHECK_STATUS, {"result": "passed"}),
            (4, A.DECISION_ACCEPTED, {"decision": "reject"}),
            (6, A.NODE_RELEASED, {"instance_id": instance}),
            (7, A.INCIDENT_CLOSED, {"state": "rejected"}),
        ],
        start=start,
    )


def test_released_and_stayed_counts_released_nodes_that_never_came_back():
    stayed = released("s", "i-1")
    back = released("b", "i-2")
    later = chain("l", [opened("i-2")], start=T0 + timedelta(days=2))

    assert report(stayed, back, later).values[Figure.RELEASED_STAYED] == Ratio(1, 2)


def incident(incident_id: str, **changes: Any) -> Incident:
    base = Incident(
        incident_id=incident_id,
        cluster_name="c",
        instance_id="i-01",
        state=IncidentState.REPLACED,
        created_at=T0.isoformat(),
        updated_at=T0.isoformat(),
    )
    for key, value in changes.items():
        if key == "reports":
            base.evidence = value
        else:
            setattr(base, key, value)
    return base


def test_repeat_offenders_are_named_by_logical_id_and_by_gpu_uuid():
    gpu = [
        {
            "kind": "report",
            "key": "report:c",
            "check": "compute",
            "suspects": [{"gpu_uuid": "GPU-9"}],
        }
    ]
    records = {
        "a": incident("a", node_logical_id="node-7", reports=gpu),
        "b": incident("b", instance_id="i-02", node_logical_id="node-7"),
        "c": incident("c", instance_id="i-03", node_logical_id="node-8", reports=gpu),
    }
    chains = [
        chain("a", [opened("i-01")]),
        chain("b", [opened("i-02")], start=T0 + timedelta(hours=1)),
        chain("c", [opened("i-03")], start=T0 + timedelta(hours=2)),
    ]

    figures = report(*chains, incidents=records).values

    assert figures[Figure.REPEAT_BY_NODE] == {"node-7": ["a", "b"]}
    assert figures[Figure.REPEAT_BY_GPU] == {"GPU-9": ["a", "c"]}


def test_exposure_steps_come_from_the_reports_resume_point():
    reports = [
        {
            "kind": "report",
            "key": "report:r",
            "check": "compute",
            "step": 30,
            "suspect_window": [21, 30],
            "resume": {"before_step": 21, "checkpoint": {"step": 20}},
        }
    ]

    figures = report(chain("a", [opened()]), incidents={"a": incident("a", reports=reports)}).values

    assert figures[Figure.EXPOSURE_STEPS] == Spread(1, 10, 10)


def test_approvals_are_counted_per_iso_week_of_the_decision():
    chains = [
        chain("a", [opened("i-1"), (60, A.DECISION_ACCEPTED, {"decision": "approve"})]),
        chain("b", [opened("i-2"), (60, A.DECISION_ACCEPTED, {"decision": "reboot"})]),
        chain(
            "c",
            [opened("i-3"), (60, A.DECISION_ACCEPTED, {"decision": "reject"})],
            start=T0 + timedelta(days=7),
        ),
    ]

    assert report(*chains).values[Figure.APPROVALS_PER_WEEK] == {"2026-W45": 2, "2026-W46": 1}


def test_only_incidents_opened_since_the_window_start_count():
    old = chain("old", [opened("i-1")], start=T0 - timedelta(days=40))
    new = chain("new", [opened("i-2")])

    assert report(old, new, since=NOW - timedelta(days=30)).values[Figure.INCIDENTS] == 1


def test_subjects_that_are_no_incident_are_left_out():
    refused = chain("event#e-1", [(0, A.EVENT_REFUSED, {})])

    assert report(refused).values[Figure.INCIDENTS] == 0


@pytest.mark.parametrize(("text", "days"), [("30d", 30), ("2w", 14), ("12h", 0.5)])
def test_a_period_reads_as_a_time_before_now(text, days):
    assert since_of(text, NOW) == NOW - timedelta(days=days)


@pytest.mark.parametrize("text", ["30", "d", "-3d", "3y", "0d"])
def test_a_period_that_does_not_read_is_refused_naming_the_forms(text):
    with pytest.raises(ValueError, match="m, h, d or w"):
        since_of(text, NOW)


def test_the_figures_of_a_chain_the_logic_wrote_match_its_own_entries():
    isolation = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
    world = World(eks_cluster=EKS, settings=settings(node_isolation=isolation))
    world.hyperpod.replacement_polls = 0
    incident_id = world.decided("approve", isolated=True)
    recovery.replace_node(IncidentRef(incident_id), world.deps)
    recovery.check_replacement(IncidentRef(incident_id), world.deps)
    entries = world.audit.entries(incident_id)
    at = {e.action: datetime.fromisoformat(e.at) for e in reversed(entries)}

    figures = compute(
        {incident_id: entries},
        {incident_id: world.incident(incident_id)},
        until=world.clock.current,
    ).values

    assert (
        figures[Figure.TIME_TO_ISOLATE].median
        == (at[A.NODE_ISOLATED] - at[A.INCIDENT_OPENED]).total_seconds()
    )
    assert (
        figures[Figure.DECISION_LATENCY].median
        == (at[A.DECISION_ACCEPTED] - at[A.APPROVAL_REQUESTED]).total_seconds()
    )
    assert figures[Figure.ACTED_ON] == 1
    assert figures[Figure.BY_TRIGGER] == {"alarm": 1}


def test_a_chain_that_does_not_verify_is_left_out_of_every_figure_and_counted():
    good = replaced_chain("good", isolate=1, request=5, decide=9, close=20)
    tampered = replaced_chain("bad", isolate=1, request=5, decide=9, close=20, instance="i-2")
    tampered[4] = dataclasses.replace(tampered[4], details={"decision": "reject"})

    figures = report(good, tampered).values

    assert figures[Figure.INCIDENTS] == 1
    assert figures[Figure.LEFT_OUT] == 1


def test_an_opening_whose_time_does_not_read_is_left_out_not_raised():
    unreadable = chain("x", [opened()])
    unreadable[0] = seal(
        **{**unreadable[0].body(), "at": "yesterday", "request_ids": []},
    )

    figures = report(unreadable).values

    assert (figures[Figure.INCIDENTS], figures[Figure.LEFT_OUT]) == (0, 1)


def test_an_incident_an_approver_rejected_makes_no_repeat_offender_nor_confirms_an_earlier_one():
    acted = replaced_chain("acted", isolate=1, request=5, decide=9, close=20)
    forged = released("forged", "i-01", start=T0 + timedelta(days=1))  # rejected by a person

    figures = report(acted, forged).values

    assert figures[Figure.PRECISION] == Ratio(0, 1)
    assert figures[Figure.REPEAT_BY_NODE] == {}


def expired(incident_id: str, advice: str, start=T0) -> list[AuditEntry]:
    """An incident judged `advice`, then left to expire (nobody decided)."""
    return chain(
        incident_id,
        [
            opened("i-01"),
            (2, A.RECOMMENDED, {"advice": advice, "history": []}),
            (4, A.APPROVAL_REQUESTED, {}),
            (9, A.INCIDENT_CLOSED, {"state": "expired"}),
        ],
        start=start,
    )


def test_incidents_left_to_expire_that_proposed_no_recovery_make_no_repeat_offender():
    # Given two alarm-only incidents of one node (datapoints any pod can put), judged a health
    # check only and left to expire, as the escalation's own count sets them aside
    nothing = Advice.HEALTH_CHECK_ONLY.value
    chains = [expired(n, nothing, start=T0 + timedelta(hours=h)) for h, n in enumerate("ab")]

    # When the figures are computed
    figures = report(*chains).values

    # Then the node is no repeat offender
    assert figures[Figure.REPEAT_BY_NODE] == {}


def test_incidents_left_to_expire_that_proposed_a_recovery_still_make_a_repeat_offender():
    # Given two incidents of one node judged a replacement, left to expire
    replace = Advice.REPLACE.value
    chains = [expired(n, replace, start=T0 + timedelta(hours=h)) for h, n in enumerate("ab")]

    # When the figures are computed
    figures = report(*chains).values

    # Then the node is a repeat offender
    assert figures[Figure.REPEAT_BY_NODE] == {"i-01": ["a", "b"]}
