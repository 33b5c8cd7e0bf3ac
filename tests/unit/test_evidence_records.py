"""Evidence is typed from a trigger's parse to the card: each kind is built as its model, stored
as its record (JSON through DynamoDB's attribute values) and read back as the same model, and
a record written before a field existed reads with that field's default."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.lambdas.adapters._aws import from_item, to_item
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.recommendation import report_row
from sdc_remediation.lambdas.logic.sweep.claim import sweep_evidence
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.evidence import (
    AlarmEvidence,
    Evidence,
    ReportEvidence,
    TriggerSource,
    evidence_of,
)
from sdc_remediation.lambdas.models.hardware_alert import parse_alert_notification
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.states import IncidentState
from sdc_remediation.lambdas.models.sweep import CheckResult
from sdc_remediation.lambdas.wording import card_lines
from tests.conftest import load_fixture
from tests.unit.reports import NODES, large_report, report_event
from tests.unit.test_watch_pipeline import hang_alarm, straggler_alarm
from tests.unit.world import INSTANCE

RECEIVED = "2026-11-30T08:15:00+00:00"


def stored(item: Evidence) -> dict[str, Any]:
    """The item's record as DynamoDB gives it back (numbers through Decimal)."""
    return from_item(to_item({"item": item.to_record()}))["item"]


def report(event: dict[str, Any], instance: str | None) -> ReportEvidence:
    return summaries.report_evidence(parse_report_event(event).report, instance)


def alarm(name: str) -> AlarmEvidence:
    return summaries.alarm_evidence(parse_contributor_event(load_fixture("events", name)))


def hardware() -> Evidence:
    note = parse_alert_notification(load_fixture("events", "hardware_alert_sns"))
    return summaries.hardware_evidence(note.alerts[0], RECEIVED)


def sweep() -> Evidence:
    result = CheckResult(INSTANCE, False, "Failed", "EFA\x1b[31m down", ("InstanceStress",), "t0")
    return sweep_evidence("ml-cluster-1", result, RECEIVED)


BUILT = {
    "sdc report, one instance": lambda: report(load_fixture("events", "sdc_report"), INSTANCE),
    "sdc report, the whole job": lambda: report(load_fixture("events", "sdc_report"), None),
    "hang report": lambda: report(report_event(hang_alarm(13)), NODES[1]),
    "straggler report": lambda: report(report_event(straggler_alarm(13)), NODES[1]),
    "report cut to its instance": lambda: report(large_report("large-0001"), INSTANCE),
    "alarm": lambda: alarm("contributor_alarm"),
    "muted alarm": lambda: alarm("contributor_alarm_muted"),
    "hardware alert": hardware,
    "idle sweep check": sweep,
}


@pytest.mark.parametrize("name", BUILT)
def test_each_kind_of_evidence_reads_back_from_its_stored_record_as_it_was_built(name):
    # Given an evidence item as its trigger's parser builds it
    built = BUILT[name]()
    # When it is stored on an incident and read back
    read = evidence_of(stored(built))
    # Then it is the same typed item, of its kind
    assert read == built
    assert stored(built)["kind"] == built.kind.value


def test_the_hang_and_the_straggler_summaries_are_read_as_their_own_models():
    hang = report(report_event(hang_alarm(13)), NODES[1])
    straggler = report(report_event(straggler_alarm(13)), NODES[1])

    assert hang.hang is not None and hang.hang.ranks_named({13}) == [13]
    assert hang.straggler is None and "straggler" not in hang.to_record()
    assert straggler.straggler is not None and 13 in straggler.straggler.flagged


def test_a_report_record_written_before_its_later_fields_existed_reads_with_their_defaults():
    # Given a report summary as the first release stored it: no receipt, no resume, no watch
    # evidence, no token count, nothing left out
    old = {
        "kind": "report",
        "key": "report:old-1",
        "report_id": "old-1",
        "emitted_at": "2026-11-01T00:00:00Z",
        "check": "compute",
        "role": "culprit",
        "ranks": [3],
        "culprits": [3],
        "suspects": [{"rank": 3, "role": "culprit", "gpu_uuid": "GPU-3"}],
    }
    # When it is read back and shown
    item = evidence_of(old)
    incident = Incident("sdc-1", "c", "i-1", IncidentState.OPENED, "t", "t", evidence=[old])
    # Then every later field takes its default, the table reads it and the card shows it
    assert (item.received_at, item.resume, item.hang, item.tokens_per_step) == (
        None,
        None,
        None,
        None,
    )
    assert item.order == "2026-11-01T00:00:00Z"
    assert report_row(item)[0].proposes_recovery
    assert incident.gpu_uuids == ["GPU-3"]
    assert any("culprits: [3]" in line for line in card_lines.report_lines(incident))


def test_a_record_of_no_known_kind_is_refused_by_naming_its_kind():
    with pytest.raises(ValueError, match="'rumour'"):
        evidence_of({"kind": "rumour", "key": "rumour:1"})


def test_only_the_kinds_no_training_pod_can_send_are_trusted():
    trusted = {name for name, build in BUILT.items() if build().trusted}

    assert trusted == {"hardware alert", "idle sweep check"}
    assert {k for k in TriggerSource if k.trusted} == {TriggerSource.HARDWARE, TriggerSource.SWEEP}


def test_an_incident_holding_a_record_of_a_newer_kind_keeps_it_and_is_judged_on_the_rest():
    # Given an incident whose evidence a newer release wrote a kind of this one does not know
    newer = {"kind": "rumour", "key": "rumour:1", "text": "ünïcode"}
    known = report(load_fixture("events", "sdc_report"), INSTANCE).to_record()
    incident = Incident("sdc-1", "c", INSTANCE, IncidentState.OPENED, "t", "t")
    incident.evidence = [newer, known]
    # When it is stored and read
    record = Incident.from_record(incident.to_record())
    # Then the record keeps both, and every reader reads the kind it knows
    assert record.evidence == [newer, known]
    assert [e.kind for e in record.items] == [TriggerSource.REPORT]
    assert record.reports[0].report_id == known["report_id"]


def whole_numbers_as_floats(detail: dict[str, Any]) -> dict[str, Any]:
    """The report's watch evidence with every integer written as a float (13.0): JSON Schema
    counts 13.0 an integer, so the report is valid; DynamoDB gives it back as 13."""
    hang, straggler = detail.get("hang"), detail.get("straggler")
    if hang is not None:
        for name in ("missing_ranks", "silent_ranks", "odd_stack_ranks"):
            hang[name] = [float(rank) for rank in hang[name]]
        hang["waiting_collective"]["seq"] = float(hang["waiting_collective"]["seq"])
        for entry in hang["ranks"]:
            entry["rank"] = float(entry["rank"])
    if straggler is not None:
        straggler["flagged"] = [float(rank) for rank in straggler["flagged"]]
        for name in ("window_steps", "windows_required"):
            straggler[name] = float(straggler[name])
        for entry in straggler["scores"]:
            entry["rank"], entry["consecutive"] = float(entry["rank"]), float(entry["consecutive"])
    return detail


def shown(record: dict[str, Any]) -> list[str]:
    """The card's lines for an incident holding `record`."""
    incident = Incident("sdc-1", "c", NODES[1], IncidentState.OPENED, "t", "t", evidence=[record])
    return card_lines.report_lines(incident)


@pytest.mark.parametrize("alarm", [hang_alarm(13), straggler_alarm(13)], ids=["hang", "straggler"])
def test_a_watch_report_writing_its_integers_as_floats_shows_alike_before_and_after_storing(alarm):
    # Given a watch report a pod wrote with its ranks, windows and sequence numbers as 13.0
    event = report_event(alarm)
    whole_numbers_as_floats(event["detail"])
    built = report(event, NODES[1])
    # When its summary is shown as built (a notice sent as the incident opens) and as stored
    # Then both read alike: its integers are integers, as DynamoDB gives them back
    assert shown(built.to_record()) == shown(stored(built))
    assert evidence_of(stored(built)) == built


def test_a_report_proposing_a_recovery_joins_an_incident_holding_a_record_of_a_newer_kind():
    # Given an incident whose evidence holds a record a newer release wrote, of a kind this one
    # does not know (the newer release was rolled back)
    newer = {"kind": "rumour", "key": "rumour:1"}
    incident = Incident("sdc-1", "c", INSTANCE, IncidentState.OPENED, "t", "t")
    incident.evidence = [alarm("contributor_alarm").to_record(), newer]
    culprit = report(load_fixture("events", "sdc_report"), INSTANCE)
    assert report_row(culprit)[0].proposes_recovery
    # When a report proposing a recovery arrives for it
    attached = summaries.add_evidence(incident, culprit)
    # Then it is attached beside the record it does not know, which stays
    assert attached
    assert [e["key"] for e in incident.evidence] == [
        "alarm:" + incident.alarms[0].event_id,
        "rumour:1",
        culprit.key,
    ]
