"""`sdc`: the operator's command line for the SDC remediation pipeline.

See the pipeline's state on one screen (`status`), list and inspect incidents, approve (replace), reboot
or reject one, reset a storm hold (through the approval state machine, exactly like the console,
so the audit log is the same), verify the audit log's hash chains, and re-send the reports a
training rank spooled. It finds the deployment through its stack's
Outputs (`--stack`, default SdcRemediation) or a JSON file of them (`--outputs`).

Thin on purpose: parsing and printing. Reading and writing go through the Lambda side's
adapters and logic (the incident store, the audit log and its chain check, the approval card),
and `replay-spool` through `trainer_emitter.spool`. Reference: docs/operate.md.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)

from infra import deployment
from infra.deployment import DEFAULT_STACK, Deployment, DeploymentError
from lambdas.adapters.approval_executions import ApprovalExecutions, ExecutionEnded
from lambdas.adapters.dynamodb.audit import DynamoAuditLog
from lambdas.adapters.dynamodb.guard import DynamoGuardStore
from lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from lambdas.adapters.incident_queries import OPEN_STATES, DynamoAuditChains, DynamoIncidentQueries
from lambdas.adapters.queues import QueueDepths
from lambdas.adapters.ssm import SsmPauseSwitch
from lambdas.logic import cards, evidence
from lambdas.logic.audit import ChainVerdict, verify_chain
from lambdas.logic.lifecycle import MAX_REBOOTS, reboots_done
from lambdas.logic.recommendation import Recommendation, recommend
from lambdas.models.audit import AuditEntry
from lambdas.models.errors import AwsError, SdcError
from lambdas.models.guard import ClusterHold, HoldKind, reads_as_paused
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import Decision
from trainer_emitter import spool
from trainer_emitter.sinks import AwsSink

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
"""What was checked or asked for did not happen: a broken chain, a refused decision, a report
still pending."""
EXIT_ERROR: Final = 2
"""The command could not run: bad usage, no credentials, no stack, an unknown incident."""

CLIENT_CONFIG: Final = Config(
    retries={"mode": "standard", "max_attempts": 3}, user_agent_extra="sdc-remediation-cli"
)
DEFAULT_APPROVAL_TIMEOUT: Final = 60.0

NO_CREDENTIALS: Final = (
    "no AWS credentials found: configure them (aws configure, aws sso login, AWS_PROFILE) "
    "or pass --profile"
)
REFUSED_CREDENTIALS: Final = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
    }
)
ACCESS_DENIED: Final = frozenset({"AccessDenied", "AccessDeniedException"})

HOLD_PREFIX: Final = "hold-"
"""Storm hold ids start with it (`lambdas.logic.ids.hold_id`); `show` takes either kind of id."""
CARD_SECTIONS: Final = (
    "NODE",
    "EVIDENCE",
    "DEEP HEALTH CHECK",
    "HARDWARE TELEMETRY",
    "RECOMMENDATION",
)
"""The approval card's paragraphs `show` prints; its "WHAT TO DO" is for the notification."""


RECENT_HOLDS: Final = timedelta(hours=24)
"""`status` counts the incidents held on arrival within this window."""
LAST_FAILURES: Final = 5
"""`status` shows this many of the newest failed incidents."""


class CliError(Exception):
    """Stops the command with a one-line message and exit status 2."""


# -- the AWS side: one session, the deployment, the adapters over them -----------------------


class Operator:
    """What a command works with. Clients are built on first use, one per service."""

    def __init__(self, args: argparse.Namespace, session: boto3.session.Session) -> None:
        self.args = args
        self.session = session
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(
                service, endpoint_url=self.args.endpoint_url, config=CLIENT_CONFIG
            )
        return self._clients[service]

    def factory(self, service: str) -> Callable[[], Any]:
        return lambda: self.client(service)

    @cached_property
    def deployment(self) -> Deployment:
        if self.args.outputs:
            return deployment.from_file(Path(self.args.outputs), self.args.stack)
        return deployment.from_stack(self.client("cloudformation"), self.args.stack)

    def incidents(self) -> DynamoIncidentStore:
        return DynamoIncidentStore(self.deployment.incidents_table, self.factory("dynamodb"))

    def guard(self) -> DynamoGuardStore:
        return DynamoGuardStore(self.deployment.incidents_table, self.factory("dynamodb"))

    def queries(self) -> DynamoIncidentQueries:
        return DynamoIncidentQueries(self.deployment.incidents_table, self.factory("dynamodb"))

    def audit(self) -> DynamoAuditLog:
        return DynamoAuditLog(self.deployment.audit_table, self.factory("dynamodb"))

    def chains(self) -> DynamoAuditChains:
        return DynamoAuditChains(self.deployment.audit_table, self.factory("dynamodb"))

    def approvals(self) -> ApprovalExecutions:
        return ApprovalExecutions(
            self.deployment.approval_state_machine_arn, self.factory("stepfunctions")
        )

    def pause_switch(self) -> SsmPauseSwitch | None:
        name = self.deployment.optional(deployment.PAUSE_PARAMETER)
        return SsmPauseSwitch(name, self.factory("ssm")) if name else None

    def queues(self) -> QueueDepths:
        return QueueDepths(self.factory("sqs"))

    def hold(self, hold_id: str) -> ClusterHold:
        found = self.guard().get_hold(hold_id)
        if found is None:
            raise self._unknown(f"storm hold {hold_id}", "; `sdc holds` lists them")
        return found

    def incident(self, incident_id: str) -> Incident:
        found = self.incidents().get(incident_id)
        if found is None:
            raise self._unknown(f"incident {incident_id}")
        return found

    def _unknown(self, what: str, hint: str = "") -> CliError:
        where = f"{self.deployment.incidents_table} ({self.deployment.source})"
        return CliError(f"unknown {what}: not in table {where}{hint}")


# -- commands ---------------------------------------------------------------------------------


def cmd_status(op: Operator, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    report = status_report(op, now)
    if args.json:
        _print_json(report)
    else:
        print(render_status(report, op.deployment.source, now))
    return EXIT_OK


def status_report(op: Operator, now: datetime) -> dict[str, Any]:
    """Everything `status` shows, as plain data (its `--json`)."""
    queries = op.queries()
    open_incidents = queries.in_states(OPEN_STATES)
    waiting = [
        i for i in open_incidents if i.state is IncidentState.AWAITING_APPROVAL and not i.decision
    ]
    since = (now - RECENT_HOLDS).isoformat()
    held = [i for i in queries.by_state(IncidentState.HELD) if i.created_at >= since]
    failed = sorted(
        queries.by_state(IncidentState.FAILED),
        key=lambda i: i.closed_at or i.updated_at,
        reverse=True,
    )[:LAST_FAILURES]
    return {
        "open": {
            state.value: [i.incident_id for i in open_incidents if i.state is state]
            for state in OPEN_STATES
        },
        "approvals_waiting": [
            {
                "incident_id": i.incident_id,
                "cluster_name": i.cluster_name,
                "instance_id": i.instance_id,
                "requested_at": i.approval_requested_at,
                "waiting_seconds": _seconds_since(i.approval_requested_at or i.updated_at, now),
            }
            for i in waiting
        ],
        "storm_holds": [h.to_record() for h in queries.storm_holds() if h.active],
        "held_recently": [
            {
                "incident_id": i.incident_id,
                "kind": (i.hold or {}).get("kind"),
                "mute_rule": (i.hold or {}).get("mute_rule"),
                "created_at": i.created_at,
            }
            for i in held
        ],
        "pause_switch": _pause_state(op),
        "dry_run": op.deployment.optional(deployment.DRY_RUN),
        "last_failures": [
            {
                "incident_id": i.incident_id,
                "closed_at": i.closed_at,
                "why": _failure_summary(i),
            }
            for i in failed
        ],
        "dead_letter_queues": _queue_depths(op),
    }


def _pause_state(op: Operator) -> dict[str, Any]:
    switch = op.pause_switch()
    if switch is None:
        return {"parameter": None, "value": None, "paused": False, "error": None}
    try:
        value = switch.read()
    except AwsError as err:
        # The functions count an unreadable switch as paused; say so rather than fail.
        return {
            "parameter": switch.parameter_name,
            "value": None,
            "paused": True,
            "error": str(err),
        }
    return {
        "parameter": switch.parameter_name,
        "value": value,
        "paused": reads_as_paused(value),
        "error": None,
    }


def _queue_depths(op: Operator) -> dict[str, int | None]:
    depths: dict[str, int | None] = {}
    queues = op.queues()
    for output, label in deployment.DEAD_LETTER_QUEUES.items():
        url = op.deployment.optional(output)
        if url is None:
            continue
        try:
            depths[label] = queues.depth(url)
        except AwsError:
            depths[label] = None  # shown as unknown; the rest of the screen still helps
    return depths


def _failure_summary(incident: Incident) -> str:
    error = incident.error or {}
    kind = error.get("type") or error.get("Error") or error.get("code")
    message = error.get("message") or error.get("Cause") or error.get("close_mismatch")
    text = ": ".join(str(part) for part in (kind, message) if part) or incident.reason or "-"
    return " ".join(text.split())[:160]


def _seconds_since(value: str | None, now: datetime) -> int | None:
    if not value:
        return None
    try:
        then = datetime.fromisoformat(value)
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0, int((now - then).total_seconds()))


def age(seconds: int | None) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours < 1:
        return f"{minutes}m"
    if days < 1:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{days}d{hours % 24:02d}h"


def render_status(report: dict[str, Any], source: str, now: datetime) -> str:
    pause = report["pause_switch"]
    if pause["parameter"] is None:
        switch = "none in this deployment's outputs"
    elif pause["error"]:
        switch = f"{pause['parameter']} unreadable ({pause['error']}): the functions hold"
    else:
        state = "PAUSED: new incidents are held" if pause["paused"] else "running"
        switch = f"{pause['parameter']} = {pause['value']} ({state})"
    dry_run = report["dry_run"]
    header = [
        f"SDC remediation, {source}, at {_when(now.isoformat())}",
        *_fields(
            ("pause switch", switch),
            (
                "dry run",
                "unknown (no DryRun output)"
                if dry_run is None
                else "on: replacements are only recorded"
                if dry_run == "true"
                else "off",
            ),
        ),
    ]
    opened = report["open"]
    total = sum(len(ids) for ids in opened.values())
    blocks = [
        "\n".join(header),
        "\n".join(
            [
                f"OPEN INCIDENTS ({total})",
                "  " + ", ".join(f"{state} {len(ids)}" for state, ids in opened.items()),
            ]
        ),
    ]
    waiting = report["approvals_waiting"]
    lines = [f"APPROVALS WAITING ({len(waiting)})"]
    lines += [
        f"  {w['incident_id']}  waiting {age(w['waiting_seconds'])}  (sdc show {w['incident_id']})"
        for w in waiting
    ] or ["  none"]
    blocks.append("\n".join(lines))
    storms = report["storm_holds"]
    lines = ["ACTIVE HOLDS"]
    lines += [
        f"  storm hold {h['hold_id']} on {h['cluster_name']} since {_when(h['created_at'])}, "
        f"{len(h['instances'])} instances (sdc show {h['hold_id']})"
        for h in storms
    ] or ["  no storm hold"]
    held = report["held_recently"]
    kinds: dict[str, int] = {}
    for item in held:
        kind = str(item["kind"])
        if item["kind"] == HoldKind.MUTED and item["mute_rule"]:
            kind = f"muted by {item['mute_rule']}"
        kinds[kind] = kinds.get(kind, 0) + 1
    hours = int(RECENT_HOLDS.total_seconds() // 3600)
    lines.append(
        f"  held on arrival in the last {hours} h: {len(held)}"
        + (" (" + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) + ")" if held else "")
    )
    blocks.append("\n".join(lines))
    lines = ["LAST FAILURES"]
    lines += [
        f"  {f['incident_id']}  failed {_when(f['closed_at'])}  {f['why']}"
        for f in report["last_failures"]
    ] or ["  no failed incident"]
    queues = report["dead_letter_queues"]
    if queues:
        lines.append(
            "  dead-letter queues: "
            + ", ".join(
                f"{label} {'?' if depth is None else depth}" for label, depth in queues.items()
            )
        )
    blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def cmd_incidents(op: Operator, args: argparse.Namespace) -> int:
    if args.state:
        states: Sequence[IncidentState] = [IncidentState(args.state)]
        nothing = f"no incidents in state {args.state}"
    elif args.all:
        states, nothing = list(IncidentState), "no incidents"
    else:
        states, nothing = OPEN_STATES, "no open incidents"
    found = op.queries().in_states(states)
    if args.json:
        _print_json([public_record(i) for i in found])
    elif not found:
        print(nothing)
    else:
        _print_table(
            ("INCIDENT", "STATE", "CLUSTER", "INSTANCE", "OPENED", "METRIC"),
            [
                (
                    i.incident_id,
                    i.state.value,
                    i.cluster_name,
                    i.instance_id or "-",
                    _when(i.created_at),
                    ",".join(i.metrics) or "-",
                )
                for i in found
            ],
        )
    return EXIT_OK


def cmd_holds(op: Operator, args: argparse.Namespace) -> int:
    found = [h for h in op.queries().storm_holds() if args.all or h.active]
    if args.json:
        _print_json([h.to_record() for h in found])
    elif not found:
        print("no storm holds" if args.all else "no active storm holds")
    else:
        _print_table(
            ("HOLD", "STATE", "CLUSTER", "STARTED", "INSTANCES", "RESET BY"),
            [
                (
                    h.hold_id,
                    "active" if h.active else "reset",
                    h.cluster_name,
                    _when(h.created_at),
                    str(len(h.instances)),
                    h.lifted_by or "-",
                )
                for h in found
            ],
        )
    return EXIT_OK


def cmd_show(op: Operator, args: argparse.Namespace) -> int:
    if args.incident.startswith(HOLD_PREFIX):
        return _show_hold(op, args)
    incident = op.incident(args.incident)
    entries = op.audit().entries(incident.incident_id)
    verdict = chain_verdict(entries)
    advice = recommend(
        evidence.reports(incident),
        (incident.health_check or {}).get("result"),
        job_level=incident.is_job,
        rebooted=reboots_done(incident) > 0,
    )
    if args.json:
        _print_json(
            {
                "incident": public_record(incident),
                "recommendation": {
                    "advice": advice.advice.value,
                    "reasons": list(advice.reasons),
                },
                "audit": [e.to_record() for e in entries],
                "chain": verdict_record(verdict),
            }
        )
    else:
        print(render_incident(incident, op.deployment, advice, entries, verdict))
    return EXIT_OK


def _show_hold(op: Operator, args: argparse.Namespace) -> int:
    hold = op.hold(args.incident)
    entries = op.audit().entries(hold.hold_id)
    verdict = chain_verdict(entries)
    if args.json:
        _print_json(
            {
                "hold": hold.to_record(),
                "audit": [e.to_record() for e in entries],
                "chain": verdict_record(verdict),
            }
        )
    else:
        print(render_hold(hold, entries, verdict))
    return EXIT_OK


def cmd_decide(op: Operator, args: argparse.Namespace) -> int:
    decision = Decision(args.decision)
    # A reset names a storm hold, the other decisions an incident: unknown ids stop here.
    if decision is Decision.RESET:
        subject = op.hold(args.incident).hold_id
    else:
        subject = op.incident(args.incident).incident_id
    # The input the card tells approvers to paste into the console, with the comment filled in.
    payload = {**cards.approval_input(subject, decision), "comment": args.comment}
    name = execution_name(_caller())
    approvals = op.approvals()
    started = approvals.start(name, payload)
    if started.already_existed:
        raise CliError(f"an approval execution named {name} exists already: run the command again")
    ended = approvals.wait(started.arn, timeout=args.timeout)
    accepted = ended.status == "SUCCEEDED"
    if args.json:
        _print_json(
            {
                **payload,
                "execution_name": name,
                "execution_arn": ended.arn,
                "status": ended.status,
                "accepted": accepted,
                "reason": None if accepted else ended.reason,
            }
        )
    else:
        print(render_decision(subject, decision, ended, args.timeout))
    return EXIT_OK if accepted else EXIT_FAILED


def cmd_audit_verify(op: Operator, args: argparse.Namespace) -> int:
    chains: dict[str, list[AuditEntry]]
    if args.all:
        chains = op.chains().all_chains()
        for incident in op.queries().in_states(IncidentState):
            chains.setdefault(incident.incident_id, [])  # an incident without a single entry
    else:
        chains = {}
        for subject in dict.fromkeys(args.incidents):
            entries = op.audit().entries(subject)
            if not entries:
                op.incident(subject)  # unknown: exit 2; known without entries: broken
            chains[subject] = entries
    verdicts = {subject: chain_verdict(entries) for subject, entries in chains.items()}
    broken = [s for s, v in verdicts.items() if not v.ok]
    if args.json:
        _print_json(
            {
                "ok": not broken,
                "chains": [{"subject": s, **verdict_record(v)} for s, v in verdicts.items()],
            }
        )
    else:
        for subject, verdict in verdicts.items():
            print(f"{'verified' if verdict.ok else 'BROKEN':<9} {subject}  {describe(verdict)}")
        print(
            f"chains checked: {len(verdicts)}; verified {len(verdicts) - len(broken)}, broken {len(broken)}"
        )
    return EXIT_FAILED if broken else EXIT_OK


def cmd_replay_spool(op: Operator, args: argparse.Namespace) -> int:
    region = op.session.region_name
    if not region:
        raise CliError("no AWS region: pass --region, set AWS_REGION, or give the profile one")
    logging.basicConfig(level=logging.WARNING, format="sdc: %(levelname)s %(message)s")
    paths = args.paths or [Path(os.environ.get("SDC_SPOOL_DIR") or spool.default_spool_dir())]
    sink = AwsSink(
        region=region,
        endpoint_url=args.endpoint_url,
        event_bus=args.event_bus,
        connect_timeout=5,
        read_timeout=10,
        max_attempts=5,
        session_factory=lambda: op.session,
    )
    result = spool.replay(paths, sink)
    if args.json:
        _print_json(
            {
                "delivered": result.delivered,
                "still_pending": result.still_pending,
                "rejected_lines": result.rejected_lines,
                "files": [str(p) for p in result.files],
            }
        )
    elif not result.files:
        print(f"no spool files in {', '.join(str(p) for p in paths)}")
    else:
        print(f"{len(result.files)} spool files; delivered {len(result.delivered)} reports")
        for report_id in result.delivered:
            print(f"  delivered      {report_id}")
        for report_id in result.still_pending:
            print(f"  still pending  {report_id} (kept in its spool file for the next replay)")
        if result.rejected_lines:
            print(f"  {result.rejected_lines} unreadable lines set aside in <file>.rejected")
    return EXIT_OK if result.ok else EXIT_FAILED


# -- what the commands print ------------------------------------------------------------------


def public_record(incident: Incident) -> dict[str, Any]:
    """The incident as stored, without the task token: whoever holds it could answer the
    waiting approval without going through the approval state machine."""
    record = incident.to_record()
    record.pop("task_token", None)
    return record


def chain_verdict(entries: Sequence[AuditEntry]) -> ChainVerdict:
    """`verify_chain`, and an incident without a single entry is broken too (every incident's
    first step is audited)."""
    if not entries:
        return ChainVerdict(False, 0, 1, "no audit entries at all")
    return verify_chain(entries)


def verdict_record(verdict: ChainVerdict) -> dict[str, Any]:
    return {
        "ok": verdict.ok,
        "checked": verdict.checked,
        "broken_seq": verdict.broken_seq,
        "reason": verdict.reason,
    }


def describe(verdict: ChainVerdict) -> str:
    if verdict.ok:
        return f"{verdict.checked} entries"
    return f"at seq {verdict.broken_seq}: {verdict.reason} ({verdict.checked} entries before it verify)"


def render_incident(
    incident: Incident,
    where: Deployment,
    advice: Recommendation,
    entries: Sequence[AuditEntry],
    verdict: ChainVerdict,
) -> str:
    card = cards.approval_card(incident, where.settings(), advice)
    header = [
        f"Incident {incident.incident_id}",
        *_fields(
            ("state", incident.state.value),
            ("cluster", incident.cluster_name),
            ("instance", incident.instance_id),
            ("opened", _when(incident.created_at)),
            ("updated", _when(incident.updated_at)),
            ("closed", _when(incident.closed_at) if incident.closed_at else None),
            ("outcome", incident.outcome),
            ("reason", incident.reason),
            ("execution", incident.execution_arn),
        ),
    ]
    blocks = [
        "\n".join(header),
        *(p for p in card.text.split("\n\n") if p.startswith(CARD_SECTIONS)),
        "\n".join(["DECISION", *_decision_lines(incident)]),
        *(["\n".join(["REBOOT", *_reboot_lines(incident)])] if incident.reboot else []),
        "\n".join(["REPLACEMENT", *_replacement_lines(incident)]),
    ]
    if incident.error:
        blocks.append(f"ERROR\n  {json.dumps(incident.error, sort_keys=True)}")
    if incident.state is IncidentState.AWAITING_APPROVAL and not incident.decision:
        approve = json.dumps(cards.approval_input(incident.incident_id, Decision.APPROVE))
        blocks.append(
            "\n".join(
                [
                    "TO DECIDE",
                    *(
                        [f'  sdc reboot {incident.incident_id} -m "<why>"']
                        if reboots_done(incident) < MAX_REBOOTS
                        else []
                    ),
                    f'  sdc approve {incident.incident_id} -m "<why>"',
                    f'  sdc reject {incident.incident_id} -m "<why>"',
                    f"  or start an execution of {where.approval_state_machine_arn}",
                    f"  with the input {approve}",
                ]
            )
        )
    blocks.append(_audit_block(entries, verdict))
    return "\n\n".join(blocks)


def render_hold(hold: ClusterHold, entries: Sequence[AuditEntry], verdict: ChainVerdict) -> str:
    header = [
        f"Storm hold {hold.hold_id}",
        *_fields(
            ("state", "active" if hold.active else "reset"),
            ("cluster", hold.cluster_name),
            ("started", _when(hold.created_at)),
            ("reason", hold.reason),
            ("instances", ", ".join(hold.instances)),
            ("reset", _when(hold.lifted_at) if hold.lifted_at else None),
            ("reset by", hold.lifted_by),
            ("comment", hold.comment),
        ),
    ]
    blocks = ["\n".join(header)]
    if hold.active:
        blocks.append(
            "\n".join(
                [
                    "TO LIFT IT (once the job or recipe is fixed)",
                    f'  sdc reset {hold.hold_id} -m "<why>"',
                ]
            )
        )
    blocks.append(_audit_block(entries, verdict))
    return "\n\n".join(blocks)


def _audit_block(entries: Sequence[AuditEntry], verdict: ChainVerdict) -> str:
    return "\n".join(
        [
            f"AUDIT TRAIL ({len(entries)} entries)",
            *(f"  {e.seq:>3}  {_when(e.at)}  {e.action:<24} {e.actor}" for e in entries),
            "",
            f"CHAIN: {'verified' if verdict.ok else 'BROKEN'}, {describe(verdict)}",
        ]
    )


def _decision_lines(incident: Incident) -> list[str]:
    decision = incident.decision
    if not decision:
        return ["  none yet"]
    return [
        f"  {decision.get('decision')} at {_when(decision.get('at'))}",
        f"  by {decision.get('approval_execution_arn')}",
        f"  comment: {decision.get('comment') or '(none)'}",
    ]


def _reboot_lines(incident: Incident) -> list[str]:
    reboot = incident.reboot or {}
    decision = reboot.get("decision") or {}
    dry_run = " (dry run: nothing was rebooted)" if reboot.get("dry_run") else ""
    return [
        f"  status: {reboot.get('status')}{dry_run}, through {reboot.get('path')}",
        f"  decided by {decision.get('approval_execution_arn')} at {_when(decision.get('at'))}",
        f"  comment: {decision.get('comment') or '(none)'}",
        f"  node status: {reboot.get('node_status') or 'unknown'}",
    ]


def _replacement_lines(incident: Incident) -> list[str]:
    replacement = incident.replacement
    if not replacement:
        return ["  none"]
    dry_run = " (dry run: nothing was replaced)" if replacement.get("dry_run") else ""
    return [
        f"  status: {replacement.get('status')}{dry_run}",
        f"  new instance: {replacement.get('new_instance_id') or 'not yet known'}",
    ]


def render_decision(
    incident_id: str, decision: Decision, ended: ExecutionEnded, timeout: float
) -> str:
    if ended.status == "SUCCEEDED":
        after = {
            Decision.APPROVE: "the remediation replaces the node next",
            Decision.REBOOT: "the node is rebooted, health-checked again and released if that "
            "passes (if not, you are asked again)",
            Decision.REJECT: "the incident closes as rejected; nothing is replaced",
            Decision.RESET: "the storm hold is lifted; new alarms act again",
        }[decision]
        headline = f"{decision} accepted for {incident_id}: {after}"
    elif ended.status == "FAILED":
        headline = f"{decision} refused for {incident_id}: {ended.reason}"
    elif ended.status == "RUNNING":
        headline = f"the approval execution is still running after {timeout:g} s"
    else:
        headline = f"the approval execution ended {ended.status}: {ended.reason}"
    return "\n".join(
        [
            headline,
            *_fields(("approval execution", ended.arn), ("follow with", f"sdc show {incident_id}")),
        ]
    )


def execution_name(user: str, now: datetime | None = None) -> str:
    """`cli-<user>-<UTC time>-<random>`: who started the approval, readable in the execution
    list and in the audit entry's actor (CloudTrail has the IAM principal). At most 80
    characters of `[A-Za-z0-9_-]`, as Step Functions requires."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", user).strip("-")[:40] or "unknown"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"cli-{safe}-{stamp}-{secrets.token_hex(2)}"


def _caller() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        return "unknown"


def _fields(*pairs: tuple[str, Any]) -> list[str]:
    shown = [(name, value) for name, value in pairs if value not in (None, "")]
    width = max((len(name) for name, _ in shown), default=0)
    return [f"  {name:<{width}}  {value}" for name, value in shown]


def _when(value: Any) -> str:
    """An ISO timestamp as `YYYY-MM-DD HH:MM:SSZ` (UTC); anything else unchanged."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    rows = [headers, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


# -- errors -----------------------------------------------------------------------------------


def error_message(err: BaseException) -> str | None:
    """The one line to print for an error the user can act on; None for a bug (traceback)."""
    if isinstance(err, (CliError, DeploymentError)):
        return str(err)
    # The adapters raise domain errors `from` botocore's; the cause says what went wrong.
    root = err.__cause__ if isinstance(err, AwsError) and err.__cause__ else err
    if isinstance(root, (NoCredentialsError, PartialCredentialsError)):
        return NO_CREDENTIALS
    if isinstance(root, ProfileNotFound):
        return f"{root}: pass an existing --profile"
    if isinstance(root, NoRegionError):
        return "no AWS region: pass --region, set AWS_REGION, or give the profile one"
    code = err.code if isinstance(err, AwsError) else None
    if isinstance(root, ClientError):
        code = str(root.response.get("Error", {}).get("Code", ""))
    if code in REFUSED_CREDENTIALS:
        return f"AWS refused the credentials ({code}): {err}"
    if code in ACCESS_DENIED:
        return f"access denied ({err}); docs/operate.md lists the permissions the CLI needs"
    if isinstance(err, (SdcError, ClientError, BotoCoreError)):
        return " ".join(str(err).split())
    return None


# -- parsing ----------------------------------------------------------------------------------


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The deployment and connection options. Given to the main parser with their defaults and
    to every command with none, so they work before or after the command name."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("global options (before or after the command)")
    group.add_argument(
        "--region",
        default=default(os.environ.get("AWS_REGION")),
        help="AWS region (default: the profile's, AWS_REGION or AWS_DEFAULT_REGION)",
    )
    group.add_argument("--profile", default=default(None), help="AWS named profile")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=default(os.environ.get("SDC_ENDPOINT_URL")),
        help="send every AWS call here, e.g. a local moto server (default: $SDC_ENDPOINT_URL)",
    )
    group.add_argument(
        "--stack",
        metavar="NAME",
        default=default(os.environ.get("SDC_STACK") or DEFAULT_STACK),
        help="the deployed stack whose Outputs name the tables and the approval state machine "
        f"(default: $SDC_STACK or {DEFAULT_STACK})",
    )
    group.add_argument(
        "--outputs",
        metavar="FILE",
        default=default(os.environ.get("SDC_OUTPUTS")),
        help="read those Outputs from a JSON file instead of CloudFormation (output name -> "
        "value, or `cdk deploy --outputs-file`'s file; default: $SDC_OUTPUTS)",
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for machines")


def _comment(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the comment is the audit log's reason: give one")
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sdc",
        description="Operate the SDC remediation pipeline: list and inspect incidents, approve "
        "or reject them, verify the audit log, re-send spooled reports.",
        epilog="Exit status: 0 done; 1 what was checked or asked for did not happen (broken "
        "chain, refused decision, report still pending); 2 the command could not run (usage, "
        "credentials, stack, unknown incident). Reference: docs/operate.md.",
    )
    _global_options(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, suppress=True)
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, metavar="COMMAND"
    )

    status = commands.add_parser(
        "status",
        parents=[common],
        help="one screen: open incidents, approvals waiting, holds, pause, dry run, failures",
        description="The pipeline at a glance: open incidents by state, approvals waiting "
        "with their age, active storm holds and incidents held on arrival in the last 24 h, "
        "the pause switch and dry-run setting, the last failed incidents and the dead-letter "
        "queues' depth. Reads the incidents table (by_state index, and a Scan for the storm "
        "holds), the pause switch parameter and the two queues.",
    )
    _json_option(status)
    status.set_defaults(run=cmd_status)

    incidents = commands.add_parser(
        "incidents",
        parents=[common],
        help="list incidents (the open ones unless --all or --state)",
        description="List incidents, oldest first: id, state, cluster, instance, when opened, "
        "metrics. Open = opened, health_check, awaiting_approval or replacing.",
    )
    which = incidents.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="every incident, closed ones too")
    which.add_argument(
        "--state",
        choices=[s.value for s in IncidentState],
        metavar="STATE",
        help=f"only incidents in STATE: {', '.join(s.value for s in IncidentState)}",
    )
    _json_option(incidents)
    incidents.set_defaults(run=cmd_incidents)

    holds = commands.add_parser(
        "holds",
        parents=[common],
        help="list storm holds (the active ones unless --all)",
        description="List storm holds, oldest first: id, active or reset, cluster, when it "
        "started, how many instances it flagged, who reset it. Scans the incidents table "
        "(dynamodb:Scan). Lift one with `sdc reset HOLD -m COMMENT`.",
    )
    holds.add_argument("--all", action="store_true", help="reset holds too")
    _json_option(holds)
    holds.set_defaults(run=cmd_holds)

    show = commands.add_parser(
        "show",
        parents=[common],
        help="one incident: evidence, recommendation, decision, audit trail",
        description="One incident: its evidence, the deep health check, the recommendation, "
        "the decision, the replacement, the audit trail and whether its hash chain verifies.",
    )
    show.add_argument("incident", metavar="INCIDENT", help="incident id")
    _json_option(show)
    show.set_defaults(run=cmd_show)

    for decision, summary, subject in (
        ("approve", "approve replacing the incident's node", "INCIDENT"),
        ("reboot", "reboot the incident's node, then health-check it again", "INCIDENT"),
        ("reject", "reject: close the incident, replace nothing", "INCIDENT"),
        ("reset", "reset a storm hold: new alarms of its cluster act again", "HOLD"),
    ):
        command = commands.add_parser(
            decision,
            parents=[common],
            help=f"{summary} (starts the approval state machine)",
            description=f"{summary.capitalize()}. Starts an execution of the approval state "
            'machine with {"incident_id", "decision", "comment"}, exactly what the console\'s '
            '"Start execution" does, named cli-<user>-<time>-<random>, waits for it and prints '
            "whether the decision was accepted. Needs states:StartExecution and "
            "states:DescribeExecution on the approval state machine.",
        )
        command.add_argument(
            "incident",
            metavar=subject,
            help="incident id" if subject == "INCIDENT" else "storm hold id (hold-...)",
        )
        command.add_argument(
            "-m",
            "--comment",
            required=True,
            type=_comment,
            help="why: kept in the audit log with the decision",
        )
        command.add_argument(
            "--timeout",
            type=_seconds,
            default=DEFAULT_APPROVAL_TIMEOUT,
            metavar="SECONDS",
            help=f"how long to wait for the execution (default {DEFAULT_APPROVAL_TIMEOUT:g})",
        )
        _json_option(command)
        command.set_defaults(run=cmd_decide, decision=decision)

    audit = commands.add_parser(
        "audit", help="the audit log: audit verify", description="The audit log."
    )
    audit_commands = audit.add_subparsers(
        title="commands", dest="audit_command", required=True, metavar="COMMAND"
    )
    verify = audit_commands.add_parser(
        "verify",
        parents=[common],
        help="verify hash chains; exit 1 if any is broken",
        description="Walk each chain (seq 1, 2, ..., every prev_hash, every hash) and name the "
        "first broken link. --all scans the whole audit table (dynamodb:Scan), so it also "
        "checks the event#... and decision#... subjects of refused input.",
    )
    verify.add_argument("incidents", nargs="*", metavar="INCIDENT", help="incident ids")
    verify.add_argument("--all", action="store_true", help="every chain in the audit log")
    _json_option(verify)
    verify.set_defaults(run=cmd_audit_verify, usage_error=_verify_usage, parser=verify)

    replay = commands.add_parser(
        "replay-spool",
        parents=[common],
        help="re-send the reports a training rank spooled (trainer_emitter.spool)",
        description="Re-send the metrics and report events the emitter could not deliver and "
        "spooled. Delivered records leave the files, failed ones stay, unreadable lines move "
        "to <file>.rejected. Exit 1 unless everything arrived.",
    )
    replay.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="spool files or folders of *.jsonl (default: $SDC_SPOOL_DIR, else "
        f"{spool.default_spool_dir()})",
    )
    replay.add_argument(
        "--event-bus",
        metavar="NAME",
        default=os.environ.get("SDC_EVENT_BUS", "default"),
        help="EventBridge bus of the report events (default: $SDC_EVENT_BUS or default)",
    )
    _json_option(replay)
    replay.set_defaults(run=cmd_replay_spool)
    return parser


def _verify_usage(args: argparse.Namespace) -> str | None:
    if args.all and args.incidents:
        return "give incident ids or --all, not both"
    if not args.all and not args.incidents:
        return "give incident ids, or --all for every chain"
    return None


def _session(args: argparse.Namespace) -> boto3.session.Session:
    return boto3.session.Session(profile_name=args.profile, region_name=args.region)


def main(argv: Sequence[str] | None = None, *, session: boto3.session.Session | None = None) -> int:
    """The `sdc` console script. `session` replaces the one built from --profile and --region
    (tests, and the local run's in-process moto account)."""
    args = build_parser().parse_args(argv)
    usage_error = getattr(args, "usage_error", None)
    problem = usage_error(args) if usage_error else None
    if problem:
        args.parser.error(problem)  # exit 2 with the command's usage
    try:
        return int(args.run(Operator(args, session or _session(args)), args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        message = error_message(err)
        if message is None:
            raise
        print(f"sdc: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
