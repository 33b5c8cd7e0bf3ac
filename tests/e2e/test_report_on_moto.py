"""`sdc report` after a drill on the local account: several incidents driven end to end through
the deployed pipeline (alarms and a report, approved, rejected, rebooted), then the figures the
operator CLI computes from the account's audit table match what the incidents did."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import datetime
from typing import Any

import pytest

from sdc_remediation.infra.cli.main import main as sdc
from sdc_remediation.infra.local.run import LocalRun, default_cluster
from sdc_remediation.lambdas.models.audit import AuditAction
from tests.conftest import load_fixture
from tests.e2e.test_pipeline_on_moto import contributor_event_for

pytestmark = [pytest.mark.slow, pytest.mark.synth]

ROOM = {"sdc:guardMaxOpenNodes": 4, "sdc:guardMaxOpenPercent": 100, "sdc:stormThreshold": 8}
"""Four incidents open at once on a five-node cluster (the guard leaves one node free):
neither the guard nor a storm holds one."""
REPLACED, REJECTED, REBOOTED = "i-0aa00000000000001", "i-0cc00000000000003", "i-0dd00000000000004"


def seconds(later: str, earlier: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def entry_at(run: LocalRun, incident_id: str, action: AuditAction) -> str:
    return next(e.at for e in run.audit(incident_id) if e.action == action)


@pytest.fixture(scope="module")
def drilled(tmp_path_factory) -> dict[str, Any]:
    """Four incidents on one account: three alarms (approved and replaced, rejected, rebooted)
    and a report naming its culprit (left waiting); `sdc report --output json` afterwards."""
    nodes = [f"i-0{c}{c}0000000000000{n}" for n, c in enumerate("abcde", start=1)]
    with LocalRun.open(context=ROOM, hyperpod=default_cluster(nodes)) as run:
        opened = {}
        for instance in (REPLACED, REJECTED, REBOOTED):
            (delivery,) = run.put_event(contributor_event_for(instance))
            assert delivery.ok, delivery.response
            opened[instance] = str(delivery.response["incident_id"])
        run.emitter(load_fixture("alarms", "rank_map")).report(
            load_fixture("alarms", "replay_culprit")
        )
        (answer,) = [d.response for d in run.deliveries if "incidents" in (d.response or {})]
        (first,) = answer["incidents"]
        reported = str(first["incident_id"])
        held = run.incident(reported)
        assert first["action"] == "opened", held.hold if held else answer
        for instance, decision, state in (
            (REPLACED, "approve", "replaced"),
            (REJECTED, "reject", "rejected"),
            (REBOOTED, "reboot", "rebooted"),
        ):
            run.wait_for(opened[instance], "awaiting_approval")
            run.decide(opened[instance], decision, "drill")
            run.wait_for(opened[instance], state, timeout=90)
        run.wait_for(reported, "awaiting_approval")
        outputs = run.write_outputs(str(tmp_path_factory.mktemp("report") / "outputs.json"))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = sdc(["--outputs", outputs, "report", "--output", "json"], session=run.session)
        ids = [*opened.values(), reported]
        return {
            "status": status,
            "report": json.loads(printed.getvalue()),
            "opened": opened,
            "reported": reported,
            "incidents": {i: run.incident(i) for i in ids},
            "at": {
                i: {
                    a: entry_at(run, i, a)
                    for a in AuditAction
                    if any(e.action == a for e in run.audit(i))
                }
                for i in ids
            },
        }


def test_the_report_counts_every_incident_by_its_trigger(drilled):
    figures = drilled["report"]["figures"]

    assert drilled["status"] == 0
    assert figures["incidents"] == 4
    assert figures["incidents_by_trigger"] == {"alarm": 3, "report": 1}


def test_the_report_counts_the_outcomes_and_the_decisions_of_the_drill(drilled):
    figures = drilled["report"]["figures"]

    assert figures["outcomes"] == {"rebooted": 1, "rejected": 1, "replaced": 1}
    assert sum(figures["approvals_per_week"].values()) == 3
    assert figures["nodes_acted_on"] == 2


def test_the_time_to_recovery_is_the_replaced_and_rebooted_incidents_open_to_close(drilled):
    at = drilled["at"]
    spans = sorted(
        seconds(at[i][AuditAction.INCIDENT_CLOSED], at[i][AuditAction.INCIDENT_OPENED])
        for i in (drilled["opened"][REPLACED], drilled["opened"][REBOOTED])
    )

    recovery = drilled["report"]["figures"]["time_to_recovery"]

    assert recovery == {"n": 2, "median": spans[0], "p90": spans[1]}


def test_the_decision_latency_is_each_decided_incidents_wait_for_its_approver(drilled):
    at = drilled["at"]
    waits = sorted(
        seconds(at[i][AuditAction.DECISION_ACCEPTED], at[i][AuditAction.APPROVAL_REQUESTED])
        for i in drilled["opened"].values()
    )

    latency = drilled["report"]["figures"]["decision_latency"]

    assert latency == {"n": 3, "median": waits[1], "p90": waits[2]}


def test_the_time_to_isolate_covers_every_isolated_node(drilled):
    isolated = [i for i, a in drilled["at"].items() if AuditAction.NODE_ISOLATED in a]

    assert drilled["report"]["figures"]["time_to_isolate"]["n"] == len(isolated) == 4


def test_the_reported_incident_counts_under_its_reports_check(drilled):
    figures = drilled["report"]["figures"]

    assert figures["incidents_by_check"]["compute"] == 1
