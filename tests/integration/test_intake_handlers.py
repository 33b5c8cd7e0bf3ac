"""open_incident and store_report on moto, HyperPod played by the fake."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest

from sdc_remediation.lambdas.handlers import open_incident, store_report
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.observability import logger
from tests.conftest import load_fixture
from tests.integration.conftest import CLUSTER, INSTANCE, invoke
from tests.unit.reports import large_report


def alarm():
    return load_fixture("events", "contributor_alarm")


def test_an_alarm_opens_an_incident_holding_the_lock_for_its_instance(aws):
    result = invoke(open_incident, alarm())

    assert result["action"] == "opened"
    incident = aws.incident(result["incident_id"])
    assert (incident.state, incident.instance_group) == ("opened", "gpu-workers")
    assert aws.incidents.open_incident_id(CLUSTER, INSTANCE) == result["incident_id"]


def test_an_alarm_starts_one_execution_named_after_the_incident(aws):
    result = invoke(open_incident, alarm())

    executions = aws.executions()
    assert [e["name"] for e in executions] == [result["incident_id"]]
    described = aws.sfn.describe_execution(executionArn=executions[0]["executionArn"])
    assert json.loads(described["input"]) == {
        "incident_id": result["incident_id"],
        "cluster_name": CLUSTER,
        "instance_id": INSTANCE,
    }


def test_opening_is_audited_in_the_audit_table(aws):
    incident_id = invoke(open_incident, alarm())["incident_id"]

    entries = aws.audit(incident_id)
    assert [e.action for e in entries] == ["incident_opened", "execution_started"]
    assert entries[1].details["execution_arn"].endswith(incident_id)


def test_the_logs_carry_the_incident_id_as_correlation_id(aws):
    incident_id = invoke(open_incident, alarm())["incident_id"]

    assert logger.get_correlation_id() == incident_id


def test_an_ignored_event_does_not_keep_the_previous_correlation_id(aws):
    invoke(open_incident, alarm())
    event = load_fixture("events", "contributor_ok")

    invoke(open_incident, event)

    assert logger.get_correlation_id() == event["id"]


def test_an_ok_event_is_ignored_and_audited_under_the_event(aws):
    event = load_fixture("events", "contributor_ok")

    result = invoke(open_incident, event)

    assert result == {"incident_id": None, "action": "ignored"}
    assert aws.actions(f"event#{event['id']}") == ["event_ignored"]
    assert aws.items("INCIDENT#") == []


def test_an_alarm_level_event_is_refused_with_a_clear_error(aws):
    with pytest.raises(MalformedEvent, match="detail-type"):
        invoke(open_incident, load_fixture("events", "alarm_level_metrics_insights"))

    assert aws.items("") == []


def test_an_unknown_instance_is_recorded_as_skipped_without_a_lock(aws):
    event = alarm()
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = "i-0123456789abcdef0"

    result = invoke(open_incident, event)

    assert result["action"] == "skipped"
    assert aws.incident(result["incident_id"]).state == "skipped"
    assert aws.items("OPEN#") == []
    assert aws.executions() == []


def test_a_report_naming_the_culprit_opens_the_incident_and_the_alarm_attaches(aws):
    opened = invoke(store_report, load_fixture("events", "sdc_report"))["incidents"]

    attached = invoke(open_incident, alarm())

    assert [r["action"] for r in opened] == ["opened"]
    assert attached == {"incident_id": opened[0]["incident_id"], "action": "attached"}
    kinds = [e["kind"] for e in aws.incident(attached["incident_id"]).evidence]
    assert kinds == ["report", "alarm"]
    assert len(aws.executions()) == 1


def test_a_report_is_stored_under_its_instance_with_an_expiry(aws):
    result = invoke(store_report, load_fixture("events", "sdc_report"))

    assert (result["report_id"], result["stored"]) == ("r-5f3c9a1e2b7d4c60", True)
    items = {i["sk"]["S"].split("#", 1)[0]: i for i in aws.items(f"REPORT#{CLUSTER}#{INSTANCE}")}
    assert set(items) == {"id", "at"}  # the first-copy marker, and the report by receive time
    item = items["at"]
    received = datetime.fromisoformat(item["received_at"]["S"])
    assert item["sk"]["S"] == f"at#{item['received_at']['S']}#r-5f3c9a1e2b7d4c60"
    assert abs(received - datetime.now(UTC)) < timedelta(minutes=1)
    expires = datetime.fromtimestamp(int(item["expires_at"]["N"]), UTC)
    assert timedelta(days=13) < expires - datetime.now(UTC) < timedelta(days=15)


def test_a_redelivered_report_is_not_stored_again(aws):
    invoke(store_report, load_fixture("events", "sdc_report"))

    assert invoke(store_report, load_fixture("events", "sdc_report"))["stored"] is False


def test_a_report_arriving_after_the_alarm_attaches_to_the_open_incident(aws):
    incident_id = invoke(open_incident, alarm())["incident_id"]

    invoke(store_report, load_fixture("events", "sdc_report"))

    assert aws.actions(incident_id)[-1] == "evidence_attached"


def test_a_malformed_report_names_the_bad_field(aws):
    event = copy.deepcopy(load_fixture("events", "sdc_report"))
    event["detail"]["instances"][0]["ranks"] = ["thirteen"]

    with pytest.raises(MalformedEvent, match=r"detail\.instances\[0\]\.ranks\[0\]"):
        invoke(store_report, event)


# -- muted alarms (CloudWatch alarm mute rules) ---------------------------------------------------


def test_a_muted_alarm_is_held_in_the_table_audited_and_notified_with_its_mute_rule(aws):
    event = load_fixture("events", "contributor_alarm_muted")

    result = invoke(open_incident, event)

    assert result["action"] == "held"
    incident = aws.incident(result["incident_id"])
    assert (incident.state, incident.hold.kind) == ("held", "muted")
    assert incident.hold.mute_rule == "gpu-fleet-maintenance"
    assert aws.executions() == []
    assert aws.incidents.open_incident_id(CLUSTER, INSTANCE) is None
    (held,) = [e for e in aws.audit(result["incident_id"]) if e.action == "incident_held"]
    assert held.details["mute_rule_arn"] == event["detail"]["muteDetail"]["mutedByArn"]
    (notice,) = aws.messages()
    assert "held (muted)" in notice["Subject"]
    assert "gpu-fleet-maintenance" in notice["Message"]


def test_a_malformed_mute_detail_is_refused_audited_under_the_event_and_raised(aws):
    event = copy.deepcopy(load_fixture("events", "contributor_alarm_muted"))
    event["detail"]["muteDetail"]["mutedByArn"] = "gpu-fleet-maintenance"

    with pytest.raises(MalformedEvent, match=r"detail\.muteDetail\.mutedByArn"):
        invoke(open_incident, event)

    (refused,) = aws.audit(f"event#{event['id']}")
    assert refused.action == "event_refused"
    assert aws.items("INCIDENT#") == []


def test_many_large_reports_keep_the_incident_item_well_under_dynamodbs_limit(aws):
    results = [
        invoke(store_report, large_report(f"r-large-{n:07d}"))["incidents"] for n in range(14)
    ]

    incident_ids = {r["incident_id"] for (r,) in results}
    (incident_id,) = incident_ids
    (item,) = aws.items(f"INCIDENT#{incident_id}")
    assert len(json.dumps(item).encode()) < 200_000
    assert aws.incident(incident_id).evidence_dropped > 0


def test_a_report_dated_a_year_ahead_is_refused_into_the_dead_letter_queue_and_audited(aws):
    event = copy.deepcopy(load_fixture("events", "sdc_report"))
    event["detail"]["emitted_at"] = (datetime.now(UTC) + timedelta(days=365)).isoformat()

    with pytest.raises(MalformedEvent, match=r"detail\.emitted_at"):
        invoke(store_report, event)

    (refusal,) = aws.audit(f"event#{event['id']}")
    assert (refusal.action, refusal.details["field"]) == ("event_refused", "detail.emitted_at")
    assert aws.items("REPORT#") == []
    assert aws.items("FLAG#") == []


# -- hardware alerts (SNS from the telemetry clusters' Prometheus workspaces) ---------------------


def test_a_hardware_alert_delivered_by_sns_opens_the_nodes_incident_through_store_report(aws):
    (result,) = invoke(store_report, load_fixture("events", "hardware_alert_sns"))

    incident = aws.incident(result["incident_id"])
    assert result["action"] == "opened"
    assert (incident.cluster_name, incident.instance_id) == (CLUSTER, INSTANCE)
    (item,) = incident.hardware
    assert (item.rule, item.gpu, item.node_name) == (
        "hardware_throttling",
        "5",
        f"hyperpod-{INSTANCE}",
    )
    assert len(aws.executions()) == 1


def test_a_hardware_alert_and_a_report_for_the_node_share_one_incident(aws):
    (opened,) = invoke(store_report, load_fixture("events", "hardware_alert_sns"))

    attached = invoke(store_report, load_fixture("events", "sdc_report"))["incidents"]

    assert attached == [{"incident_id": opened["incident_id"], "action": "attached"}]
    kinds = [e["kind"] for e in aws.incident(opened["incident_id"]).evidence]
    assert kinds == ["hardware", "report"]


def test_a_malformed_hardware_alert_is_refused_under_its_sns_message(aws):
    event = copy.deepcopy(load_fixture("events", "hardware_alert_sns"))
    message = json.loads(event["Records"][0]["Sns"]["Message"])
    message["alerts"][0]["labels"]["rule"] = "made_up"
    event["Records"][0]["Sns"]["Message"] = json.dumps(message)

    with pytest.raises(MalformedEvent, match=r"Sns\.Message\.alerts\[0\]\.labels"):
        invoke(store_report, event)

    subject = "event#sns-" + event["Records"][0]["Sns"]["MessageId"]
    assert aws.actions(subject) == ["event_refused"]
