"""Hang and straggler reports go through the SDC report's own intake (`store_report`) and the
decision table's watch rows (`policy.Row`): localised with a second signal → reboot, a repeat →
replace; spanning or one signal → health check only; a straggler needs hardware corroboration."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.evidence.policy import WATCH_ROWS, Row
from sdc_remediation.lambdas.logic.evidence.recommendation import (
    OPERATOR_TIER,
    assess_watch,
    recommend,
)
from sdc_remediation.lambdas.logic.evidence.summaries import report_evidence
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.report import parse_report, parse_report_event
from tests.conftest import load_fixture
from tests.unit.reports import NODES, report_event
from tests.unit.world import World
from trainer_emitter.rankmap import RankMap
from trainer_emitter.watch import RankState, localise
from trainer_emitter.watch.straggler import RankTimes, StragglerScores

RANK_MAP = RankMap(load_fixture("alarms", "rank_map"))
WORLD = len(RANK_MAP)
INSTANCE_OF = {r: RANK_MAP.get(r).instance_id for r in range(WORLD)}
WAITING = ("train.py:1 main", "c10d.py:9 all_reduce")
ELSEWHERE = ("train.py:1 main", "loader.py:3 next")
XID = "XID 79 (GPU has fallen off the bus) on GPU 5"


def hang_alarm(*stalled: int, silent: tuple[int, ...] = ()) -> dict[str, Any]:
    states = {
        r: RankState(
            r,
            4 if r in stalled else 5,
            4,
            None,
            None,
            60.0,
            False,
            ELSEWHERE if r in stalled else WAITING,
        )
        for r in range(WORLD)
        if r not in silent
    }
    return localise(states, WORLD, INSTANCE_OF, timeout=30).alarm(step=120, timeout=30)


def straggler_alarm(*slow: int) -> dict[str, Any]:
    times = {r: RankTimes(step=3.0 if r in slow else 1.0) for r in range(WORLD)}
    return (
        StragglerScores(windows=1)
        .score(4, times)
        .alarm(step=500, window_steps=100, threshold=0.7, windows=1, instance_of=INSTANCE_OF)
    )


def summary(alarm: dict[str, Any], instance: str | None) -> dict[str, Any]:
    return report_evidence(parse_report_event(report_event(alarm)).report, instance)


def store(world: World, alarm: dict[str, Any]):
    return intake.store_report(parse_report_event(report_event(alarm)), world.deps)


def test_a_version_2_report_is_checked_against_its_own_schema():
    event = report_event(hang_alarm(13))
    event["detail"]["hang"]["signals"] = ["collective", "rumour"]

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field.startswith("detail.hang.signals")


def test_a_hang_report_carries_its_evidence_into_the_typed_report():
    report = parse_report(report_event(hang_alarm(13))["detail"])

    assert report.hang is not None and report.hang["missing_ranks"] == [13]
    assert report.straggler is None


def test_a_localised_hang_report_opens_a_node_level_incident_through_store_report(job_world):
    result = store(job_world, hang_alarm(13))

    (opened,) = result["incidents"]
    incident = job_world.incident(opened["incident_id"])
    assert incident.instance_id == NODES[1] and not incident.is_job
    [evidence] = incident.reports
    assert evidence.check == "hang" and evidence.hang is not None
    assert evidence.hang.localised_instance == NODES[1]


def test_a_hang_spanning_instances_opens_one_job_level_incident(job_world):
    result = store(job_world, hang_alarm(5, 13))

    (opened,) = result["incidents"]
    incident = job_world.incident(opened["incident_id"])
    assert incident.is_job
    assert sorted(incident.instance_ids) == [NODES[0], NODES[1]]


def test_a_hang_report_for_a_cluster_not_allowed_is_ignored_like_any_report(job_world):
    event = report_event(hang_alarm(13), cluster="someone-elses")

    result = intake.store_report(parse_report_event(event), job_world.deps)

    assert result == {"report_id": result["report_id"], "stored": False, "incidents": []}


def test_a_hang_localised_by_collective_and_stack_recommends_a_reboot():
    judged = recommend([summary(hang_alarm(13), NODES[1])], None)

    assert judged.advice is Advice.REBOOT
    assert "collective and stack" in judged.reasons[0]
    assert OPERATOR_TIER in judged.reasons[0]


def test_a_hang_named_by_one_signal_alone_is_ambiguous_until_hardware_agrees():
    silent = summary(hang_alarm(silent=(13,)), NODES[1])

    alone = recommend([silent], None)
    with_xid = recommend([silent], None, telemetry=(XID,))

    assert alone.advice is Advice.HEALTH_CHECK_ONLY
    assert with_xid.advice is Advice.REBOOT
    assert "collective and hardware" in with_xid.reasons[0]


def test_a_localised_hang_on_a_node_with_history_recommends_replacing():
    judged = recommend([summary(hang_alarm(13), NODES[1])], None, history=("sdc-earlier",))

    assert judged.advice is Advice.REPLACE
    assert "repeat on a node with history" in judged.reasons[-1]


def test_a_spanning_hang_proposes_no_recovery_even_with_hardware_signals():
    row, reason = assess_watch(summary(hang_alarm(5, 13), NODES[1]), (XID,))

    assert row is Row.HANG_AMBIGUOUS
    assert "spanning instances" in reason


def test_a_job_level_hang_incident_is_health_check_only():
    judged = recommend([summary(hang_alarm(5, 13), None)], None, job_level=True)

    assert judged.advice is Advice.HEALTH_CHECK_ONLY


def test_a_straggler_without_hardware_corroboration_is_notice_only():
    row, reason = assess_watch(summary(straggler_alarm(13), NODES[1]), ())

    assert row is Row.STRAGGLER_ALONE
    assert "notice only" in reason


def test_a_straggler_with_hardware_corroboration_recommends_a_reboot():
    judged = recommend([summary(straggler_alarm(13), NODES[1])], None, telemetry=(XID,))

    assert judged.advice is Advice.REBOOT
    assert XID in judged.reasons[0]


def test_claims_not_confirmed_still_propose_nothing_beyond_a_health_check():
    judged = recommend([summary(hang_alarm(13), NODES[1])], None, unconfirmed=True)

    assert judged.advice is Advice.HEALTH_CHECK_ONLY


def test_every_watch_row_is_reachable():
    reached = {
        assess_watch(summary(hang_alarm(13), NODES[1]), ())[0],
        assess_watch(summary(hang_alarm(5, 13), NODES[1]), ())[0],
        assess_watch(summary(straggler_alarm(13), NODES[1]), (XID,))[0],
        assess_watch(summary(straggler_alarm(13), NODES[1]), ())[0],
    }

    assert reached == set(WATCH_ROWS)


def test_the_card_says_what_the_incident_suspects(job_world):
    from sdc_remediation.lambdas.wording.cards import suspected

    hang = store(job_world, hang_alarm(13))["incidents"][0]["incident_id"]
    straggler_world_incident = job_world.incident(hang)
    straggler_world_incident.evidence.append(
        {"kind": "report", "key": "report:s", "metrics": ["sdc_straggler"]}
    )

    assert suspected(job_world.incident(hang)) == "a training hang"
    assert suspected(straggler_world_incident) == "a training hang and a straggler"
