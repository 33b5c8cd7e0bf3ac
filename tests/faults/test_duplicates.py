"""At-least-once delivery: ten alarms for the same contributor, of three metrics, are one
incident carrying all ten as evidence, with one execution. (The same event delivered again is
tests/unit/test_intake.py's; a storm is tests/unit/test_guard.py's, and end to end
tests/e2e/test_burst.py's and the drill's.)"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta

from sdc_remediation.lambdas.handlers import open_incident
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.integration.conftest import CLUSTER, invoke

FIRST_ALARM = datetime(2026, 11, 30, 8, 15, 0, tzinfo=UTC)
METRIC_ALARMS = ("sdc-replay-mismatch", "sdc-nonfinite-grad", "sdc-divergent-tensors")


def contributor(instance_id: str, *, second: int = 0, alarm: str = METRIC_ALARMS[0]) -> dict:
    event = copy.deepcopy(load_fixture("events", "contributor_alarm"))
    event["id"] = str(uuid.uuid4())
    event["detail"]["alarmName"] = alarm
    event["detail"]["alarmContributor"]["attributes"] = {
        "ClusterName": CLUSTER,
        "InstanceId": instance_id,
    }
    at = FIRST_ALARM + timedelta(seconds=second)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return event


def node(n: int) -> str:
    return f"i-0f{n:015x}"


def test_ten_events_for_the_same_contributor_attach_to_one_incident(aws):
    instance_id = load_fixture("events", "contributor_alarm")["detail"]["alarmContributor"][
        "attributes"
    ]["InstanceId"]
    events = [contributor(instance_id, second=n, alarm=METRIC_ALARMS[n % 3]) for n in range(10)]

    results = [invoke(open_incident, e) for e in events]

    assert len({r["incident_id"] for r in results}) == 1
    incident = aws.incident(results[0]["incident_id"])
    assert len(incident.evidence) == 10
    assert sorted(incident.metrics) == sorted(m.replace("-", "_") for m in METRIC_ALARMS)
    assert len(aws.executions()) == 1
    record("duplicates", "10 events, one contributor → 1 incident")
