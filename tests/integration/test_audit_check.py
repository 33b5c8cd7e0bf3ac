"""The scheduled audit check (verify_audit) on moto: the audit table and the anchor log group
as the functions leave them."""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.handlers import _deps, verify_audit
from tests.integration.conftest import AUDIT_TABLE, SESSION, invoke
from tests.integration.drive import awaiting_approval

ANCHOR = "/SdcRemediation/audit-anchor"


def anchored(aws) -> None:
    SESSION.client("logs").create_log_group(logGroupName=ANCHOR)
    settings = dataclasses.replace(aws.settings, audit_anchor_log_group=ANCHOR)
    _deps.set_deps(_deps.build_deps(settings, session=SESSION, hyperpod=aws.hyperpod))


def test_the_audit_check_finds_every_chain_of_an_intact_log_verified(aws):
    anchored(aws)
    awaiting_approval(aws)

    result = invoke(verify_audit, {"source": "aws.events"})

    assert result == {"checked": 1, "anchored": True, "broken": []}


def test_the_audit_check_names_a_chain_whose_tail_was_removed(aws):
    anchored(aws)
    incident_id = awaiting_approval(aws)
    last = len(aws.actions(incident_id))
    aws.dynamodb.delete_item(
        TableName=AUDIT_TABLE,
        Key={"incident_id": {"S": incident_id}, "seq": {"N": str(last)}},
    )

    result = invoke(verify_audit, {"source": "aws.events"})

    assert result["broken"] == [
        {
            "subject": incident_id,
            "broken_seq": last,
            "reason": f"the anchor holds entries up to {last}, the table ends at {last - 1}: "
            "the tail was removed",
        }
    ]
