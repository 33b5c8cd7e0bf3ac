"""The incident record: one suspected node, from the first alarm to its closing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.errors import ErrorRecord
from sdc_remediation.lambdas.models.evidence import (
    KINDS,
    AlarmEvidence,
    Evidence,
    HardwareEvidence,
    ReportEvidence,
    SweepEvidence,
    evidence_of,
)
from sdc_remediation.lambdas.models.guard import HoldKind, HoldRecord, slot_names
from sdc_remediation.lambdas.models.health_check import HealthCheckRecord
from sdc_remediation.lambdas.models.hyperpod import HyperPodView, NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.isolation import IsolationRecord
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.recommendation import Recommendation
from sdc_remediation.lambdas.models.recovery import DecisionRecord, RebootRecord, ReplacementRecord
from sdc_remediation.lambdas.models.reporter_text import quoted
from sdc_remediation.lambdas.models.states import IncidentState, Scope
from sdc_remediation.lambdas.models.telemetry import TelemetryRecord


def task_token_digest(task_token: str) -> str:
    """The SHA-256 (hex) of a task token: what the incident record keeps of it."""
    return hashlib.sha256(task_token.encode()).hexdigest()


@dataclass
class Incident:
    """Plain JSON-able fields and small records, so the record round-trips through DynamoDB
    unchanged.

    `evidence` holds alarm and report summaries (see `sdc_remediation.lambdas.logic.evidence.summaries`); `health_check`,
    `decision`, `replacement`, `reboot`, `isolation`, `hold` and `error` are records written by
    the step that owns them. `version` is the optimistic lock: every save is conditional on it.

    A job-scope incident has no single instance: `instance_id` is empty and `instance_ids` names
    the involved instances whose open locks it holds.
    """

    incident_id: str
    cluster_name: str
    instance_id: str
    state: IncidentState
    created_at: str
    updated_at: str
    instance_group: str | None = None
    node_logical_id: str | None = None
    node_status: NodeStatus | None = None
    node_recovery: NodeRecovery | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_dropped: int = 0
    execution_arn: str | None = None
    health_check: HealthCheckRecord | None = None
    task_token_sha256: str | None = None
    """The digest of the task token the waiting approval answers (`task_token_digest`), never
    the token: the token is kept apart, where only the pipeline's functions read it
    (`IncidentStore.keep_task_token`), and `decide` answers only with a token of this digest."""
    approval_requested_at: str | None = None
    approval_deadline: ApprovalDeadline | None = None
    """When the last approval request expires, and the approvers' time zone (None: requested
    without a timeout known to the functions, or never)."""
    decision: DecisionRecord | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """Approvals recorded while fewer than the required number of distinct principals agreed
    (`sdc_remediation.lambdas.models.approvals.ApprovalRecord` as records); the decision takes them over. Each
    names its round: only those of the current `approval_round` count or show."""
    approval_round: int = 0
    """How many approval requests the incident has entered: 1 on the first card, 2 on the card
    that asks again after a failed reboot. An approval counts only in the round it was given in
    (given before a reboot, it was about another state of the node)."""
    replacement: ReplacementRecord | None = None
    reason: str | None = None
    error: ErrorRecord | None = None
    closed_at: str | None = None
    close_notified: bool = False
    scope: Scope = Scope.NODE
    instance_ids: list[str] = field(default_factory=list)
    job_name: str | None = None
    hold: HoldRecord | None = None
    """Why the incident is (or is being) held: paused, muted, storm or guard."""
    isolation: IsolationRecord | None = None
    """Whether the suspect node is cordoned and tainted while the incident is open, and what
    was changed on it (`sdc_remediation.lambdas.logic.isolation`)."""
    reboot: RebootRecord | None = None
    """The reboot an approver chose (`sdc_remediation.lambdas.logic.recovery`): its decision, the request and
    its answer, the node's status until it was Running again, and the path that acted."""
    telemetry: TelemetryRecord | None = None
    """What the GPU's hardware counters showed when the approval was requested
    (`sdc_remediation.lambdas.logic.evidence.telemetry`)."""
    hyperpod: HyperPodView | None = None
    """HyperPod's own events for the instance and the node's HyperPod labels when the approval
    was requested (`sdc_remediation.lambdas.logic.evidence.hyperpod_view`)."""
    recommendation: Recommendation | None = None
    """The advice judged from the evidence (`sdc_remediation.lambdas.logic.evidence.recommendation.judge`) when
    the approval was requested, and again when later evidence attached: every card, notice,
    event and command words this record, none judges again. None until the approval request."""
    unconfirmed: dict[str, str] = field(default_factory=dict)
    """Instances a report named that the checks did not confirm (HyperPod does not know them
    as nodes of the cluster, or Kubernetes names another node), each with why: never acted on,
    shown in their own section of the card."""
    card_undelivered: str | None = None
    """When the approval card last failed to go out (the notice was refused after its retries);
    None once it went out. Reconciliation sends it again (`sdc_remediation.lambdas.logic.closing`)."""
    recovery_unknown: str | None = None
    """When a failure close found a reboot or replacement that may still be running: the node
    keeps its isolation, lock and guard slot until reconciliation settles it from HyperPod's
    own state (`reconciled_at`)."""
    reconciled_at: str | None = None
    """When reconciliation settled what the incident had left (`recovery_unknown`)."""
    version: int = 0

    @property
    def items(self) -> list[Evidence]:
        """Its evidence, typed, in the order it was attached (`typed_records`)."""
        return [item for _, item in self.typed_records()]

    def typed_records(self) -> list[tuple[dict[str, Any], Evidence]]:
        """Each evidence record with its typed item, in the order attached. A record of a kind
        this release does not know (a newer release wrote it, then was rolled back) stays on
        the record and is left out here, as every reader left it out before evidence was
        typed. Each record is read once: a record is never changed once attached
        (`summaries.add_evidence` appends new ones and removes whole ones), so its typed item
        is kept beside it, by identity."""
        read: dict[int, tuple[dict[str, Any], Evidence]] = self.__dict__.setdefault("_read", {})
        found = []
        for record in self.evidence:
            if record.get("kind") not in KINDS:
                continue
            known = read.get(id(record))
            if known is None or known[0] is not record:
                known = read[id(record)] = (record, evidence_of(record))
            found.append(known)
        return found

    @property
    def metrics(self) -> list[str]:
        """The alarm metrics its evidence names, in the order they first arrived (an item
        dropped beyond `sdc_remediation.lambdas.logic.evidence.summaries.MAX_EVIDENCE` is not counted)."""
        seen: dict[str, None] = {}
        for item in self.items:
            if isinstance(item, AlarmEvidence):
                seen.setdefault(item.metric, None)
            elif isinstance(item, ReportEvidence):
                for metric in item.metrics:
                    seen.setdefault(metric, None)
        return [m for m in seen if m]

    @property
    def reports(self) -> list[ReportEvidence]:
        """Report evidence, in the order the pipeline received it (the reporter's `emitted_at`
        orders only reports received before receive times were kept)."""
        found = [e for e in self.items if isinstance(e, ReportEvidence)]
        return sorted(found, key=lambda e: e.order)

    @property
    def alarms(self) -> list[AlarmEvidence]:
        """Alarm evidence, in the order it was attached."""
        return [e for e in self.items if isinstance(e, AlarmEvidence)]

    @property
    def sweeps(self) -> list[SweepEvidence]:
        """Failed idle sweep checks, in the order they were attached."""
        return [e for e in self.items if isinstance(e, SweepEvidence)]

    @property
    def has_trusted_evidence(self) -> bool:
        """Some of its evidence came from a source no training pod can speak for
        (`TriggerSource.trusted`): that evidence alone asks for the node to be acted on. Never
        a job-level incident's: such evidence is about one node (joined through its lock),
        the job's other nodes are a report's word only."""
        if self.is_job:
            return False
        return any(e.trusted for e in self.items)

    @property
    def hardware(self) -> list[HardwareEvidence]:
        """Hardware alert evidence that fired (resolved ones are kept, and judged by nobody)."""
        return [e for e in self.alerts if e.firing]

    @property
    def alerts(self) -> list[HardwareEvidence]:
        """Hardware alert evidence, firing and resolved, in the order it was attached."""
        return [e for e in self.items if isinstance(e, HardwareEvidence)]

    @property
    def gpu_uuids(self) -> list[str]:
        """The GPU UUIDs its reports name for its instance (repeat-offender history)."""
        found = {s.gpu_uuid for r in self.reports for s in r.suspects if s.gpu_uuid}
        return sorted(found)

    @property
    def outcome(self) -> str | None:
        """The state it closed in; None while it is open."""
        return self.state.value if self.closed_at is not None else None

    @property
    def decided(self) -> Decision | None:
        """The approver's decision, if one is recorded."""
        return self.decision.decision if self.decision else None

    @property
    def reboots(self) -> int:
        """How many reboots this pipeline has started for it (at most `MAX_REBOOTS`)."""
        return (self.reboot.count or 0) if self.reboot else 0

    @property
    def reboot_done(self) -> bool:
        return self.reboot is not None and self.reboot.done

    @property
    def dry_run(self) -> bool:
        """Whether its replacement (or else its reboot) was only recorded, nothing called."""
        recovery = self.replacement or self.reboot
        return bool(recovery and recovery.dry_run)

    @property
    def hold_kind(self) -> HoldKind | None:
        """Why it is held, if held."""
        return self.hold.kind if self.hold else None

    @property
    def holds_lock(self) -> bool:
        """Whether creating it takes the (cluster, instance) lock: node-scope incidents that are
        not born closed (skipped, held). Job-scope incidents claim their instances' locks one by
        one after they are created."""
        return self.scope == Scope.NODE and self.state not in (
            IncidentState.SKIPPED,
            IncidentState.HELD,
        )

    @property
    def is_job(self) -> bool:
        return self.scope == Scope.JOB

    @property
    def guard_slots(self) -> tuple[str, ...]:
        """The blast-radius guard slots it takes: one per node it acts on."""
        return slot_names(self.incident_id, self.instance_ids if self.is_job else None)

    @property
    def locked_instances(self) -> list[str]:
        """The instances whose open lock this incident may hold."""
        return list(self.instance_ids) if self.is_job else [self.instance_id]

    @property
    def target(self) -> str:
        """What the incident is about, for people: `i-…`, or `job <name> (N instances)`."""
        if self.is_job:
            name = quoted(self.job_name, 60) if self.job_name else "unknown"
            return f"job {name} ({len(self.instance_ids)} instances)"
        return self.instance_id

    def to_record(self) -> dict[str, Any]:
        """The stored item: each part as its record writes it, and the derived `metrics` and
        `outcome` where the item has always had them, for whoever reads the table or the item
        `sdc show --json` prints (in this order)."""
        record: dict[str, Any] = {}
        for key, value in record_of(self).items():
            record[key] = value
            if key == "node_recovery":
                record["metrics"] = self.metrics
            elif key == "replacement":
                record["outcome"] = self.outcome
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Incident:
        """The incident a stored item describes; `metrics` and `outcome` are derived again."""
        return read_record(cls, record)
