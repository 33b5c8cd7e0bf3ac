"""One incident walked down the approved path once (opened → health check → approval →
replacement → closed as replaced); each test reads one property of where it ended."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sdc_remediation.lambdas.logic.core.audit import verify_chain
from tests.integration.conftest import INSTANCE, Aws, moto_account
from tests.integration.drive import APPROVAL_EXECUTION, replaced


@pytest.fixture(scope="module")
def approved_path() -> Iterator[tuple[Aws, str]]:
    with moto_account() as aws:
        yield aws, replaced(aws)


@pytest.fixture
def aws(approved_path) -> Aws:
    return approved_path[0]


@pytest.fixture
def incident_id(approved_path) -> str:
    return approved_path[1]


def test_the_approved_path_ends_replaced_with_every_step_audited_in_order(aws, incident_id):
    assert aws.incident(incident_id).state == "replaced"
    assert aws.actions(incident_id) == [
        "incident_opened",
        "execution_started",
        "health_check_started",
        "health_check_status",
        "recommended",
        "approval_requested",
        "decision_accepted",
        "decision_delivered",
        "replacement_requested",
        "replacement_status",
        "replacement_done",
        "incident_closed",
        "closed_notified",
    ]


def test_audit_entries_stored_in_dynamodb_still_verify_as_a_chain(aws, incident_id):
    verdict = verify_chain(aws.audit(incident_id))

    assert verdict.ok, verdict
    assert verdict.checked == len(aws.actions(incident_id)) == 13


def test_audit_entries_carry_time_actor_and_aws_request_ids(aws, incident_id):
    entries = {e.action: e for e in aws.audit(incident_id)}
    assert entries["replacement_requested"].actor == "replace_node"
    assert entries["replacement_requested"].request_ids  # DescribeClusterNode, Batch...
    assert entries["execution_started"].request_ids  # Step Functions StartExecution
    assert entries["decision_accepted"].actor == f"approver:{APPROVAL_EXECUTION}"
    assert all(e.at.startswith("20") for e in entries.values())


def test_closing_frees_the_lock_and_notifies_the_outcome(aws, incident_id):
    assert aws.items("OPEN#") == []
    closed = aws.messages()[-1]
    assert "closed: replaced" in closed["Subject"]
    assert closed["MessageAttributes"]["incident_id"]["Value"] == incident_id
    assert aws.hyperpod.replaced_by[INSTANCE] in closed["Message"]
