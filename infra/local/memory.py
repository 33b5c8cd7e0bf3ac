"""In-memory implementations of the logic's ports (type-checked against them at the bottom): the
logic's tests and the fleet what-if run on them.

They copy on every read and write, like a real store would, and enforce the same conditions
(open lock, incident version, audit seq), so the logic cannot rely on shared objects.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.logic.ports import ExecutionRecord, ExecutionStarted
from sdc_remediation.lambdas.models.approvals import Principal, PrincipalSource
from sdc_remediation.lambdas.models.audit import AnchorRecord, AuditEntry
from sdc_remediation.lambdas.models.errors import (
    ConditionFailed,
    ExecutionNotFound,
    IdentityRefused,
    KubernetesNotFound,
    TaskNotWaiting,
)
from sdc_remediation.lambdas.models.guard import (
    PAST_INCIDENTS_LIMIT,
    ClusterHold,
    GuardState,
    PastIncident,
    check_slot_limit,
    check_slot_room,
    slots_of,
)
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.kubernetes import KubeNode, NodeChange, Taint
from sdc_remediation.lambdas.models.lifecycle_event import IncidentStateChange
from sdc_remediation.lambdas.models.notices import ChatNotification
from sdc_remediation.lambdas.models.report import SdcReport
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace
from sdc_remediation.lambdas.models.writes import (
    Claimed,
    ClaimHeldResult,
    ClaimLockResult,
    Created,
    CreateHeldResult,
    CreateHoldResult,
    CreateResult,
    GuardFull,
    HeldBy,
    HoldExists,
    IncidentExists,
    LockHeld,
)


class InMemoryIncidentStore:
    """IncidentStore, ReportStore, GuardStore and HistoryStore."""

    def __init__(self) -> None:
        self.incidents: dict[str, Incident] = {}
        self.locks: dict[tuple[str, str], str] = {}
        self.held: dict[tuple[str, str], tuple[str, int]] = {}
        self.reports: dict[tuple[str, str], dict[tuple[bool, str], SdcReport]] = {}
        """Per (cluster, instance), each report under (put as pointing at the instance, its
        order key)."""
        self.slots: dict[str, set[str]] = {}
        self.reset_at: dict[str, int] = {}
        self.flags: dict[str, dict[str, int]] = {}
        self.trusted_flags: dict[str, dict[str, int]] = {}
        self.holds: dict[str, ClusterHold] = {}
        self.active: dict[str, str] = {}
        self.past: dict[str, dict[str, PastIncident]] = {}
        self.proofs: dict[str, str] = {}
        self.tallies: dict[tuple[str, str], tuple[int, int]] = {}
        """(cluster, counter) → (value, expires_at)."""
        self._tally_lock = threading.Lock()
        self.tokens: dict[str, str] = {}
        """Task tokens by incident id: apart from the incidents, as the table keeps them."""
        self.fail_next_save: Exception | None = None

    def create(self, incident: Incident, *, slot_limit: int | None = None) -> CreateResult:
        check_slot_limit(slot_limit)
        key = (incident.cluster_name, incident.instance_id)
        if incident.incident_id in self.incidents:
            return IncidentExists(incident.incident_id)
        if incident.holds_lock and key in self.locks:
            return LockHeld(self.locks[key])
        taken = self.slots.setdefault(incident.cluster_name, set())
        wanted = incident.guard_slots
        check_slot_room(wanted, slot_limit)
        if slot_limit is not None and wanted[0] not in taken:
            if len(taken) + len(wanted) > slot_limit:
                return GuardFull(tuple(sorted(taken)), slot_limit)
            taken.update(wanted)
        if incident.holds_lock:
            self.locks[key] = incident.incident_id
        self.incidents[incident.incident_id] = copy.deepcopy(incident)
        return Created()

    def create_held(
        self, incident: Incident, *, until: int, now: int, replacing: str | None = None
    ) -> CreateHeldResult:
        if incident.incident_id in self.incidents:
            return IncidentExists(incident.incident_id)
        if not incident.is_job:
            key = (incident.cluster_name, incident.instance_id)
            holder = self.held_incident_id(*key, now)
            if holder and holder not in (incident.incident_id, replacing):
                return HeldBy(holder)
            self.held[key] = (incident.incident_id, until)
        self.incidents[incident.incident_id] = copy.deepcopy(incident)
        return Created()

    def claim_held(
        self, cluster_name: str, instance_id: str, incident_id: str, *, until: int, now: int
    ) -> ClaimHeldResult:
        holder = self.held_incident_id(cluster_name, instance_id, now)
        if holder and holder != incident_id:
            return HeldBy(holder)
        self.held[(cluster_name, instance_id)] = (incident_id, until)
        return Claimed()

    def held_incident_id(self, cluster_name: str, instance_id: str, now: int) -> str | None:
        holder, until = self.held.get((cluster_name, instance_id), ("", 0))
        return holder if holder and until >= now else None

    def claim_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> ClaimLockResult:
        holder = self.locks.setdefault((cluster_name, instance_id), incident_id)
        return Claimed() if holder == incident_id else LockHeld(holder)

    def redeem_proof(
        self, proof_id: str, approval_execution_arn: str, expires_at: int
    ) -> str | None:
        first = self.proofs.setdefault(proof_id, approval_execution_arn)
        return None if first == approval_execution_arn else first

    def get(self, incident_id: str) -> Incident | None:
        found = self.incidents.get(incident_id)
        return copy.deepcopy(found) if found else None

    def in_state(self, state: IncidentState) -> list[Incident]:
        found = [copy.deepcopy(i) for i in self.incidents.values() if i.state is state]
        return sorted(found, key=lambda i: (i.created_at, i.incident_id))

    def save(self, incident: Incident) -> None:
        if self.fail_next_save is not None:
            error, self.fail_next_save = self.fail_next_save, None
            raise error
        stored = self.incidents.get(incident.incident_id)
        if stored is None or stored.version != incident.version:
            raise ConditionFailed("stale incident")
        incident.version += 1
        self.incidents[incident.incident_id] = copy.deepcopy(incident)

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        return self.locks.get((cluster_name, instance_id))

    def release_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> None:
        if self.locks.get((cluster_name, instance_id)) == incident_id:
            del self.locks[(cluster_name, instance_id)]

    def keep_task_token(self, incident_id: str, task_token: str) -> None:
        self.tokens[incident_id] = task_token

    def task_token(self, incident_id: str) -> str | None:
        return self.tokens.get(incident_id)

    def forget_task_token(self, incident_id: str) -> None:
        self.tokens.pop(incident_id, None)

    def put_report(
        self, report: SdcReport, instance_id: str, expires_at: int, *, pointing: bool
    ) -> bool:
        stored = self.reports.setdefault((report.cluster_name, instance_id), {})
        if any(r.report_id == report.report_id for r in stored.values()):
            return False
        stored[(pointing, report.order_key)] = copy.deepcopy(report)
        return True

    def recent_reports(self, cluster_name: str, instance_id: str, limit: int) -> list[SdcReport]:
        stored = self.reports.get((cluster_name, instance_id), {})
        newest = sorted(stored, key=lambda k: k[1], reverse=True)
        pointing = [stored[k] for k in newest if k[0]][:limit]
        others = [stored[k] for k in newest if not k[0]][:limit]
        return copy.deepcopy([*pointing, *others])

    def stored_report(
        self, cluster_name: str, instance_id: str, received_at: str, report_id: str
    ) -> SdcReport | None:
        stored = self.reports.get((cluster_name, instance_id), {}).values()
        found = next((r for r in stored if r.report_id == report_id), None)
        return copy.deepcopy(found) if found else None

    # -- GuardStore ---------------------------------------------------------------------------

    def guard_state(self, cluster_name: str) -> GuardState:
        return GuardState(
            tuple(sorted(self.slots.get(cluster_name, set()))), self.reset_at.get(cluster_name)
        )

    def release_slot(self, cluster_name: str, incident_id: str) -> None:
        self.slots.get(cluster_name, set()).difference_update(
            slots_of(self.slots.get(cluster_name, set()), incident_id)
        )

    def flag_instance(
        self, cluster_name: str, instance_id: str, at: int, expires_at: int, *, trusted: bool
    ) -> None:
        self.flags.setdefault(cluster_name, {})[instance_id] = at
        if trusted:
            self.trusted_flags.setdefault(cluster_name, {})[instance_id] = at

    def flagged_instances(
        self, cluster_name: str, since: int, *, trusted_only: bool = False
    ) -> set[str]:
        flags = self.trusted_flags if trusted_only else self.flags
        return {i for i, at in flags.get(cluster_name, {}).items() if at >= since}

    def tally(self, cluster_name: str, counter: str, expires_at: int) -> int:
        with self._tally_lock:
            value = self.tallies.get((cluster_name, counter), (0, expires_at))[0] + 1
            self.tallies[(cluster_name, counter)] = (value, expires_at)
            return value

    def create_hold(self, hold: ClusterHold) -> CreateHoldResult:
        if hold.cluster_name in self.active:
            return HoldExists(self.active[hold.cluster_name])
        if hold.hold_id in self.holds:
            return HoldExists(hold.hold_id)
        self.holds[hold.hold_id] = copy.deepcopy(hold)
        self.active[hold.cluster_name] = hold.hold_id
        return Created()

    def active_hold(self, cluster_name: str) -> ClusterHold | None:
        hold_id = self.active.get(cluster_name)
        return self.get_hold(hold_id) if hold_id else None

    def get_hold(self, hold_id: str) -> ClusterHold | None:
        found = self.holds.get(hold_id)
        return copy.deepcopy(found) if found else None

    def save_hold(self, hold: ClusterHold) -> None:
        stored = self.holds.get(hold.hold_id)
        if stored is None or stored.version != hold.version:
            raise ConditionFailed("stale hold")
        hold.version += 1
        self.holds[hold.hold_id] = copy.deepcopy(hold)

    def lift_hold(self, hold: ClusterHold, reset_at: int) -> None:
        if self.active.get(hold.cluster_name) != hold.hold_id:
            raise ConditionFailed("not the active hold")
        self.save_hold(hold)
        del self.active[hold.cluster_name]
        self.reset_at[hold.cluster_name] = reset_at

    # -- HistoryStore -------------------------------------------------------------------------

    def record_past(self, past: PastIncident) -> None:
        keys = [f"instance:{past.instance_id}"] + [f"gpu:{g}" for g in past.gpu_uuids]
        for key in keys:  # one entry per sort key, as in the table: closed_at#incident_id
            self.past.setdefault(key, {})[f"{past.closed_at}#{past.incident_id}"] = past

    def past_for_instance(self, instance_id: str) -> list[PastIncident]:
        return self._newest(f"instance:{instance_id}")

    def past_for_gpu(self, gpu_uuid: str) -> list[PastIncident]:
        return self._newest(f"gpu:{gpu_uuid}")

    def _newest(self, key: str) -> list[PastIncident]:
        kept = self.past.get(key, {})
        return [kept[k] for k in sorted(kept, reverse=True)][:PAST_INCIDENTS_LIMIT]


class FakePauseSwitch:
    """The pause switch's value (None: no switch), or an error to raise on read."""

    def __init__(self, value: str | None = "false") -> None:
        self.value = value
        self.error: Exception | None = None

    def read(self) -> str | None:
        if self.error is not None:
            raise self.error
        return self.value


class InMemoryAuditLog:
    def __init__(self) -> None:
        self.items: dict[str, dict[int, AuditEntry]] = {}

    def last(self, incident_id: str) -> AuditEntry | None:
        entries = self.items.get(incident_id, {})
        return copy.deepcopy(entries[max(entries)]) if entries else None

    def append(self, entry: AuditEntry) -> None:
        entries = self.items.setdefault(entry.incident_id, {})
        if entry.seq in entries:
            raise ConditionFailed(f"seq {entry.seq} taken")
        entries[entry.seq] = copy.deepcopy(entry)

    def entries(self, incident_id: str) -> list[AuditEntry]:
        return [copy.deepcopy(e) for _, e in sorted(self.items.get(incident_id, {}).items())]

    def all_chains(self) -> dict[str, list[AuditEntry]]:
        return {
            subject: self.entries(subject) for subject in sorted(self.items) if self.items[subject]
        }

    def actions(self, incident_id: str) -> list[str]:
        return [e.action for e in self.entries(incident_id)]


@dataclass
class Published:
    subject: str
    message: str
    attributes: dict[str, str]
    chat: dict[str, Any] | None = None
    """What an `https` subscriber (a chat channel) gets: the custom notification."""


class RecordingNotifier:
    def __init__(self) -> None:
        self.published: list[Published] = []
        self.fail_next: Exception | None = None
        self.outage: Exception | None = None
        """Raised by every publish while set (the topic is down)."""
        self.attempts = 0

    def publish(
        self,
        subject: str,
        message: str,
        attributes: Mapping[str, str],
        chat: ChatNotification | None = None,
    ) -> str | None:
        self.attempts += 1
        if self.outage is not None:
            raise self.outage
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.published.append(
            Published(subject, message, dict(attributes), chat.to_json() if chat else None)
        )
        return f"sns-{len(self.published)}"


class RecordingLifecycleEvents:
    """The lifecycle events put, in order (`changes`); `fail_next` makes the next put raise."""

    def __init__(self) -> None:
        self.changes: list[IncidentStateChange] = []
        self.fail_next: Exception | None = None

    def publish(self, change: IncidentStateChange) -> str | None:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.changes.append(change)
        return f"event-{len(self.changes)}"

    def of(self, incident_id: str) -> list[IncidentStateChange]:
        return [c for c in self.changes if c.incident_id == incident_id]


class FakeWorkflow:
    """Executions by name (a name starts one execution, ever); tokens answered at most once;
    executions of other state machines (the approval's) added by `add_execution` and described
    as Step Functions would."""

    def __init__(self) -> None:
        self.executions: dict[str, dict[str, Any]] = {}
        self.described: dict[str, ExecutionRecord] = {}
        self.lose_next_answer: Exception | None = None
        """The next SendTaskSuccess lands, and then this error is raised (a lost answer)."""
        self.waiting_tokens: set[str] = set()
        self.answers: list[tuple[str, dict[str, Any]]] = []
        self.fail_next_start: Exception | None = None
        self.fail_next_send: Exception | None = None
        self.ended: dict[str, str] = {}
        """Execution name → how it ended (FAILED, ABORTED, ...); started ones run until then."""
        self._ids = itertools.count(1)

    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        if self.fail_next_start is not None:
            error, self.fail_next_start = self.fail_next_start, None
            raise error
        arn = f"arn:aws:states:us-west-2:111122223333:execution:remediation:{name}"
        if name in self.executions:
            return ExecutionStarted(arn, f"sfn-{next(self._ids)}", already_existed=True)
        self.executions[name] = dict(payload)
        return ExecutionStarted(arn, f"sfn-{next(self._ids)}")

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        if self.fail_next_send is not None:
            error, self.fail_next_send = self.fail_next_send, None
            raise error
        if task_token not in self.waiting_tokens:
            raise TaskNotWaiting("no task waits for this token", code="TaskDoesNotExist")
        self.waiting_tokens.discard(task_token)
        self.answers.append((task_token, dict(output)))
        if self.lose_next_answer is not None:
            error, self.lose_next_answer = self.lose_next_answer, None
            raise error
        return f"sfn-{next(self._ids)}"

    def add_execution(
        self, arn: str, state_machine_arn: str, payload: Any, status: str = "RUNNING"
    ) -> None:
        self.described[arn] = ExecutionRecord(arn, state_machine_arn, status, payload)

    def describe_execution(self, execution_arn: str) -> ExecutionRecord:
        found = self.described.get(execution_arn)
        name = execution_arn.rpartition(":")[2]
        if found is None and name in self.executions:  # a remediation this fake started
            status = self.ended.get(name, "RUNNING")
            return ExecutionRecord(execution_arn, "remediation", status, self.executions[name])
        if found is None:
            raise ExecutionNotFound(
                f"DescribeExecution failed: ExecutionDoesNotExist: {execution_arn}",
                code="ExecutionDoesNotExist",
            )
        return found


class FakeIdentityVerifier:
    """Identity proofs as opaque tokens: each names the principal that signed it and the
    binding it was signed for, as a redeemed presigned request would."""

    def __init__(self) -> None:
        self.proofs: dict[str, tuple[str, str]] = {}

    def sign(self, principal_arn: str, binding: str) -> str:
        proof = f"proof-{len(self.proofs) + 1}"
        self.proofs[proof] = (principal_arn, binding)
        return proof

    def redeem(self, proof: str, binding: str) -> Principal:
        signed = self.proofs.get(proof)
        if signed is None:
            raise IdentityRefused("STS did not accept the signature")
        if signed[1] != binding:
            raise IdentityRefused("the proof was signed for another decision")
        account = signed[0].split(":")[4]
        return Principal(
            PrincipalSource.IDENTITY_PROOF, signed[0], account, "AIDAFAKE", proof_id=proof
        )


class InMemoryAuditAnchor:
    """Append-only: records can be added, never changed or removed."""

    enabled = True

    def __init__(self) -> None:
        self._records: list[AnchorRecord] = []
        self.fail_next: Exception | None = None

    def anchor(self, entry: AuditEntry) -> None:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self._records.append(AnchorRecord.of(entry))

    def records(self, subject: str | None = None) -> list[AnchorRecord]:
        return [r for r in self._records if subject is None or r.subject == subject]


class FakeKubernetesNodes:
    """Nodes per EKS cluster, with the adapter's semantics: found by providerID, cordon keeps
    other taints, uncordon removes only the given taint. `fail_next(method, error)` makes the
    next call of `find_node`, `cordon` or `uncordon` raise; `calls` logs (method, cluster, node)."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, dict[str, Any]]] = {}
        self.pods: dict[str, list[tuple[str, dict[str, str]]]] = {}
        """Per EKS cluster: (node name, labels) of each pod."""
        self.calls: list[tuple[str, str, str]] = []
        self._failures: dict[str, list[Exception]] = {}
        self._versions = itertools.count(1)

    def add_node(
        self,
        eks_cluster: str,
        name: str,
        instance_id: str,
        *,
        unschedulable: bool = False,
        taints: list[dict[str, Any]] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.nodes.setdefault(eks_cluster, {})[name] = {
            "provider_id": f"aws:///usw2-az2/sagemaker/cluster/hyperpod-ab12cd34ef56-{instance_id}",
            "unschedulable": unschedulable,
            "taints": list(taints or []),
            "rv": str(next(self._versions)),
            **({"labels": dict(labels)} if labels else {}),
        }

    def node(self, eks_cluster: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.nodes[eks_cluster][name])

    def add_pod(self, eks_cluster: str, node_name: str, labels: dict[str, str]) -> None:
        self.pods.setdefault(eks_cluster, []).append((node_name, dict(labels)))

    def pod_nodes(self, eks_cluster: str, label_selector: str) -> set[str]:
        self._enter("pod_nodes", eks_cluster, label_selector)
        if "=" not in label_selector:  # `key`: the label exists, any value
            return {n for n, labels in self.pods.get(eks_cluster, []) if label_selector in labels}
        key, value = label_selector.split("=", 1)
        return {node for node, labels in self.pods.get(eks_cluster, []) if labels.get(key) == value}

    def workload_nodes(self, eks_cluster: str) -> set[str]:
        """The nodes of the pods `add_pod` added (a DaemonSet's pods are not a workload's)."""
        self._enter("workload_nodes", eks_cluster, "")
        return {n for n, _ in self.pods.get(eks_cluster, [])}

    def fail_next(self, method: str, error: Exception, *, times: int = 1) -> None:
        self._failures.setdefault(method, []).extend([error] * times)

    def count(self, method: str) -> int:
        return sum(1 for m, _, _ in self.calls if m == method)

    def _enter(self, method: str, eks_cluster: str, target: str) -> None:
        self.calls.append((method, eks_cluster, target))
        queued = self._failures.get(method)
        if queued:
            raise queued.pop(0)

    def _kube_node(self, name: str, raw: dict[str, Any]) -> KubeNode:
        return KubeNode(
            name,
            raw["provider_id"],
            raw["unschedulable"],
            tuple(raw["taints"]),
            raw["rv"],
            tuple((raw.get("labels") or {}).items()),
        )

    def _get(self, eks_cluster: str, name: str) -> dict[str, Any]:
        found = self.nodes.get(eks_cluster, {}).get(name)
        if found is None:
            raise KubernetesNotFound(f'nodes "{name}" not found', status=404)
        return found

    def find_node(self, eks_cluster: str, instance_id: str) -> KubeNode:
        self._enter("find_node", eks_cluster, instance_id)
        for name, raw in sorted(self.nodes.get(eks_cluster, {}).items()):
            node = self._kube_node(name, raw)
            if node.instance_id == instance_id:
                return node
        raise KubernetesNotFound(f"no node names {instance_id}", status=404)

    def list_nodes(self, eks_cluster: str) -> list[KubeNode]:
        self._enter("list_nodes", eks_cluster, "")
        return [
            self._kube_node(name, raw)
            for name, raw in sorted(self.nodes.get(eks_cluster, {}).items())
        ]

    def find_node_named(self, eks_cluster: str, name: str) -> KubeNode:
        self._enter("find_node_named", eks_cluster, name)
        raw = self.nodes.get(eks_cluster, {}).get(name)
        if raw is None:
            raise KubernetesNotFound(f"no node called {name}", status=404)
        return self._kube_node(name, raw)

    def cordon(self, eks_cluster: str, node_name: str, taint: Taint) -> NodeChange:
        self._enter("cordon", eks_cluster, node_name)
        raw = self._get(eks_cluster, node_name)
        occupant = next((t for t in raw["taints"] if taint.same_slot(t)), None)
        found = None if occupant is None or taint.matches(occupant) else occupant["value"]
        changed = not raw["unschedulable"]
        raw["unschedulable"] = True
        if occupant is None:
            raw["taints"].append(taint.to_json())
        if changed or occupant is None:
            raw["rv"] = str(next(self._versions))
        return NodeChange(node_name, raw["rv"], changed, occupant is None, found)

    def uncordon(
        self, eks_cluster: str, node_name: str, taint: Taint, *, clear_unschedulable: bool
    ) -> NodeChange:
        self._enter("uncordon", eks_cluster, node_name)
        raw = self._get(eks_cluster, node_name)
        kept = [t for t in raw["taints"] if not taint.matches(t)]
        removed = len(kept) != len(raw["taints"])
        cleared = clear_unschedulable and raw["unschedulable"]
        raw["taints"] = kept
        if cleared:
            raw["unschedulable"] = False
        if removed or cleared:
            raw["rv"] = str(next(self._versions))
        return NodeChange(node_name, raw["rv"], cleared, removed)

    def label(self, eks_cluster: str, node_name: str, key: str, value: str) -> str:
        self._enter("label", eks_cluster, node_name)
        raw = self._get(eks_cluster, node_name)
        raw.setdefault("labels", {})[key] = value
        raw["rv"] = str(next(self._versions))
        return str(raw["rv"])


@dataclass(frozen=True)
class PrometheusCall:
    workspace: TelemetryWorkspace
    query: str
    start: datetime
    end: datetime
    step_seconds: int


class FakePrometheus:
    """Canned answers of a workspace's `query_range`, in order: a `data` object (as Prometheus
    returns it) or an exception to raise; the last one repeats. `calls` keeps what was asked."""

    def __init__(self, *answers: Mapping[str, Any] | Exception) -> None:
        self.answers: list[Mapping[str, Any] | Exception] = list(answers)
        self.calls: list[PrometheusCall] = []

    def answer(self, *answers: Mapping[str, Any] | Exception) -> None:
        self.answers = list(answers)

    def query_range(
        self,
        workspace: TelemetryWorkspace,
        query: str,
        start: datetime,
        end: datetime,
        step_seconds: int,
    ) -> Mapping[str, Any]:
        self.calls.append(PrometheusCall(workspace, query, start, end, step_seconds))
        if not self.answers:
            return {"resultType": "matrix", "result": []}
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer)


@dataclass
class SteppingClock:
    """Each `now()` is one second after the previous one: entries get distinct, ordered times."""

    current: datetime = field(default_factory=lambda: datetime(2026, 11, 30, 8, 15, 5, tzinfo=UTC))

    def now(self) -> datetime:
        self.current += timedelta(seconds=1)
        return self.current


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import (
        AuditAnchor,
        AuditLog,
        Clock,
        GuardStore,
        HistoryStore,
        IdentityVerifier,
        IncidentStore,
        KubernetesNodes,
        LifecycleEvents,
        Notifier,
        PauseSwitch,
        PrometheusQueries,
        ReportStore,
        Workflow,
    )

    _incidents: IncidentStore = InMemoryIncidentStore()
    _guard: GuardStore = InMemoryIncidentStore()
    _history: HistoryStore = InMemoryIncidentStore()
    _switch: PauseSwitch = FakePauseSwitch()
    _reports: ReportStore = InMemoryIncidentStore()
    _audit: AuditLog = InMemoryAuditLog()
    _notifier: Notifier = RecordingNotifier()
    _workflow: Workflow = FakeWorkflow()
    _clock: Clock = SteppingClock()
    _kubernetes: KubernetesNodes = FakeKubernetesNodes()
    _prometheus: PrometheusQueries = FakePrometheus()
    _lifecycle: LifecycleEvents = RecordingLifecycleEvents()
    _identity: IdentityVerifier = FakeIdentityVerifier()
    _anchor: AuditAnchor = InMemoryAuditAnchor()
