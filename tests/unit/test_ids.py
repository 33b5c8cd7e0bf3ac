from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from sdc_remediation.lambdas.logic.core import ids

AT = datetime(2026, 11, 30, 8, 15, 4, 512000, tzinfo=UTC)
EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def test_incident_id_names_cluster_instance_and_utc_time():
    assert ids.incident_id("ml-cluster-1", "i-0abc1234def567890", AT) == (
        "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504"
    )


def test_incident_id_uses_utc_whatever_the_offset_of_the_time():
    local = AT.astimezone(timezone(timedelta(hours=-8)))

    assert ids.incident_id("c", "i-0abc1234def567890", local) == ids.incident_id(
        "c", "i-0abc1234def567890", AT
    )


def test_long_cluster_names_still_give_a_valid_execution_name():
    incident_id = ids.incident_id("c" * 63, "i-0abc1234def567890", AT)

    assert EXECUTION_NAME.match(incident_id)
    assert incident_id.endswith("-i-0abc1234def567890-20261130T081504")


def test_long_cluster_names_sharing_a_prefix_give_different_ids():
    first = ids.incident_id("x" * 60 + "-a", "i-0abc1234def567890", AT)
    second = ids.incident_id("x" * 60 + "-b", "i-0abc1234def567890", AT)

    assert first != second


def test_characters_outside_the_execution_name_set_are_replaced():
    incident_id = ids.incident_id("team.a/cluster", "i-0abc1234def567890", AT)

    assert EXECUTION_NAME.match(incident_id)


def test_events_without_an_incident_are_audited_under_their_event_id():
    assert ids.event_subject("3f1c") == "event#3f1c"


def test_a_storm_hold_id_fits_the_execution_name_limit_and_names_its_cluster():
    hold = ids.hold_id("c" * 63, AT)

    assert len(hold) <= 80 and hold.startswith("hold-") and hold.endswith("-storm-20261130T081504")


def test_the_job_level_incident_id_is_the_same_for_the_same_report():
    at = AT

    first = ids.job_incident_id("ml-cluster-1", "r-5f3c9a1e2b7d4c60", at)

    assert first == ids.job_incident_id("ml-cluster-1", "r-5f3c9a1e2b7d4c60", at)
    assert first != ids.job_incident_id("ml-cluster-1", "r-0000000000000000", at)
    assert "-job-" in first and len(first) <= 80


def test_a_keyed_incident_id_is_a_valid_execution_name_that_differs_by_key_only():
    cluster = "c" * 63
    first = ids.keyed_incident_id(cluster, "i-0abc1234def567890", AT, "report:r-1")

    assert EXECUTION_NAME.match(first)
    assert first.endswith("-20261130T081504")
    assert first != ids.incident_id(cluster, "i-0abc1234def567890", AT)
    assert first != ids.keyed_incident_id(cluster, "i-0abc1234def567890", AT, "report:r-2")
    assert first == ids.keyed_incident_id(cluster, "i-0abc1234def567890", AT, "report:r-1")
