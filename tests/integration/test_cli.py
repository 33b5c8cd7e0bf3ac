"""The operator CLI (`sdc`, infra/cli/) against a moto account: the tables as
tests/integration/conftest.py creates them, an approval state machine that moto executes, and
the deployment's Outputs in a JSON file (or a CloudFormation stack). One behaviour per test.

The last test drives `sdc approve` against the local run (the synthesized stack, the real
handlers and state machine definitions) and follows the incident to `replaced`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from moto import mock_aws

from sdc_remediation.infra.cli import decide
from sdc_remediation.infra.cli.decide import execution_name
from sdc_remediation.infra.cli.main import main
from sdc_remediation.infra.cli.render import describe
from sdc_remediation.lambdas.adapters._aws import to_item
from sdc_remediation.lambdas.adapters.audit_anchor import LogsAuditAnchor
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.guard import DynamoGuardStore
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from sdc_remediation.lambdas.adapters.dynamodb.keys import hold_key
from sdc_remediation.lambdas.adapters.identity import PROOF_PREFIX, checked_request
from sdc_remediation.lambdas.logic.core.audit import GENESIS, Auditor, empty_chain, seal
from sdc_remediation.lambdas.logic.evidence.recommendation import judge
from sdc_remediation.lambdas.logic.ports import SystemClock
from sdc_remediation.lambdas.models.approvals import BINDING_HEADER
from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from tests.conftest import load_fixture
from tests.integration.conftest import (
    AUDIT_TABLE,
    CLUSTER,
    FAKE_CREDENTIALS,
    INCIDENTS_TABLE,
    REGION,
    ROLE,
    SESSION,
    create_audit_table,
    create_incidents_table,
)
from trainer_emitter import Emitter
from trainer_emitter.sinks import DeliveryError

EXECUTING = {"stepfunctions": {"execute_state_machine": True}}
ANCHOR_GROUP = "/SdcRemediation/audit-anchor"
"""moto runs the approval state machine's definition, so an execution ends like on AWS."""

ACCEPTING = json.dumps(
    {
        "StartAt": "Decide",
        "States": {
            "Decide": {
                "Type": "Pass",
                "Parameters": {
                    "incident_id.$": "$.incident_id",
                    "decision.$": "$.decision",
                    "accepted": True,
                },
                "End": True,
            }
        },
    }
)
"""Stands in for the approval state machine when `decide` accepts."""

REFUSAL = "incident {} is replaced, not awaiting approval"


def refusing(incident_id: str) -> str:
    """An approval state machine failing the way a refusing `decide` task fails it."""
    cause = {"errorType": "DecisionRefused", "errorMessage": REFUSAL.format(incident_id)}
    return json.dumps(
        {
            "StartAt": "Decide",
            "States": {
                "Decide": {"Type": "Fail", "Error": "DecisionRefused", "Cause": json.dumps(cause)}
            },
        }
    )


REPORT_EVIDENCE = {
    "kind": "report",
    "key": "report:r-1",
    "report_id": "r-1",
    "emitted_at": "2026-11-30T08:15:01+00:00",
    "job_name": "llama-pretrain",
    "step": 30,
    "check": "compute",
    "ambiguous": False,
    "role": "culprit",
    "metrics": ["sdc_replay_mismatch"],
    "ranks": [13],
    "suspects": [],
    "nonfinite": [],
    "mismatched_pairs": [[13, 5], [21, 13]],
    "culprits": [13],
    "verdicts": [],
    "weight_suspects": None,
    "suspect_window": [21, 30],
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
    "errors": [],
}
TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-secret-task-token"


@dataclass
class Deployed:
    """A moto account with the pipeline's tables, an approval state machine and the stack's
    Outputs written to a file."""

    outputs: Path
    approval_arn: str
    dynamodb: Any
    sfn: Any

    @property
    def incidents(self) -> DynamoIncidentStore:
        return DynamoIncidentStore(INCIDENTS_TABLE, lambda: self.dynamodb)

    @property
    def guard(self) -> DynamoGuardStore:
        return DynamoGuardStore(INCIDENTS_TABLE, lambda: self.dynamodb)

    @property
    def audit(self) -> DynamoAuditLog:
        return DynamoAuditLog(AUDIT_TABLE, lambda: self.dynamodb)

    @property
    def anchor(self) -> LogsAuditAnchor:
        return LogsAuditAnchor(ANCHOR_GROUP, lambda: SESSION.client("logs"))

    def rewrite(self, subject: str, seq: int, **changes: Any) -> None:
        """Rewrite entry `seq` and recompute every hash after it, then store the chain again
        with plain PutItem: what an insider with the functions' audit grant can do."""
        prev = GENESIS
        for entry in self.audit.entries(subject):
            if entry.seq >= seq:
                body = {**entry.body(), **(changes if entry.seq == seq else {}), "prev_hash": prev}
                entry = seal(**body)
                self.dynamodb.put_item(TableName=AUDIT_TABLE, Item=to_item(entry.to_record()))
            prev = entry.hash

    def drop(self, subject: str, *seqs: int) -> None:
        for seq in seqs:
            self.dynamodb.delete_item(
                TableName=AUDIT_TABLE, Key={"incident_id": {"S": subject}, "seq": {"N": str(seq)}}
            )

    def sdc(self, *argv: str) -> int:
        return main(["--outputs", str(self.outputs), *argv], session=SESSION)

    def incident(
        self,
        state: str,
        *,
        instance: str = "i-0bb00000000000002",
        created_at: str = "2026-11-30T08:15:04+00:00",
        audited: int = 3,
        **fields: Any,
    ) -> str:
        """An incident in `state` with `audited` chained audit entries; returns its id. A
        `task_token` is kept as `request_approval` keeps it: its digest on the incident."""
        incident_id = (
            f"sdc-{CLUSTER}-{instance}-{created_at[:19].replace('-', '').replace(':', '')}"
        )
        token = fields.pop("task_token", None)
        if token:
            self.incidents.keep_task_token(incident_id, token)
            fields["task_token_sha256"] = task_token_digest(token)
        stored = {
            "incident_id": incident_id,
            "cluster_name": CLUSTER,
            "instance_id": instance,
            "state": state,
            "created_at": created_at,
            "updated_at": created_at,
            "evidence": [{"kind": "alarm", "key": "alarm:seed", "metric": "sdc_replay_mismatch"}],
            **fields,
        }
        incident = Incident.from_record(stored)
        if incident.state is IncidentState.AWAITING_APPROVAL and incident.recommendation is None:
            incident.recommendation = judge(incident, [], created_at)  # as the request judges
        self.incidents.create(incident)
        auditor = Auditor(self.audit, SystemClock(), self.anchor)
        for n in range(audited):
            auditor.record(incident_id, f"step_{n + 1}", actor="open_incident", details={"n": n})
        return incident_id

    def tamper(self, subject: str, seq: int) -> None:
        """Change an entry behind the log's back, as someone with UpdateItem could."""
        self.dynamodb.update_item(
            TableName=AUDIT_TABLE,
            Key={"incident_id": {"S": subject}, "seq": {"N": str(seq)}},
            UpdateExpression="SET #action = :action",
            ExpressionAttributeNames={"#action": "action"},
            ExpressionAttributeValues={":action": {"S": "decision_accepted"}},
        )

    def approval_machine(self, definition: str) -> None:
        """Replace the deployment's approval state machine by one with `definition`."""
        arn = self.sfn.create_state_machine(
            name="sdc-approval-2", definition=definition, roleArn=ROLE
        )["stateMachineArn"]
        outputs = json.loads(self.outputs.read_text())
        self.outputs.write_text(json.dumps({**outputs, "ApprovalStateMachineArn": arn}))
        self.approval_arn = arn

    def executions(self) -> list[dict[str, Any]]:
        return self.sfn.list_executions(stateMachineArn=self.approval_arn)["executions"]

    def execution_input(self) -> dict[str, Any]:
        (execution,) = self.executions()
        described = self.sfn.describe_execution(executionArn=execution["executionArn"])
        return json.loads(described["input"])


def outputs_of(incidents: str, audit: str, approval_arn: str) -> dict[str, str]:
    return {
        "IncidentsTableName": incidents,
        "AuditTableName": audit,
        "ApprovalStateMachineArn": approval_arn,
        "NotificationTopicArn": f"arn:aws:sns:{REGION}:123456789012:sdc-notifications",
    }


@pytest.fixture
def deployed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    with mock_aws(config=EXECUTING):
        dynamodb = SESSION.client("dynamodb")
        create_incidents_table(dynamodb)
        create_audit_table(dynamodb)
        sfn = SESSION.client("stepfunctions")
        approval = sfn.create_state_machine(
            name="sdc-approval", definition=ACCEPTING, roleArn=ROLE
        )["stateMachineArn"]
        SESSION.client("logs").create_log_group(logGroupName=ANCHOR_GROUP)
        outputs = tmp_path / "outputs.json"
        outputs.write_text(
            json.dumps(
                {
                    **outputs_of(INCIDENTS_TABLE, AUDIT_TABLE, approval),
                    "AuditAnchorLogGroupName": ANCHOR_GROUP,
                }
            )
        )
        yield Deployed(outputs=outputs, approval_arn=approval, dynamodb=dynamodb, sfn=sfn)


def rows(stdout: str) -> list[list[str]]:
    """The table's rows under its header, split into columns."""
    return [line.split() for line in stdout.splitlines()[1:]]


# -- incidents --------------------------------------------------------------------------------


def test_incidents_lists_the_open_incidents_and_not_the_closed_ones(deployed, capsys):
    waiting = deployed.incident("awaiting_approval", instance="i-0aa00000000000001")
    closed = deployed.incident("replaced", instance="i-0bb00000000000002")

    status = deployed.sdc("incidents")

    out = capsys.readouterr().out
    assert status == 0
    assert waiting in out and closed not in out


def test_incidents_all_lists_closed_incidents_too(deployed, capsys):
    waiting = deployed.incident("awaiting_approval", instance="i-0aa00000000000001")
    closed = deployed.incident("replaced", instance="i-0bb00000000000002")

    deployed.sdc("incidents", "--all")

    assert [row[0] for row in rows(capsys.readouterr().out)] == [waiting, closed]


def test_incidents_state_lists_only_that_state(deployed, capsys):
    deployed.incident("awaiting_approval", instance="i-0aa00000000000001")
    rejected = deployed.incident("rejected", instance="i-0bb00000000000002")
    deployed.incident("replaced", instance="i-0cc00000000000003")

    deployed.sdc("incidents", "--state", "rejected")

    assert [row[0] for row in rows(capsys.readouterr().out)] == [rejected]


def test_incidents_shows_id_state_cluster_instance_opened_time_and_metric(deployed, capsys):
    incident_id = deployed.incident("health_check", created_at="2026-11-30T08:15:04+00:00")

    deployed.sdc("incidents")

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["INCIDENT", "STATE", "CLUSTER", "INSTANCE", "OPENED", "METRIC"]
    assert lines[1].split() == [
        incident_id,
        "health_check",
        CLUSTER,
        "i-0bb00000000000002",
        "2026-11-30",
        "08:15:04Z",
        "sdc_replay_mismatch",
    ]


def test_incidents_are_listed_oldest_first_across_states(deployed, capsys):
    newer = deployed.incident(
        "opened", instance="i-0aa00000000000001", created_at="2026-11-30T09:00:00+00:00"
    )
    older = deployed.incident(
        "replacing", instance="i-0bb00000000000002", created_at="2026-11-30T08:00:00+00:00"
    )

    deployed.sdc("incidents")

    assert [row[0] for row in rows(capsys.readouterr().out)] == [older, newer]


def test_incidents_lists_incident_items_only_though_others_share_the_state_index(deployed, capsys):
    incident_id = deployed.incident("replaced")
    deployed.dynamodb.put_item(  # e.g. a closed incident kept for a repeat-offender history
        TableName=INCIDENTS_TABLE,
        Item={
            "pk": {"S": "HISTORY#INSTANCE#i-0bb00000000000002"},
            "sk": {"S": f"2026-11-30T09:00:00+00:00#{incident_id}"},
            "incident_id": {"S": incident_id},
            "state": {"S": "replaced"},
            "created_at": {"S": "2026-11-30T08:15:04+00:00"},
        },
    )

    deployed.sdc("incidents", "--all")

    assert [row[0] for row in rows(capsys.readouterr().out)] == [incident_id]


def test_incidents_says_so_when_nothing_is_open(deployed, capsys):
    deployed.incident("replaced")

    status = deployed.sdc("incidents")

    assert status == 0
    assert capsys.readouterr().out.strip() == "no open incidents"


def test_incidents_json_gives_the_records_without_the_task_token(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", task_token=TOKEN)

    deployed.sdc("incidents", "--json")

    out = capsys.readouterr().out
    (record,) = json.loads(out)
    assert record["incident_id"] == incident_id
    assert record["state"] == "awaiting_approval"
    assert "task_token" not in record and TOKEN not in out


# -- show -------------------------------------------------------------------------------------


def test_show_prints_the_evidence_and_the_recommendation(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", evidence=[REPORT_EVIDENCE])

    status = deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert status == 0
    assert "EVIDENCE" in out and "culprits: [13]" in out and "steps 21-30" in out
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in out
    assert "rank 13 mismatched in both of its ring comparisons" in out


HARDWARE_EVIDENCE = {
    "kind": "hardware",
    "key": "hardware:5c1e0a9b2d3f4e51:firing:2026-11-30T08:14:00Z",
    "status": "firing",
    "rule": "uncorrectable_ecc",
    "severity": "critical",
    "node_name": "hyperpod-i-0bb00000000000002",
    "gpu": "5",
    "gpu_uuid": "GPU-5b5b5b5b-0000-4000-8000-000000000005",
    "xid": None,
    "counter": None,
    "summary": "Uncorrectable (double-bit) ECC errors rose within 10 minutes.",
    "starts_at": "2026-11-30T08:14:00Z",
    "received_at": "2026-11-30T08:15:04+00:00",
}


def test_show_prints_the_hardware_alerts_in_their_own_section(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", evidence=[HARDWARE_EVIDENCE])

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    section = out.split("HARDWARE ALERTS", 1)[1].split("\n\n", 1)[0]
    assert 'uncorrectable_ecc on GPU "5" ("GPU-5b5b5b5b-0000-4000-8000-000000000005")' in section
    assert "critical, started 2026-11-30 08:14:00 UTC, still firing" in section
    assert "Uncorrectable (double-bit) ECC errors rose within 10 minutes." in section


def test_show_prints_the_checkpoint_to_resume_from(deployed, capsys):
    resume = {
        "checkpoint": {
            "step": 20,
            "last_audit_pass": 20,
            "last_weight_check_pass": 20,
            "location": "s3://ckpt/llama/step-20",
        },
        "before_step": 21,
        "unverified": [],
        "known": 2,
    }
    incident_id = deployed.incident(
        "awaiting_approval", evidence=[{**REPORT_EVIDENCE, "resume": resume}]
    )

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert (
        'Resume from: checkpoint at step 20 ("s3://ckpt/llama/step-20"), saved before the suspect '
        "window [21, 30]; tags: last_audit_pass 20, last_weight_check_pass 20"
    ) in out
    assert (
        "Rollback: 10 steps (from the alarm at step 30 back to the checkpoint at step 20); "
        "exposure window: steps 21-30 (10 steps trained between the suspect window's start and "
        "detection)"
    ) in out


def test_show_gives_the_rollback_in_steps_and_tokens_when_the_report_carries_tokens_per_step(
    deployed, capsys
):
    resume = {
        "checkpoint": {
            "step": 20,
            "last_audit_pass": 20,
            "last_weight_check_pass": 20,
            "location": "s3://ckpt/llama/step-20",
        },
        "before_step": 21,
        "unverified": [],
        "known": 1,
    }
    evidence = {**REPORT_EVIDENCE, "resume": resume, "tokens_per_step": 4_194_304}
    incident_id = deployed.incident("awaiting_approval", evidence=[evidence])

    deployed.sdc("show", incident_id)
    text = capsys.readouterr().out
    deployed.sdc("show", incident_id, "--json")
    shown = json.loads(capsys.readouterr().out)

    assert (
        "Rollback: 10 steps, 41,943,040 tokens (from the alarm at step 30 back to the checkpoint "
        "at step 20; 4,194,304 tokens per step)"
    ) in text
    assert shown["resume"]["rollback_steps"] == 10
    assert shown["resume"]["rollback_tokens"] == 41_943_040


def test_show_prints_the_decision_and_the_replacement(deployed, capsys):
    approver = "arn:aws:states:us-west-2:123456789012:execution:sdc-approval:cli-alice-1"
    incident_id = deployed.incident(
        "replaced",
        decision={
            "decision": "approve",
            "comment": "rank 13 twice",
            "approval_execution_arn": approver,
            "at": "2026-11-30T08:20:00+00:00",
        },
        replacement={"status": "done", "new_instance_id": "i-0f000000000000005"},
    )

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert (
        "approve at 2026-11-30 08:20:00Z\n"
        f"  by unverified, execution {approver}\n"
        f"  approval execution {approver}\n"
        "  delivery: delivered\n"
        "  comment: rank 13 twice"
    ) in out
    assert "new instance: i-0f000000000000005" in out


def test_show_prints_the_health_check_result(deployed, capsys):
    incident_id = deployed.incident(
        "awaiting_approval",
        health_check={
            "started": True,
            "checks": ["InstanceStress"],
            "result": "failed",
            "status": "Running",
        },
    )

    deployed.sdc("show", incident_id)

    assert "InstanceStress: FAILED; node status Running" in capsys.readouterr().out


def test_show_of_an_incident_awaiting_approval_says_how_to_decide(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert f'sdc approve {incident_id} -m "<why>"' in out
    assert deployed.approval_arn in out


def test_show_offers_the_decisions_the_card_offers_and_no_second_reboot(deployed, capsys):
    fresh = deployed.incident("awaiting_approval")
    rebooted = deployed.incident(
        "awaiting_approval", instance="i-0aa00000000000001", reboot={"count": 1, "status": "done"}
    )

    deployed.sdc("show", fresh)
    offered = re.findall(r"^  sdc (\w+) ", capsys.readouterr().out, flags=re.MULTILINE)
    deployed.sdc("show", rebooted)
    offered_after_a_reboot = re.findall(
        r"^  sdc (\w+) ", capsys.readouterr().out, flags=re.MULTILINE
    )

    assert offered == ["reboot", "approve", "reject"]
    assert offered_after_a_reboot == ["approve", "reject"]


def test_show_prints_the_audit_trail_and_a_verified_chain(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", audited=3)

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert "AUDIT TRAIL (3 entries)" in out
    assert [line.split()[3] for line in out.splitlines() if " step_" in line] == [
        "step_1",
        "step_2",
        "step_3",
    ]
    assert "CHAIN: verified, 3 entries" in out


def test_show_names_the_broken_link_of_a_tampered_chain(deployed, capsys):
    incident_id = deployed.incident("replaced", audited=3)
    deployed.tamper(incident_id, seq=2)

    status = deployed.sdc("show", incident_id)

    assert status == 0  # show displays; `audit verify` is the check with an exit status
    assert "CHAIN: BROKEN, at seq 2: hash does not match" in capsys.readouterr().out


def test_show_never_prints_the_task_token(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", task_token=TOKEN)

    deployed.sdc("show", incident_id)
    deployed.sdc("show", incident_id, "--json")

    assert TOKEN not in capsys.readouterr().out


def test_show_and_incidents_never_print_a_task_token_an_older_record_holds(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")
    deployed.dynamodb.update_item(
        TableName=INCIDENTS_TABLE,
        Key={"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "META"}},
        UpdateExpression="SET task_token = :token",
        ExpressionAttributeValues={":token": {"S": TOKEN}},
    )

    deployed.sdc("show", incident_id)
    deployed.sdc("show", incident_id, "--json")
    deployed.sdc("incidents", "--json")

    assert TOKEN not in capsys.readouterr().out


def test_show_words_the_stored_recommendation_and_its_history_never_judging_again(deployed, capsys):
    """The record says replace, on a node with history; the evidence alone (an alarm, no
    report) would say health check only: `show` and `status` say what the record says."""
    past = {
        "incident_id": "sdc-earlier",
        "cluster_name": CLUSTER,
        "instance_id": "i-0bb00000000000002",
        "state": "rejected",
        "created_at": "2026-11-29T08:00:00+00:00",
        "closed_at": "2026-11-29T09:00:00+00:00",
        "gpu_uuids": [],
    }
    stored = {
        "advice": "replace after review",
        "reasons": ["transient fault on a node with history: 1 past incident(s) (sdc-earlier)"],
        "history": ["sdc-earlier"],
        "unconfirmed": [],
        "past": [past],
        "judged_at": "2026-11-30T08:21:12+00:00",
    }
    incident_id = deployed.incident("awaiting_approval", recommendation=stored)

    deployed.sdc("show", incident_id)
    text = capsys.readouterr().out
    deployed.sdc("show", incident_id, "--json")
    shown = json.loads(capsys.readouterr().out)
    deployed.sdc("status", "--json")
    waiting = json.loads(capsys.readouterr().out)["approvals_waiting"]

    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in text
    assert "sdc-earlier: rejected, closed 2026-11-29T09:00:00+00:00" in text
    assert shown["recommendation"]["advice"] == "replace after review"
    assert shown["recommendation"]["history"] == ["sdc-earlier"]
    assert [(w["incident_id"], w["tier"]) for w in waiting] == [(incident_id, "replace")]


def test_show_json_carries_the_incident_recommendation_audit_and_chain(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval", evidence=[REPORT_EVIDENCE], audited=2)
    deployed.tamper(incident_id, seq=2)

    deployed.sdc("show", incident_id, "--json")

    shown = json.loads(capsys.readouterr().out)
    assert shown["incident"]["incident_id"] == incident_id
    assert shown["recommendation"]["advice"] == "replace after review"
    assert [e["seq"] for e in shown["audit"]] == [1, 2]
    assert shown["chain"] == {
        "ok": False,
        "checked": 1,
        "broken_seq": 2,
        "reason": "hash does not match the entry's content",
    }


def test_show_of_an_unknown_incident_exits_2_with_one_line(deployed, capsys):
    status = deployed.sdc("show", "sdc-no-such-incident")

    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith("sdc: unknown incident sdc-no-such-incident")
    assert len(captured.err.strip().splitlines()) == 1


# -- approve / reject -------------------------------------------------------------------------


def test_approve_starts_the_approval_state_machine_with_the_consoles_input(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    status = deployed.sdc("approve", incident_id, "-m", "rank 13 mismatched twice")

    assert status == 0
    started = deployed.execution_input()
    assert started.pop("identity_proof").startswith(PROOF_PREFIX)
    assert started == {
        "incident_id": incident_id,
        "decision": "approve",
        "comment": "rank 13 mismatched twice",
    }


def test_approve_signs_an_identity_proof_bound_to_its_decision(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    deployed.sdc("approve", incident_id, "-m", "rank 13 mismatched twice")

    proof = deployed.execution_input()["identity_proof"]
    url, query = checked_request(proof)
    assert query["X-Amz-SignedHeaders"] == f"host;{BINDING_HEADER}"
    assert url.startswith("https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity")


def test_reject_starts_the_approval_state_machine_with_decision_reject(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    deployed.sdc("reject", incident_id, "-m", "known flaky job")

    assert deployed.execution_input()["decision"] == "reject"


def test_an_accepted_decision_is_reported_with_its_execution(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    deployed.sdc("approve", incident_id, "-m", "replace it")

    out = capsys.readouterr().out
    (execution,) = deployed.executions()
    assert out.startswith(f"approve accepted for {incident_id}")
    assert execution["executionArn"] in out


def test_the_approval_execution_is_named_after_the_caller(deployed, monkeypatch):
    monkeypatch.setattr(decide.getpass, "getuser", lambda: "alice.smith@example")
    incident_id = deployed.incident("awaiting_approval")

    deployed.sdc("approve", incident_id, "-m", "replace it")

    (execution,) = deployed.executions()
    assert re.fullmatch(r"cli-alice-smith-example-\d{8}T\d{6}Z-[0-9a-f]{4}", execution["name"])


def test_an_execution_name_stays_within_step_functions_limits():
    name = execution_name("x" * 200 + " :/#", datetime(2026, 11, 30, 8, 15, 4, tzinfo=UTC))

    assert len(name) <= 80
    assert re.fullmatch(r"[A-Za-z0-9_-]+", name)
    assert name.startswith("cli-xxxx") and "-20261130T081504Z-" in name


def test_a_refused_decision_prints_the_reason_and_exits_1(deployed, capsys):
    incident_id = deployed.incident("replaced")
    deployed.approval_machine(refusing(incident_id))

    status = deployed.sdc("approve", incident_id, "-m", "too late")

    assert status == 1
    assert capsys.readouterr().out.startswith(
        f"approve refused for {incident_id}: {REFUSAL.format(incident_id)}"
    )


def test_approve_json_reports_the_outcome(deployed, capsys):
    incident_id = deployed.incident("replaced")
    deployed.approval_machine(refusing(incident_id))

    deployed.sdc("approve", incident_id, "-m", "too late", "--json")

    outcome = json.loads(capsys.readouterr().out)
    assert outcome["status"] == "FAILED" and outcome["accepted"] is False
    assert outcome["reason"] == REFUSAL.format(incident_id)
    assert outcome["execution_arn"].startswith(
        deployed.approval_arn.replace("stateMachine", "execution")
    )


def test_approving_an_unknown_incident_exits_2_and_starts_nothing(deployed, capsys):
    status = deployed.sdc("approve", "sdc-no-such-incident", "-m", "typo")

    assert status == 2
    assert capsys.readouterr().err.startswith("sdc: unknown incident sdc-no-such-incident")
    assert deployed.executions() == []


def storm_hold(deployed: Deployed, *, lifted: bool = False) -> str:
    hold = ClusterHold(
        hold_id=f"hold-{CLUSTER}-storm-20261130T081504",
        cluster_name=CLUSTER,
        reason="4 distinct instances flagged within 900 s (threshold 4)",
        created_at="2026-11-30T08:15:04+00:00",
        instances=["i-0aa00000000000001", "i-0bb00000000000002"],
        threshold=4,
        window_seconds=900,
        lifted_at="2026-11-30T09:00:00+00:00" if lifted else None,
        lifted_by="approver:cli-alice" if lifted else None,
        comment="recipe fixed" if lifted else None,
    )
    deployed.guard.create_hold(hold)
    Auditor(deployed.audit, SystemClock()).record(
        hold.hold_id, "storm_hold_started", actor="open_incident", details={}
    )
    return hold.hold_id


def test_reset_starts_the_approval_state_machine_with_the_hold_and_decision_reset(deployed, capsys):
    hold_id = storm_hold(deployed)

    status = deployed.sdc("reset", hold_id, "-m", "the recipe is fixed")

    assert status == 0
    started = deployed.execution_input()
    assert started.pop("identity_proof").startswith(PROOF_PREFIX)
    assert started == {
        "incident_id": hold_id,
        "decision": "reset",
        "comment": "the recipe is fixed",
    }
    assert capsys.readouterr().out.startswith(f"reset accepted for {hold_id}: the storm hold")


def test_resetting_an_unknown_hold_exits_2_and_starts_nothing(deployed, capsys):
    incident_id = deployed.incident("held")  # an incident id is not a hold id

    status = deployed.sdc("reset", incident_id, "-m", "typo")

    assert status == 2
    assert capsys.readouterr().err.startswith(f"sdc: unknown storm hold {incident_id}")
    assert deployed.executions() == []


def test_holds_lists_the_active_storm_holds_and_all_lists_reset_ones_too(deployed, capsys):
    active = storm_hold(deployed)
    second = ClusterHold(
        hold_id=f"hold-{CLUSTER}-storm-20261130T101504",
        cluster_name=CLUSTER,
        reason="5 distinct instances",
        created_at="2026-11-30T10:15:04+00:00",
        instances=["i-0aa00000000000001"],
        lifted_at="2026-11-30T10:30:00+00:00",
        lifted_by="approver:cli-bob",
    )
    deployed.dynamodb.put_item(
        TableName=INCIDENTS_TABLE,
        Item=to_item({**hold_key(second.hold_id), **second.to_record()}),
    )
    deployed.incident("held")  # incidents are not holds

    deployed.sdc("holds")
    listed = rows(capsys.readouterr().out)
    deployed.sdc("holds", "--all", "--json")
    every = json.loads(capsys.readouterr().out)

    assert [row[0] for row in listed] == [active]
    assert listed[0][1] == "active"
    assert [h["hold_id"] for h in every] == [active, second.hold_id]


def test_holds_says_so_when_none_is_active(deployed, capsys):
    assert deployed.sdc("holds") == 0

    assert capsys.readouterr().out.strip() == "no active storm holds"


def test_show_of_an_active_storm_hold_says_why_and_how_to_reset_it(deployed, capsys):
    hold_id = storm_hold(deployed)

    assert deployed.sdc("show", hold_id) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"Storm hold {hold_id}")
    assert "active" in out and "4 distinct instances" in out
    assert f'sdc reset {hold_id} -m "<why>"' in out
    assert "CHAIN: verified, 1 entries" in out


def test_show_of_a_reset_hold_names_who_reset_it_and_offers_no_reset(deployed, capsys):
    hold_id = storm_hold(deployed, lifted=True)

    deployed.sdc("show", hold_id)

    out = capsys.readouterr().out
    assert "approver:cli-alice" in out and "recipe fixed" in out
    assert "sdc reset" not in out


def test_a_decision_without_a_comment_is_a_usage_error(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    with pytest.raises(SystemExit) as exited:
        deployed.sdc("approve", incident_id, "-m", "  ")

    assert exited.value.code == 2
    assert "comment" in capsys.readouterr().err
    assert deployed.executions() == []


# -- audit verify -----------------------------------------------------------------------------


def test_audit_verify_passes_intact_chains_with_exit_0(deployed, capsys):
    first = deployed.incident("replaced", instance="i-0aa00000000000001", audited=4)
    second = deployed.incident("rejected", instance="i-0bb00000000000002", audited=2)

    status = deployed.sdc("audit", "verify", first, second)

    out = capsys.readouterr().out
    assert status == 0
    assert f"verified  {first}  4 entries" in out and f"verified  {second}  2 entries" in out


def test_audit_verify_names_the_seq_of_a_tampered_entry_and_exits_1(deployed, capsys):
    incident_id = deployed.incident("replaced", audited=4)
    deployed.tamper(incident_id, seq=3)

    status = deployed.sdc("audit", "verify", incident_id)

    assert status == 1
    assert (
        f"BROKEN    {incident_id}  at seq 3: hash does not match the entry's content"
        in capsys.readouterr().out
    )


def test_audit_verify_names_a_deleted_entry(deployed, capsys):
    incident_id = deployed.incident("replaced", audited=3)
    deployed.dynamodb.delete_item(
        TableName=AUDIT_TABLE, Key={"incident_id": {"S": incident_id}, "seq": {"N": "2"}}
    )

    status = deployed.sdc("audit", "verify", incident_id)

    assert status == 1
    assert "at seq 2: entry 2 is missing" in capsys.readouterr().out


def test_audit_verify_detects_a_rewritten_entry_whose_chain_was_recomputed(deployed, capsys):
    incident_id = deployed.incident("replaced", audited=4)
    deployed.rewrite(incident_id, 2, actor="approver:arn:aws:iam::123456789012:user/mallory")

    status = deployed.sdc("audit", "verify", incident_id)

    assert status == 1
    assert (
        f"BROKEN    {incident_id}  at seq 2: entry 2 is not the one anchored: it was rewritten"
        in capsys.readouterr().out
    )


def test_audit_verify_detects_a_truncated_tail(deployed, capsys):
    incident_id = deployed.incident("replaced", audited=5)
    deployed.drop(incident_id, 4, 5)

    status = deployed.sdc("audit", "verify", incident_id)

    assert status == 1
    assert (
        f"BROKEN    {incident_id}  at seq 4: the anchor holds entries up to 5, the table ends "
        "at 3: the tail was removed"
    ) in capsys.readouterr().out


def test_audit_verify_all_detects_a_subject_removed_from_the_table(deployed, capsys):
    deployed.incident("replaced", audited=2)
    subject = "decision#arn:aws:states:us-west-2:123456789012:execution:sdc-approval:x"
    Auditor(deployed.audit, SystemClock(), deployed.anchor).record(
        subject, "decision_refused", actor="approver:x", details={"reason": "no incident"}
    )
    deployed.drop(subject, 1)

    status = deployed.sdc("audit", "verify", "--all")

    out = capsys.readouterr().out
    assert status == 1
    assert (
        f"BROKEN    {subject}  at seq 1: no audit entries, but the anchor holds 1: the subject "
        "was removed"
    ) in out


def test_audit_verify_all_checks_subjects_that_are_no_incident(deployed, capsys):
    deployed.incident("replaced", audited=2)
    Auditor(deployed.audit, SystemClock(), deployed.anchor).record(
        "event#0f4e", "event_refused", actor="open_incident", details={"reason": "malformed"}
    )
    deployed.tamper("event#0f4e", seq=1)

    status = deployed.sdc("audit", "verify", "--all")

    out = capsys.readouterr().out
    assert status == 1
    assert "BROKEN    event#0f4e  at seq 1" in out
    assert "chains checked: 2; verified 1, broken 1" in out


def test_audit_verify_all_flags_an_incident_without_any_audit_entry(deployed, capsys):
    incident_id = deployed.incident("opened", audited=0)

    status = deployed.sdc("audit", "verify", "--all")

    assert status == 1
    assert f"BROKEN    {incident_id}  at seq 1: no audit entries at all" in capsys.readouterr().out


def test_audit_verify_and_show_give_an_incident_without_entries_the_logic_s_verdict(
    deployed, capsys
):
    incident_id = deployed.incident("opened", audited=0)
    expected = describe(empty_chain())

    status = deployed.sdc("audit", "verify", incident_id)
    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert status == 1
    assert f"BROKEN    {incident_id}  {expected}" in out
    assert f"CHAIN: BROKEN, {expected}" in out


def test_audit_verify_json_gives_a_verdict_per_chain(deployed, capsys):
    intact = deployed.incident("replaced", instance="i-0aa00000000000001", audited=2)
    tampered = deployed.incident("rejected", instance="i-0bb00000000000002", audited=2)
    deployed.tamper(tampered, seq=1)

    deployed.sdc("audit", "verify", intact, tampered, "--json")

    verdicts = json.loads(capsys.readouterr().out)
    assert verdicts["ok"] is False
    assert [(c["subject"], c["ok"], c["broken_seq"]) for c in verdicts["chains"]] == [
        (intact, True, None),
        (tampered, False, 1),
    ]


def test_audit_verify_of_an_unknown_incident_exits_2(deployed, capsys):
    status = deployed.sdc("audit", "verify", "sdc-no-such-incident")

    assert status == 2
    assert capsys.readouterr().err.startswith("sdc: unknown incident sdc-no-such-incident")


def test_audit_verify_needs_incident_ids_or_all(deployed, capsys):
    with pytest.raises(SystemExit) as exited:
        deployed.sdc("audit", "verify")

    assert exited.value.code == 2
    assert "--all" in capsys.readouterr().err


# -- finding the deployment, and errors -------------------------------------------------------


def test_the_deployment_is_found_through_the_stacks_outputs(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")
    outputs = outputs_of(INCIDENTS_TABLE, AUDIT_TABLE, deployed.approval_arn)
    SESSION.client("cloudformation").create_stack(
        StackName="SdcTest",
        TemplateBody=json.dumps(
            {
                "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {name: {"Value": value} for name, value in outputs.items()},
            }
        ),
    )

    status = main(["--stack", "SdcTest", "incidents"], session=SESSION)

    assert status == 0
    assert incident_id in capsys.readouterr().out


def test_a_stack_that_does_not_exist_exits_2_naming_it(deployed, capsys):
    status = main(["--stack", "NoSuchStack", "incidents"], session=SESSION)

    assert status == 2
    assert capsys.readouterr().err.startswith("sdc: stack NoSuchStack not found in us-west-2")


def test_the_outputs_file_cdk_deploy_writes_is_read_too(deployed, capsys, tmp_path):
    incident_id = deployed.incident("awaiting_approval")
    nested = tmp_path / "cdk-outputs.json"
    nested.write_text(json.dumps({"SdcRemediation": json.loads(deployed.outputs.read_text())}))

    main(["--outputs", str(nested), "incidents"], session=SESSION)

    assert incident_id in capsys.readouterr().out


def team_stack_outputs(addresses: dict[str, str]) -> dict[str, str]:
    """A team stack's outputs as `cdk deploy --outputs-file` writes them: each address under a
    key that carries CDK's hash of the construct path, and all of them under `SdcDeployment`."""
    return {
        **{f"Sdc{name}7ABD01B1": value for name, value in addresses.items()},
        "SdcDeployment": json.dumps(addresses),
    }


def test_a_construct_in_a_teams_stack_is_found_by_its_fixed_key(deployed, capsys, tmp_path):
    # Given the outputs file of a team's app: the construct in its stack, beside the team's own
    incident_id = deployed.incident("awaiting_approval")
    addresses = json.loads(deployed.outputs.read_text())
    written = tmp_path / "cdk-outputs.json"
    written.write_text(
        json.dumps(
            {"TeamTraining": {"JobsQueueUrl": "https://sqs/jobs"},
             "MlPlatform": team_stack_outputs(addresses)}
        )
    )  # fmt: skip

    # When sdc reads it with no stack named
    status = main(["--outputs", str(written), "incidents"], session=SESSION)

    # Then it finds the one stack that holds the construct
    assert status == 0
    assert incident_id in capsys.readouterr().out


def test_of_several_deployments_in_one_file_the_stack_picks_one(deployed, capsys, tmp_path):
    # Given an app with the construct in two stacks, the second's tables elsewhere
    incident_id = deployed.incident("awaiting_approval")
    addresses = json.loads(deployed.outputs.read_text())
    elsewhere = {**addresses, "IncidentsTableName": "NoSuchTable"}
    written = tmp_path / "cdk-outputs.json"
    written.write_text(
        json.dumps(
            {"PlatformA": team_stack_outputs(addresses),
             "PlatformB": team_stack_outputs(elsewhere)}
        )
    )  # fmt: skip

    # When sdc is asked without a stack, then with each
    unpicked = main(["--outputs", str(written), "incidents"], session=SESSION)
    refused = capsys.readouterr().err
    picked = main(["--outputs", str(written), "--stack", "PlatformA", "incidents"], session=SESSION)
    listed = capsys.readouterr().out
    missing = main(
        ["--outputs", str(written), "--stack", "PlatformC", "incidents"], session=SESSION
    )
    unknown = capsys.readouterr().err

    # Then without one it names both and exits 2; with one it reads that stack's tables
    assert unpicked == 2
    assert "holds deployments in stacks PlatformA, PlatformB: pick one with --stack NAME" in refused
    assert (picked, incident_id in listed) == (0, True)
    assert missing == 2
    assert "no deployment in stack PlatformC (stacks with one: PlatformA, PlatformB)" in unknown


def test_a_teams_stack_is_found_through_cloudformation_by_its_name(deployed, capsys):
    # Given a deployed team stack that holds the construct (its address outputs hashed)
    incident_id = deployed.incident("awaiting_approval")
    outputs = team_stack_outputs(json.loads(deployed.outputs.read_text()))
    SESSION.client("cloudformation").create_stack(
        StackName="MlPlatform",
        TemplateBody=json.dumps(
            {
                "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {name: {"Value": value} for name, value in outputs.items()},
            }
        ),
    )

    # When sdc is pointed at it by its name
    status = main(["--stack", "MlPlatform", "incidents"], session=SESSION)

    # Then it reads the construct's tables
    assert status == 0
    assert incident_id in capsys.readouterr().out


def test_a_stack_without_the_construct_exits_2_saying_so(deployed, capsys):
    SESSION.client("cloudformation").create_stack(
        StackName="TeamTraining",
        TemplateBody=json.dumps(
            {
                "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"TopicArn": {"Value": {"Ref": "Topic"}}},
            }
        ),
    )

    status = main(["--stack", "TeamTraining", "incidents"], session=SESSION)

    assert status == 2
    assert "stack TeamTraining holds no SDC remediation deployment" in capsys.readouterr().err


def test_global_options_may_follow_the_command(deployed, capsys):
    incident_id = deployed.incident("awaiting_approval")

    main(["incidents", "--outputs", str(deployed.outputs)], session=SESSION)

    assert incident_id in capsys.readouterr().out


def test_no_credentials_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    for name in [
        *FAKE_CREDENTIALS,
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(outputs_of(INCIDENTS_TABLE, AUDIT_TABLE, "arn")))

    status = main(["--region", REGION, "--outputs", str(outputs), "incidents"])

    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("sdc: no AWS credentials found") and len(err.splitlines()) == 1


def test_the_cli_loads_neither_the_cdk_nor_the_lambda_runtime_libraries():
    """The console script needs boto3 only, like the distributable package."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, sdc_remediation.infra.cli.main; print(' '.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()

    heavy = [m for m in loaded if m.split(".")[0] in {"aws_cdk", "aws_lambda_powertools", "moto"}]
    assert heavy == []


# -- replay-spool -----------------------------------------------------------------------------


class Offline:
    """A sink that delivers nothing: the emitter spools the whole report."""

    def put_metrics(self, namespace: str, datapoints: Any) -> None:
        raise DeliveryError("offline")

    def put_event(self, detail: dict[str, Any]) -> None:
        raise DeliveryError("offline")


def test_replay_spool_delivers_the_spooled_reports_through_the_emitters_spool(
    deployed, tmp_path, capsys
):
    spooled = Emitter(
        cluster_name=CLUSTER,
        job_name="llama-pretrain",
        region=REGION,
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path / "spool",
        sink=Offline(),
    ).report(load_fixture("alarms", "replay_culprit"))
    assert spooled.spooled

    status = deployed.sdc("replay-spool", str(tmp_path / "spool"), "--json")

    replayed = json.loads(capsys.readouterr().out)
    assert status == 0
    assert replayed["delivered"] == [spooled.report_id]
    assert list((tmp_path / "spool").glob("*.jsonl")) == []
    metrics = SESSION.client("cloudwatch").list_metrics(Namespace="SDC/Training")["Metrics"]
    assert {m["MetricName"] for m in metrics} == {"sdc_replay_mismatch"}


def test_replay_spool_refuses_a_folder_others_can_write_to_with_one_line(
    deployed, tmp_path, capsys
):
    # Given a world-writable folder with a planted record in it
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sdc-spool.rank0.1.jsonl").write_text("{}\n")
    planted.chmod(0o777)
    # When an operator replays it
    status = deployed.sdc("replay-spool", str(planted))
    # Then it is refused, as the emitter refuses to write there, and nothing is touched
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0
    assert len(err) == 1 and "writable by group or others" in err[0]
    assert (planted / "sdc-spool.rank0.1.jsonl").read_text() == "{}\n"


# -- status ------------------------------------------------------------------------------------


def ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat()


def with_outputs(deployed: Deployed, **outputs: str) -> None:
    current = json.loads(deployed.outputs.read_text())
    deployed.outputs.write_text(json.dumps({**current, **outputs}))


def pause_switch(deployed: Deployed, value: str | None) -> None:
    """The stack's pause switch parameter with `value` (None: named in the outputs, absent)."""
    name = "/SdcRemediation/paused"
    if value is not None:
        SESSION.client("ssm").put_parameter(Name=name, Value=value, Type="String")
    with_outputs(deployed, PauseParameterName=name)


def dead_letter_queues(
    deployed: Deployed, undelivered: int, failed: int, failed_reports: int = 0
) -> None:
    sqs = SESSION.client("sqs")
    urls = {}
    for output, name, messages in (
        ("UndeliveredEventsQueueUrl", "undelivered", undelivered),
        ("FailedInvocationsQueueUrl", "failed", failed),
        ("FailedReportsQueueUrl", "failed-reports", failed_reports),
    ):
        urls[output] = sqs.create_queue(QueueName=name)["QueueUrl"]
        for n in range(messages):
            sqs.send_message(QueueUrl=urls[output], MessageBody=json.dumps({"n": n}))
    with_outputs(deployed, **urls)


def status_json(deployed: Deployed, capsys: Any) -> dict[str, Any]:
    assert deployed.sdc("status", "--json") == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def test_status_of_a_quiet_deployment_says_so_on_one_screen(deployed, capsys):
    pause_switch(deployed, "false")
    with_outputs(deployed, DryRun="false")

    assert deployed.sdc("status") == 0

    out = capsys.readouterr().out
    assert "pause switch  /SdcRemediation/paused = false (running)" in out
    assert "dry run       off" in out
    assert "OPEN INCIDENTS (0)" in out
    assert "APPROVALS WAITING (0)\n  none" in out
    assert "no storm hold" in out
    assert "no failed incident" in out
    assert len(out.splitlines()) < 40


def test_status_counts_the_open_incidents_by_state(deployed, capsys):
    deployed.incident("health_check", instance="i-0aa00000000000001")
    deployed.incident("awaiting_approval", instance="i-0bb00000000000002")
    deployed.incident("replacing", instance="i-0cc00000000000003")
    deployed.incident("replaced", instance="i-0dd00000000000004")

    deployed.sdc("status")

    out = capsys.readouterr().out
    assert "OPEN INCIDENTS (3)" in out
    assert "opened 0, health_check 1, awaiting_approval 1, replacing 1" in out


def test_status_lists_the_approvals_waiting_with_their_age(deployed, capsys):
    waiting = deployed.incident(
        "awaiting_approval", instance="i-0aa00000000000001", approval_requested_at=ago(minutes=12)
    )
    deployed.incident(
        "awaiting_approval",
        instance="i-0bb00000000000002",
        approval_requested_at=ago(hours=3),
        decision={"decision": "approve"},  # decided: the remediation goes on by itself
    )

    deployed.sdc("status")
    out = capsys.readouterr().out
    report = status_json(deployed, capsys)

    assert (
        f"{waiting}  waiting 12m  recommends: health check only  decide by: unknown  "
        f"(sdc show {waiting})"
    ) in out
    assert [w["incident_id"] for w in report["approvals_waiting"]] == [waiting]
    assert 12 * 60 <= report["approvals_waiting"][0]["waiting_seconds"] < 13 * 60


def test_status_and_show_give_the_stored_deadline_in_the_approvers_time_zone_and_utc(
    deployed, capsys
):
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2, minutes=30)
    deadline = {"expires_at": expires.isoformat(), "time_zone": "Europe/Berlin"}
    waiting = deployed.incident(
        "awaiting_approval",
        instance="i-0aa00000000000001",
        approval_requested_at=ago(minutes=5),
        approval_deadline=deadline,
    )
    local = expires.astimezone(ZoneInfo("Europe/Berlin"))
    words = f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} (Europe/Berlin), {expires:%Y-%m-%d %H:%M:%S} UTC"

    deployed.sdc("status")
    out = capsys.readouterr().out
    report = status_json(deployed, capsys)
    deployed.sdc("show", waiting)
    shown = capsys.readouterr().out

    assert f"decide by: {words} (in 2h" in out
    (row,) = report["approvals_waiting"]
    assert (row["expires_at"], row["deadline"]) == (expires.isoformat(), words)
    assert 2 * 3600 < row["seconds_left"] <= 2 * 3600 + 30 * 60
    assert re.search(rf"^  decide by +{re.escape(words)}$", shown, flags=re.MULTILINE)


def test_status_names_an_approval_whose_card_nobody_received(deployed, capsys):
    unseen = deployed.incident(
        "awaiting_approval",
        instance="i-0aa00000000000001",
        approval_requested_at=ago(minutes=5),
        card_undelivered=ago(minutes=5),
    )

    deployed.sdc("status")
    out = capsys.readouterr().out
    report = status_json(deployed, capsys)

    assert (
        f"{unseen}  waiting 5m  recommends: health check only  "
        "card_undelivered: nobody was notified"
    ) in out
    assert report["cards_undelivered"] == [unseen]


def test_status_lists_the_nodes_kept_for_reconciliation(deployed, capsys):
    kept = deployed.incident(
        "failed",
        instance="i-0aa00000000000001",
        closed_at=ago(minutes=3),
        recovery_unknown=ago(minutes=3),
    )
    deployed.incident("failed", instance="i-0bb00000000000002", closed_at=ago(minutes=2))

    deployed.sdc("status")
    out = capsys.readouterr().out
    report = status_json(deployed, capsys)

    assert "NODES KEPT FOR RECONCILIATION (1)" in out
    assert f"{kept}  i-0aa00000000000001 cordoned since" in out
    assert [k["incident_id"] for k in report["kept_for_reconciliation"]] == [kept]


def test_status_says_when_the_pipeline_is_paused(deployed, capsys):
    pause_switch(deployed, "true")

    deployed.sdc("status")

    assert "= true (PAUSED: new incidents are held)" in capsys.readouterr().out


def test_status_reports_an_unreadable_pause_switch_as_holding(deployed, capsys):
    pause_switch(deployed, None)

    report = status_json(deployed, capsys)

    assert report["pause_switch"]["paused"] is True
    assert "ParameterNotFound" in report["pause_switch"]["error"]


def test_status_shows_the_dry_run_setting_of_the_deployment(deployed, capsys):
    with_outputs(deployed, DryRun="true")

    deployed.sdc("status")

    assert "dry run       on: replacements are only recorded" in capsys.readouterr().out


def test_status_shows_the_active_storm_hold_and_what_was_held_lately(deployed, capsys):
    hold_id = storm_hold(deployed)
    deployed.incident(
        "held",
        instance="i-0aa00000000000001",
        created_at=ago(hours=1),
        hold={"kind": "muted", "reason": "muted", "hold_id": None, "mute_rule": "gpu-maint"},
    )
    deployed.incident(
        "held",
        instance="i-0bb00000000000002",
        created_at=ago(hours=2),
        hold={"kind": "paused", "reason": "paused", "hold_id": None},
    )
    deployed.incident("held", instance="i-0cc00000000000003", created_at=ago(days=3))

    deployed.sdc("status")

    out = capsys.readouterr().out
    assert f"storm hold {hold_id} on {CLUSTER}" in out
    assert "held on arrival in the last 24 h: 2 (muted by gpu-maint: 1, paused: 1)" in out


def test_status_lists_the_last_failures_newest_first_and_the_dead_letter_queues(deployed, capsys):
    older = deployed.incident(
        "failed",
        instance="i-0aa00000000000001",
        closed_at=ago(hours=5),
        error={"Error": "States.TaskFailed", "Cause": "ReplacementRejected: InstanceIdInUse"},
    )
    newer = deployed.incident(
        "failed",
        instance="i-0bb00000000000002",
        closed_at=ago(hours=1),
        error={"type": "NodeNotFound", "message": "i-0bb00000000000002 is gone"},
    )
    dead_letter_queues(deployed, undelivered=0, failed=2, failed_reports=7)

    deployed.sdc("status")

    out = capsys.readouterr().out
    failures = out.split("LAST FAILURES\n", 1)[1].splitlines()
    assert failures[0].startswith(f"  {newer}  failed ")
    assert failures[0].endswith("NodeNotFound: i-0bb00000000000002 is gone")
    assert failures[1].startswith(f"  {older}  failed ")
    assert "States.TaskFailed: ReplacementRejected: InstanceIdInUse" in failures[1]
    assert failures[2] == (
        "  dead-letter queues: undelivered events 0, failed alarms 2, failed reports 7"
    )


# -- end to end on the local run --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.synth
def test_approving_through_the_cli_leads_the_incident_to_replaced(tmp_path, capsys):
    from sdc_remediation.infra.local.run import LocalRun  # CDK synth and moto's interpreter: slow

    with LocalRun.open() as run:
        event = load_fixture("events", "contributor_alarm")
        event["detail"]["alarmContributor"]["attributes"] = {
            "ClusterName": CLUSTER,
            "InstanceId": "i-0bb00000000000002",
        }
        (delivery,) = run.put_event(event)
        incident_id = delivery.response["incident_id"]
        run.wait_for(incident_id, "awaiting_approval")
        outputs = tmp_path / "outputs.json"
        outputs.write_text(json.dumps(run.stack.outputs))

        status = main(
            ["--outputs", str(outputs), "approve", incident_id, "-m", "rank 13 twice"],
            session=run.operator_session(),
        )
        incident = run.wait_for(incident_id, "replaced")

        assert status == 0
        assert incident.replacement.new_instance_id not in (None, "i-0bb00000000000002")
        (accepted,) = [e for e in run.audit(incident_id) if e.action == "decision_accepted"]
        assert accepted.actor == "approver:arn:aws:iam::123456789012:user/local-operator"
        assert re.search(
            r":execution:SdcRemediation-approval:cli-[^:]+$",
            accepted.details["approval_execution_arn"],
        )
        assert accepted.details["comment"] == "rank 13 twice"


def test_show_prints_what_the_gpus_counters_showed_when_the_approval_was_requested(
    deployed, capsys
):
    from sdc_remediation.lambdas.models.telemetry import TelemetryFinding, TelemetryRecord

    text = "XID 79 at 08:03:15 UTC on GPU-0000000d-5a1e-4c1d-9e7b-000000019223 (GPU 5)"
    record = TelemetryRecord(
        state="signal",
        summary=f"hardware signal: {text}",
        queried_at="2026-11-30T08:20:00+00:00",
        dashboard="https://g-1.grafana-workspace.us-west-2.amazonaws.com/d/gpu",
        findings=(TelemetryFinding("xid", "signal", text, value=79),),
    )
    incident_id = deployed.incident("awaiting_approval", telemetry=record)

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert f"HARDWARE TELEMETRY (the GPU's own counters, from dcgm-exporter)\n  {text}\n" in out
    assert "  dashboard: https://g-1.grafana-workspace.us-west-2.amazonaws.com/d/gpu" in out


def test_show_prints_hyperpods_events_and_the_nodes_labels_as_the_approver_saw_them(
    deployed, capsys
):
    from sdc_remediation.lambdas.models.hyperpod import ClusterEvent, HyperPodView

    view = HyperPodView(
        queried_at="2026-11-30T08:20:00+00:00",
        window_start="2026-11-30T07:15:04+00:00",
        window_end="2026-11-30T08:20:00+00:00",
        events=(
            ClusterEvent(
                "evt-1",
                "2026-11-30T08:16:00+00:00",
                "Instance",
                "Info",
                "Deep health check started: InstanceStress",
            ),
            ClusterEvent(
                "evt-2",
                "2026-11-30T08:19:00+00:00",
                "Instance",
                "Error",
                "Deep health check failed",
                failure="InstanceStress: GPU stress test failed",
            ),
        ),
        node_name="ip-10-1-17-42.us-west-2.compute.internal",
        labels=(
            ("sagemaker.amazonaws.com/node-health-status", "Unschedulable"),
            ("sagemaker.amazonaws.com/fault-type", "GpuHardware"),
        ),
    )
    incident_id = deployed.incident("awaiting_approval", hyperpod=view)

    deployed.sdc("show", incident_id)

    out = capsys.readouterr().out
    assert (
        "HYPERPOD (its own events for this instance, and the node's labels)\n"
        "  08:16:00 UTC Deep health check started: InstanceStress\n"
        "  08:19:00 UTC [Error] Deep health check failed: InstanceStress: GPU stress test failed\n"
        "  node ip-10-1-17-42.us-west-2.compute.internal labels: "
        "node-health-status=Unschedulable, fault-type=GpuHardware\n"
    ) in out


def test_show_of_an_incident_not_yet_asked_about_its_counters_says_so(deployed, capsys):
    incident_id = deployed.incident("health_check")

    deployed.sdc("show", incident_id)

    assert "  not queried yet (the approval request queries it)" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.synth
def test_status_against_the_local_run_shows_the_incident_waiting(tmp_path, capsys):
    from sdc_remediation.infra.local.run import LocalRun  # CDK synth and moto's interpreter: slow

    with LocalRun.open() as run:
        event = load_fixture("events", "contributor_alarm")
        event["detail"]["alarmContributor"]["attributes"] = {
            "ClusterName": CLUSTER,
            "InstanceId": "i-0bb00000000000002",
        }
        (delivery,) = run.put_event(event)
        incident_id = delivery.response["incident_id"]
        run.wait_for(incident_id, "awaiting_approval")
        outputs = run.write_outputs(str(tmp_path / "outputs.json"))  # what --serve hands out

        status = main(["--outputs", outputs, "status", "--json"], session=run.session)
        # The functions' JSON log lines share stdout here; the report is the indented document.
        (document,) = re.findall(r"^\{\n.*?^\}$", capsys.readouterr().out, re.M | re.S)
        report = json.loads(document)

        assert status == 0
        assert [w["incident_id"] for w in report["approvals_waiting"]] == [incident_id]
        assert report["open"]["awaiting_approval"] == [incident_id]
        assert report["pause_switch"]["value"] == "false"
        assert report["pause_switch"]["paused"] is False
        assert report["dry_run"] == "false"
        assert report["dead_letter_queues"] == {
            "undelivered events": 0,
            "failed alarms": 0,
            "failed reports": 0,
        }


def test_reconcile_prints_what_was_settled_what_waits_and_what_needs_a_person():
    from sdc_remediation.infra.cli.reconcile import render_reconcile

    text = render_reconcile(
        {
            "settled": [{"incident_id": "sdc-a", "finding": "orphan_slot", "why": "closed"}],
            "waiting": [],
            "needs_person": [
                {"incident_id": "sdc-b", "finding": "recovery_unknown", "why": "Pending 7 h"}
            ],
            "unfinished": True,
        }
    )

    assert text.splitlines() == [
        "Settled: 1",
        "  sdc-a  orphan_slot: closed",
        "Waiting (within their patience): 0",
        "Needs a person: 1",
        "  sdc-b  recovery_unknown: Pending 7 h",
        "The run stopped for time; the next one goes on.",
    ]


def test_reconcile_against_a_deployment_without_the_function_says_to_deploy_it(deployed, capsys):
    assert deployed.sdc("reconcile") == 2
    assert "has no output ReconcileFunctionName" in capsys.readouterr().err


# -- sdc page: the dashboard's page, rendered here ---------------------------------------------


def test_page_renders_the_open_incidents_to_an_html_file_and_a_screenshot(
    deployed, capsys, tmp_path
):
    incident_id = deployed.incident("awaiting_approval")
    out = tmp_path / "page" / "incidents.html"

    code = deployed.sdc("page", "--out", str(out))

    assert code == 0
    html = out.read_text()
    assert f'data-incident="{incident_id}"' in html
    assert "Open for:" in html and "Isolation:" in html
    assert all(f'data-link="{name}"' in html for name in ("card", "audit trail", "execution"))
    assert "cwdb-action { display: none; }" in html  # popups hidden, as the dashboard shows it
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"screenshot: {png}" in capsys.readouterr().out


def test_page_with_no_png_writes_the_html_alone(deployed, capsys, tmp_path):
    deployed.incident("awaiting_approval")
    out = tmp_path / "incidents.html"

    assert deployed.sdc("page", "--out", str(out), "--no-png") == 0

    assert out.is_file() and not out.with_suffix(".png").exists()
    assert capsys.readouterr().out.strip() == f"1 open incident: {out}"
