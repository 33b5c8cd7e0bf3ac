"""Payloads between the state machines and the functions (docs/pipeline.md, "Functions").

Inputs are parsed into frozen dataclasses (`MalformedEvent` names the bad field); results are
TypedDicts so the returned JSON shapes are spelled out once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypedDict

from sdc_remediation.lambdas.models import _fields as f
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.states import IncidentState, Scope

INCIDENT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class Outcome(StrEnum):
    """How the remediation state machine ends an incident (`close_incident` input)."""

    REPLACED = "replaced"
    REJECTED = "rejected"
    EXPIRED = "expired"
    FAILED = "failed"
    HELD = "held"
    """Paused or storm-held before the step could act: nothing was done."""
    CHECKED = "checked"
    """A job-level incident's health checks ended (no replacement is ever proposed)."""
    REPLACED_BY_HYPERPOD = "replaced_by_hyperpod"
    """The node was gone after the health check: HyperPod's own recovery replaced it."""
    REBOOTED = "rebooted"
    """The approved reboot is done and the deep health check after it passed."""


class Decision(StrEnum):
    APPROVE = "approve"
    """Replace the node (a new instance; the old one's volumes are destroyed)."""
    REBOOT = "reboot"
    """Reboot the node (same instance and volumes), health-check it again, release it if it
    passes, else ask again: a reboot never becomes a replacement without a second decision."""
    REJECT = "reject"
    RESET = "reset"
    """Lifts a cluster's storm hold (its `incident_id` is the hold id); never reaches a waiting
    remediation."""
    PROCEED = "proceed"
    """Lets a job-level incident held by the blast-radius guard (more nodes than it allows)
    health-check its nodes anyway, as a new job-level incident (`sdc_remediation.lambdas.logic.opening.proceeding`);
    never reaches a waiting remediation."""


class RecoveryStatus(StrEnum):
    """`replace_node` and `reboot_node` result: what the state machine does next."""

    REQUESTED = "requested"
    IN_PROGRESS = "in_progress"
    GONE = "gone"
    RETRY = "retry"
    DRY_RUN = "dry_run"
    HELD = "held"
    DONE = "done"
    """Never a step's answer: the incident's recovery record says so once the node is back
    (a reboot) or replaced."""

    @classmethod
    def answers(cls) -> tuple[RecoveryStatus, ...]:
        """What `replace_node` and `reboot_node` may answer (each answer has its counter)."""
        return tuple(status for status in cls if status is not cls.DONE)


def incident_id_of(payload: Any) -> str:
    body = f.obj(payload, "payload")
    incident_id = f.text(body, "incident_id", "")
    if not INCIDENT_ID_RE.match(incident_id):
        raise MalformedEvent("incident_id", f"not an incident id: {incident_id!r}")
    return incident_id


@dataclass(frozen=True, slots=True)
class IncidentRef:
    """`{"incident_id"}`: start_health_check, check_health, replace_node, check_replacement,
    reboot_node, check_reboot."""

    incident_id: str


def parse_incident_ref(payload: Any) -> IncidentRef:
    return IncidentRef(incident_id_of(payload))


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """`{"incident_id", "task_token"}` from the `.waitForTaskToken` task."""

    incident_id: str
    task_token: str


def parse_approval_request(payload: Any) -> ApprovalRequest:
    body = f.obj(payload, "payload")
    return ApprovalRequest(incident_id_of(body), f.text(body, "task_token", ""))


@dataclass(frozen=True, slots=True)
class CloseRequest:
    """`{"incident_id", "outcome", "error"}`; `error` is the state machine's Catch output."""

    incident_id: str
    outcome: Outcome
    error: dict[str, Any] | None


def parse_close_request(payload: Any) -> CloseRequest:
    body = f.obj(payload, "payload")
    raw = f.get(body, "outcome", "")
    try:
        outcome = Outcome(raw)
    except ValueError as err:
        raise MalformedEvent("outcome", f"expected one of {[o.value for o in Outcome]}") from err
    error = body.get("error")
    if error is not None and not isinstance(error, dict):
        raise MalformedEvent("error", f"expected an object or null, got {type(error).__name__}")
    return CloseRequest(incident_id_of(body), outcome, error)


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """The approval state machine's input plus its own execution ARN.

    Everything but the structure is kept raw: the decision logic validates the values so that
    every refusal (unknown decision, wrong incident...) is audited before it is raised.
    """

    incident_id: Any
    decision: Any
    comment: Any
    approval_execution_arn: str
    identity_proof: Any = None
    """The approver's signed identity proof, read from the approval execution's own input
    (Step Functions' record), never from the invocation payload."""


def parse_decision_request(payload: Any) -> DecisionRequest:
    body = f.obj(payload, "payload")
    return DecisionRequest(
        incident_id=body.get("incident_id"),
        decision=body.get("decision"),
        comment=body.get("comment"),
        approval_execution_arn=f.text(body, "approval_execution_arn", ""),
    )


class OpenAction(StrEnum):
    """What an alarm or a report did for one incident (`OpenIncidentResult.action`)."""

    OPENED = "opened"
    ATTACHED = "attached"
    """Joined the open incident of its instance as more evidence."""
    SKIPPED = "skipped"
    """Not a node of the cluster: recorded as a skipped incident, nothing acts."""
    IGNORED = "ignored"
    """Nothing to do (an OK state, a duplicate of what is known): audited, no incident."""
    HELD = "held"
    """Recorded as (or joined) a held incident: nothing acts."""


class OpenIncidentResult(TypedDict):
    incident_id: str | None
    action: OpenAction


class StoreReportResult(TypedDict):
    report_id: str
    stored: bool
    incidents: list[OpenIncidentResult]
    """What the report did per incident: opened (it names a culprit or confirmed suspect, or is
    ambiguous: one job-level incident), attached to an open one, held or skipped."""


class HealthCheckStarted(TypedDict):
    status: str
    started: bool
    held: bool
    scope: Scope


class HealthStatus(TypedDict):
    status: str
    in_progress: bool
    scope: Scope
    held: bool
    """The health check is done but the cluster is storm-held or paused: no approval request."""
    passed_after_reboot: bool
    """The check after an approved reboot passed: the incident closes as rebooted."""


class ApprovalRequested(TypedDict):
    incident_id: str
    approval_input: dict[str, str]


class RecoveryResult(TypedDict):
    """`replace_node` and `reboot_node`: the `RecoveryStatus` the state machine branches on."""

    status: RecoveryStatus


class ReplacementStatus(TypedDict):
    done: bool
    new_instance_id: str | None


class RebootStatus(TypedDict):
    """`check_reboot`: done once the node is Running again; gone if it disappeared."""

    done: bool
    gone: bool
    status: str


class CloseResult(TypedDict):
    incident_id: str
    state: IncidentState


class BrokenChain(TypedDict):
    subject: str
    broken_seq: int | None
    reason: str | None


class AuditCheckResult(TypedDict):
    """`verify_audit`: how many chains were checked, whether against the anchor, the broken."""

    checked: int
    anchored: bool
    broken: list[BrokenChain]


class DecisionAccepted(TypedDict, total=False):
    incident_id: str
    decision: Decision
    accepted: bool
    approvals: str
    """"1 of 2": the approvals counted of those required (when more than one is)."""
    waiting: bool
    """True while more approvals are required: nothing was sent to the remediation yet."""
    principal: str
    """Who decided: the verified principal's ARN, or "unverified (console approval)"."""


class IsolationResult(TypedDict):
    """`isolate_node`: whether the incident's node is cordoned and tainted, and why not."""

    isolated: bool
    state: str
    reason: str | None
