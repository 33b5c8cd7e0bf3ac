"""The fleet what-if: a failure history replayed through the pipeline's own logic, on a virtual
clock, against a fake HyperPod cluster, with approvers and a training job modelled.

Each fault of the history strikes a node drawn at random (a node replaced earlier is struck as
its new instance) at a time drawn uniformly over the history's days. What signals it and after
what delay is the cause's (`sdc_remediation.infra.local.fleet.causes`). A hardware alert, an SDC report or a
training-watch alarm enters the pipeline as on AWS: `intake.hardware_alerts`,
`intake.store_report` or `intake.open_incident`, and the incident then goes through the steps
the remediation state machine runs, each at its virtual time: `isolation.isolate_node`, the deep
health check (`health_check`), `approval.request_approval`, the approver's decision
(`approval.decide`) after the approvers' latency, the reboot or replacement (`recovery`) and
`closing.close_incident`. The logic runs on the in-memory stores the unit tests use (they
implement the same ports as the DynamoDB adapters) and writes a real audit log.

The job: every interruption costs `lost = detection + restart + recomputation since the last
checkpoint + waiting for capacity` (no spare node free: until a node comes back). ETTR is
`(wall time - lost) / wall time` (Meta's definition, arXiv 2410.21680).

Three ways through the same history and draws (`Mode`): HyperPod's own automatic recovery
alone (what its agent sees it replaces; the rest a person finds after `manual_triage_seconds`),
this pipeline with the approvers modelled, and this pipeline approving at once.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.fleet.causes import Cause, Signal
from sdc_remediation.lambdas.logic import (
    approval,
    closing,
    health_check,
    intake,
    isolation,
    recovery,
)
from sdc_remediation.lambdas.logic.core.figures import Figure, Report, compute
from sdc_remediation.lambdas.logic.evidence.policy import DECISION_OF
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.hardware_alert import (
    MESSAGE_VERSION,
    AlertSeverity,
    HardwareRule,
    parse_alert_notification,
)
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import (
    ApprovalRequest,
    CloseRequest,
    Decision,
    DecisionRequest,
    IncidentRef,
    OpenAction,
    Outcome,
)
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.observability import logger, metrics
from tests.conftest import load_fixture
from tests.unit.world import APPROVAL_ARN, CLUSTER, EKS, GROUP, World, settings
from trainer_emitter.contract import NAMESPACE, REPORT_DETAIL_TYPE, REPORT_SOURCE, Metric
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

START: Final = datetime(2026, 1, 5, tzinfo=UTC)
"""The virtual clock's start: a Monday, midnight UTC."""
GPUS_PER_NODE: Final = 8
CRITICAL_RULES: Final = frozenset({HardwareRule.UNCORRECTABLE_ECC, HardwareRule.ROW_REMAP_FAILURE})


class Mode(StrEnum):
    HYPERPOD_ONLY = "HyperPod recovery alone"
    PIPELINE = "pipeline, approvers modelled"
    AUTO_APPROVE = "pipeline, approving at once"


@dataclass(frozen=True, slots=True)
class JobModel:
    checkpoint_interval_seconds: float = 1800
    restart_seconds: float = 600
    """From the decision to restart to training again (scheduling, loading the checkpoint)."""
    spare_nodes: int = 16
    """Nodes kept free for the job to restart on while a bad one is out."""
    health_check_seconds: float = 1800
    """A deep health check (DCGM level 4 takes tens of minutes)."""
    reboot_seconds: float = 600
    replacement_seconds: float = 1800
    manual_triage_seconds: float = 4 * 3600
    """A fault nothing attributes to a node: a person finds it (the job restarting meanwhile)."""

    def __post_init__(self) -> None:
        if self.checkpoint_interval_seconds <= 0:
            raise ValueError("checkpoint_interval_seconds: a number above 0")


@dataclass(frozen=True, slots=True)
class Approvers:
    """Decision latency: log-normal around a median, slower at night (approvers' UTC hours)."""

    day_median_seconds: float = 900
    night_median_seconds: float = 3 * 3600
    spread: float = 0.8
    """The log-normal's sigma."""
    day_starts_hour: int = 8
    day_ends_hour: int = 20

    def latency(self, at: datetime, draw: random.Random) -> float:
        day = self.day_starts_hour <= at.hour < self.day_ends_hour
        median = self.day_median_seconds if day else self.night_median_seconds
        return median * math.exp(draw.gauss(0, self.spread))


@dataclass
class FaultOutcome:
    """One fault's fate in one mode."""

    cause: str
    at: float
    lost: float
    detected: bool
    incident_id: str | None = None
    held: str | None = None


@dataclass
class ModeResult:
    mode: Mode
    wall_seconds: float
    faults: list[FaultOutcome] = field(default_factory=list)
    report: Report | None = None
    chains: dict[str, list[AuditEntry]] = field(default_factory=dict)
    incidents: list[Incident] = field(default_factory=list)

    @property
    def lost_seconds(self) -> float:
        return sum(f.lost for f in self.faults)

    @property
    def ettr(self) -> float:
        return max(self.wall_seconds - self.lost_seconds, 0) / self.wall_seconds

    def coverage(self) -> dict[str, tuple[int, int]]:
        """Cause → (faults detected and attributed to a node, faults)."""
        found: dict[str, list[int]] = {}
        for f in self.faults:
            seen = found.setdefault(f.cause, [0, 0])
            seen[0] += int(f.detected)
            seen[1] += 1
        return {k: (v[0], v[1]) for k, v in found.items()}


@dataclass(frozen=True, slots=True)
class Fault:
    cause: Cause
    at: float
    """Seconds after START."""
    slot: int


def draw_faults(causes: Sequence[Cause], days: float, nodes: int, seed: int) -> list[Fault]:
    """Every fault of the history, at a uniform time over `days` and on a uniform node slot."""
    draw = random.Random(seed)
    faults = [
        Fault(cause, draw.uniform(0, days * 86_400), draw.randrange(nodes))
        for cause in causes
        for _ in range(cause.count)
    ]
    return sorted(faults, key=lambda f: f.at)


class _Spares:
    """The job's spare nodes: one is taken while a bad node is out, given back when it returns."""

    def __init__(self, count: int) -> None:
        self.back_at: list[float] = [0.0] * count

    def take(self, at: float, until: float) -> float:
        """Take the spare free soonest at `at`, out until `until`; the wait for it."""
        if not self.back_at:
            return until - at
        soonest = min(range(len(self.back_at)), key=lambda i: self.back_at[i])
        wait = max(self.back_at[soonest] - at, 0.0)
        self.back_at[soonest] = max(until, at + wait)
        return wait


def _recompute(at: float, job: JobModel) -> float:
    return at % job.checkpoint_interval_seconds


def hyperpod_only(faults: Sequence[Fault], job: JobModel, days: float) -> ModeResult:
    """HyperPod's automatic recovery alone: what its agent sees it replaces; a node fault it
    does not see costs a person's triage; the rest is a job restart."""
    result = ModeResult(Mode.HYPERPOD_ONLY, days * 86_400)
    spares = _Spares(job.spare_nodes)
    for fault in faults:
        cause = fault.cause
        base = job.restart_seconds + _recompute(fault.at, job)
        if cause.hyperpod_sees:
            detect = cause.delay_seconds
            wait = spares.take(fault.at + detect, fault.at + detect + job.replacement_seconds)
        elif cause.node_fault or cause.signal is Signal.SDC_CHECK:
            detect, wait = job.manual_triage_seconds, 0.0
        else:
            detect = cause.delay_seconds
            wait = 0.0
        result.faults.append(
            FaultOutcome(cause.name, fault.at, detect + base + wait, cause.hyperpod_sees)
        )
    return result


# -- the pipeline --------------------------------------------------------------------------------


@dataclass
class VirtualClock:
    """The what-if's clock: set to each step's virtual time, never backwards; each reading a
    millisecond after the one before, so that entries written in one step keep their order."""

    current: datetime = START

    def now(self) -> datetime:
        self.current += timedelta(milliseconds=1)
        return self.current

    def move_to(self, when: datetime) -> None:
        self.current = max(self.current, when)


class _Fleet:
    """The fake cluster of `nodes` instances and the logic's world around it."""

    def __init__(self, nodes: int, changes: dict[str, Any]) -> None:
        hyperpod = FakeHyperPod(health_check_polls=1, replacement_polls=1, reboot_polls=1)
        self.clock = VirtualClock()
        isolation = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
        self.world = World(
            hyperpod=hyperpod,
            settings=settings(**{"node_isolation": isolation, **changes}),
            clock=self.clock,  # type: ignore[arg-type]
            eks_cluster=EKS,
        )
        # the world's own node makes way for the fleet's
        hyperpod.clusters[CLUSTER].nodes.clear()
        self.world.kube.nodes[EKS].clear()
        self.slots = [f"i-{0x0F1EE7000000000 + n:017x}" for n in range(nodes)]
        for instance in self.slots:
            self._add(instance, new=True)
        self._tokens = itertools.count(1)

    def _add(self, instance: str, *, new: bool) -> None:
        """A node of the cluster, with its Kubernetes node (named as HyperPod names it)."""
        if new:
            self.world.hyperpod.add_node(CLUSTER, GROUP, instance)
        self.world.kube.add_node(EKS, f"hyperpod-{instance}", instance)

    @property
    def deps(self) -> Deps:
        return self.world.deps

    def instance(self, slot: int) -> str:
        return self.slots[slot]

    def replaced(self, old: str, new: str | None) -> None:
        """The slot of `old` holds its replacement `new` from now on."""
        if new and old in self.slots:
            self.slots[self.slots.index(old)] = new
            self._add(new, new=False)

    def token(self) -> str:
        return f"AQCEAAAAKgAAAAMAAAAAAAAAAfleet-token-{next(self._tokens):06d}"


def _contributor_event(instance: str, metric: Metric, at: datetime, n: int) -> dict[str, Any]:
    event = load_fixture("events", "contributor_alarm")
    event["id"] = f"fleet-alarm-{n:06d}"
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    detail = event["detail"]
    detail["alarmName"] = metric.alarm_name
    detail["alarmContributor"]["id"] = f"fleet{n:011d}"
    detail["alarmContributor"]["attributes"]["InstanceId"] = instance
    detail["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return event


def _gpu_uuid(instance: str, gpu: int) -> str:
    """The UUID of GPU `gpu` of `instance`: one device, one UUID (a replacement brings new
    ones)."""
    return f"GPU-{gpu:08x}-0000-4000-8000-{instance[-12:]}"


def _alert_event(instance: str, rule: HardwareRule, at: datetime, n: int) -> dict[str, Any]:
    severity = AlertSeverity.CRITICAL if rule in CRITICAL_RULES else AlertSeverity.WARNING
    alert = {
        "status": "firing",
        "labels": {
            "alertname": rule.value,
            "cluster": CLUSTER,
            "node": f"hyperpod-{instance}",
            "gpu": "3",
            "gpu_uuid": _gpu_uuid(instance, 3),
            "rule": rule.value,
            "severity": severity.value,
        },
        "annotations": {"summary": rule.value},
        "startsAt": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fingerprint": f"{n:016x}",
    }
    message = {"version": MESSAGE_VERSION, "status": "firing", "alerts": [alert]}
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "Sns": {
                    "MessageId": f"fleet-alert-{n:06d}",
                    "TopicArn": "arn:aws:sns:us-west-2:111122223333:HardwareAlertTopic",
                    "Subject": "SDC hardware alert: firing (1)",
                    "Message": json.dumps(message),
                    "MessageAttributes": {"cluster": {"Type": "String", "Value": CLUSTER}},
                },
            }
        ]
    }


def _report_event(fleet: _Fleet, slot: int, at: datetime, n: int) -> dict[str, Any]:
    """The report the emitter builds for the replay fixture's culprit (rank 13, the second node
    of four), the job's ranks laid over this slot and its neighbours."""
    nodes = [fleet.instance((slot + k - 1) % len(fleet.slots)) for k in range(4)]
    rank_map = [
        {
            "rank": rank,
            "node": f"hyperpod-{nodes[rank // GPUS_PER_NODE]}",
            "instance_id": nodes[rank // GPUS_PER_NODE],
            "gpu_uuid": _gpu_uuid(nodes[rank // GPUS_PER_NODE], rank % GPUS_PER_NODE),
        }
        for rank in range(4 * GPUS_PER_NODE)
    ]
    report = build_report(
        load_fixture("alarms", "replay_culprit"),
        RankMap(rank_map),
        cluster_name=CLUSTER,
        job_name="llama-pretrain",
        namespace=NAMESPACE,
        report_id=f"r-fleet-{n:010d}",
        now=at,
        reporting_rank=0,
    )
    return {
        "version": "0",
        "id": f"fleet-report-{n:06d}",
        "detail-type": REPORT_DETAIL_TYPE,
        "source": REPORT_SOURCE,
        "account": "111122223333",
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [],
        "detail": report.detail,
    }


def modelled_decision(advice: Advice | None) -> Decision:
    """The modelled approver follows the recommendation: the decision that carries out its
    advice (the decision table's `DECISION_OF`), a rejection where it proposes nothing."""
    return DECISION_OF.get(advice, Decision.REJECT) if advice else Decision.REJECT


class _Pipeline:
    """One mode of the pipeline over the history: a queue of (virtual time, step)."""

    def __init__(
        self,
        mode: Mode,
        faults: Sequence[Fault],
        job: JobModel,
        approvers: Approvers,
        changes: dict[str, Any],
        nodes: int,
        seed: int,
    ) -> None:
        self.mode = mode
        self.faults = faults
        self.job = job
        self.approvers = approvers
        self.fleet = _Fleet(nodes, changes)
        self.draw = random.Random(seed + 1)
        self.queue: list[tuple[float, int, Callable[[float], None]]] = []
        self.order = itertools.count()
        self.returns: dict[str, float] = {}
        """Incident → when its node came back (replaced, rebooted, released)."""

    @property
    def deps(self) -> Deps:
        return self.fleet.deps

    def at(self, when: float, step: Callable[[float], None]) -> None:
        heapq.heappush(self.queue, (when, next(self.order), step))

    def run(self, days: float) -> ModeResult:
        result = ModeResult(self.mode, days * 86_400)
        pending: list[tuple[Fault, str | None, str | None, float]] = []
        for n, fault in enumerate(self.faults):
            self.at(fault.at + fault.cause.delay_seconds, self._arrive(fault, n, pending))
        while self.queue:
            when, _, step = heapq.heappop(self.queue)
            self.fleet.clock.move_to(START + timedelta(seconds=when))
            step(when)
            metrics.clear_metrics()  # nothing flushes them here, as a handler would
        spares = _Spares(self.job.spare_nodes)
        for fault, incident_id, held, detected_at in sorted(pending, key=lambda p: p[0].at):
            cause = fault.cause
            base = self.job.restart_seconds + _recompute(fault.at, self.job)
            detected = incident_id is not None and held is None
            if cause.hyperpod_sees and cause.signal is Signal.HYPERPOD_AGENT:
                detect = cause.delay_seconds
                wait = spares.take(
                    fault.at + detect, fault.at + detect + self.job.replacement_seconds
                )
                lost = detect + base + wait
            elif detected and self._isolated(incident_id):
                back = self.returns.get(
                    str(incident_id), detected_at + self.job.replacement_seconds
                )
                wait = spares.take(detected_at, back)
                lost = (detected_at - fault.at) + base + wait
            elif cause.node_fault or cause.signal is Signal.SDC_CHECK:
                # held, or not isolated: the job restarts where it was, a person finds the node
                lost = self.job.manual_triage_seconds + base
            else:
                lost = cause.delay_seconds + base
            result.faults.append(
                FaultOutcome(
                    cause.name, fault.at, lost, detected or cause.hyperpod_sees, incident_id, held
                )
            )
        store = self.fleet.world.store
        result.incidents = list(store.incidents.values())
        result.chains = self.fleet.world.audit.all_chains()
        result.report = compute(
            result.chains,
            {i.incident_id: i for i in result.incidents},
            until=START + timedelta(days=days + 30),
        )
        return result

    def _isolated(self, incident_id: str | None) -> bool:
        """Whether the job was kept off the node: the isolation step cordoned it (an incident
        whose course only checks or notifies leaves the node to the job)."""
        entries = self.deps.audit.entries(str(incident_id)) if incident_id else []
        return any(e.action == AuditAction.NODE_ISOLATED for e in entries)

    # -- each fault's arrival, then the state machine's steps ---------------------------------

    def _arrive(
        self, fault: Fault, n: int, pending: list[tuple[Fault, str | None, str | None, float]]
    ) -> Callable[[float], None]:
        def arrive(when: float) -> None:
            cause = fault.cause
            instance = self.fleet.instance(fault.slot)
            now = START + timedelta(seconds=when)
            results: list[Any] = []
            if cause.signal is Signal.HARDWARE_ALERT and cause.rule is not None:
                if cause.node_fault:
                    self.fleet.world.hyperpod.set_health_check_result(
                        CLUSTER, instance, passes=False
                    )
                note = parse_alert_notification(_alert_event(instance, cause.rule, now, n))
                results = intake.hardware_alerts(note, self.deps)
            elif cause.signal is Signal.SDC_CHECK:
                report = parse_report_event(_report_event(self.fleet, fault.slot, now, n))
                results = list(intake.store_report(report, self.deps)["incidents"])
            elif cause.signal in (Signal.HANG_WATCHDOG, Signal.STRAGGLER):
                metric = Metric.HANG if cause.signal is Signal.HANG_WATCHDOG else Metric.STRAGGLER
                event = parse_contributor_event(_contributor_event(instance, metric, now, n))
                results = [intake.open_incident(event, self.deps)]
            opened = next((r for r in results if r and r.get("incident_id")), None)
            incident_id = str(opened["incident_id"]) if opened else None
            held = None
            if incident_id and opened and opened["action"] == OpenAction.HELD:
                found = self.deps.incidents.get(incident_id)
                held = str(found.hold_kind) if found and found.hold_kind else OpenAction.HELD.value
            elif incident_id and opened and opened["action"] == OpenAction.OPENED:
                self.at(when, self._isolate(incident_id))
            pending.append((fault, incident_id, held, when))

        return arrive

    def _isolate(self, incident_id: str) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            isolation.isolate_node(ref, self.deps)
            health_check.start_health_check(ref, self.deps)
            self.at(when + self.job.health_check_seconds, self._checked(incident_id, False))

        return step

    def _checked(self, incident_id: str, after_reboot: bool) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            self.fleet.world.hyperpod.advance()
            status = health_check.check_health(ref, self.deps)
            if status["in_progress"]:
                self.at(
                    when + self.job.health_check_seconds / 4,
                    self._checked(incident_id, after_reboot),
                )
                return
            if status["held"]:
                self._close(incident_id, Outcome.HELD)
                return
            if after_reboot and status["passed_after_reboot"]:
                self.returns[incident_id] = when
                self._close(incident_id, Outcome.REBOOTED)
                return
            incident = self.deps.incidents.get(incident_id)
            if incident is not None and incident.is_job:
                self._close(incident_id, Outcome.CHECKED)
                return
            token = self.fleet.token()
            self.fleet.world.workflow.waiting_tokens.add(token)
            approval.request_approval(ApprovalRequest(incident_id, token), self.deps)
            latency = 0.0
            if self.mode is Mode.PIPELINE:
                latency = self.approvers.latency(START + timedelta(seconds=when), self.draw)
            self.at(when + latency, self._decide(incident_id))

        return step

    def _decide(self, incident_id: str) -> Callable[[float], None]:
        def step(when: float) -> None:
            incident = self.deps.incidents.get(incident_id)
            judged = incident.recommendation if incident else None
            decision = modelled_decision(judged.advice if judged else None)
            execution = f"arn:aws:states:us-west-2:111122223333:execution:sdc-approval:{incident_id}-{when:.0f}"
            payload = {"incident_id": incident_id, "decision": decision, "comment": "fleet what-if"}
            self.fleet.world.workflow.add_execution(execution, APPROVAL_ARN, payload)
            approval.decide(
                DecisionRequest(incident_id, decision, "fleet what-if", execution), self.deps
            )
            if decision is Decision.APPROVE:
                self.at(when, self._replace(incident_id))
            elif decision is Decision.REBOOT:
                self.at(when, self._reboot(incident_id))
            else:
                self.returns[incident_id] = when
                self._close(incident_id, Outcome.REJECTED)

        return step

    def _replace(self, incident_id: str) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            recovery.replace_node(ref, self.deps)
            self.at(when + self.job.replacement_seconds, self._replaced(incident_id))

        return step

    def _replaced(self, incident_id: str) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            self.fleet.world.hyperpod.advance()
            status = recovery.check_replacement(ref, self.deps)
            if not status["done"]:
                self.at(when + self.job.replacement_seconds / 4, self._replaced(incident_id))
                return
            incident = self.deps.incidents.get(incident_id)
            if incident is not None:
                self.fleet.replaced(incident.instance_id, status["new_instance_id"])
            self.returns[incident_id] = when
            self._close(incident_id, Outcome.REPLACED)

        return step

    def _reboot(self, incident_id: str) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            recovery.reboot_node(ref, self.deps)
            self.at(when + self.job.reboot_seconds, self._rebooted(incident_id))

        return step

    def _rebooted(self, incident_id: str) -> Callable[[float], None]:
        ref = IncidentRef(incident_id)

        def step(when: float) -> None:
            self.fleet.world.hyperpod.advance()
            status = recovery.check_reboot(ref, self.deps)
            if not (status["done"] or status["gone"]):
                self.at(when + self.job.reboot_seconds / 4, self._rebooted(incident_id))
                return
            health_check.start_health_check(ref, self.deps)
            self.at(when + self.job.health_check_seconds, self._checked(incident_id, True))

        return step

    def _close(self, incident_id: str, outcome: Outcome) -> None:
        closing.close_incident(CloseRequest(incident_id, outcome, None), self.deps)


def simulate(
    causes: Sequence[Cause],
    *,
    days: float,
    nodes: int,
    job: JobModel,
    approvers: Approvers,
    changes: dict[str, Any] | None = None,
    seed: int = 7,
) -> dict[Mode, ModeResult]:
    """The history's faults, drawn once, through the three modes."""
    faults = draw_faults(causes, days, nodes, seed)
    results = {Mode.HYPERPOD_ONLY: hyperpod_only(faults, job, days)}
    level = logger.log_level
    logger.setLevel("ERROR")  # the steps' structured logs, thousands of them, say nothing here
    try:
        for mode in (Mode.PIPELINE, Mode.AUTO_APPROVE):
            replay = _Pipeline(mode, faults, job, approvers, dict(changes or {}), nodes, seed)
            results[mode] = replay.run(days)
    finally:
        logger.setLevel(level)
        metrics.clear_metrics()
    return results


def nodes_replaced(result: ModeResult) -> int:
    if result.report is None:
        return 0
    return int(result.report.values[Figure.OUTCOMES].get("replaced", 0))


def human_decisions(result: ModeResult) -> int:
    if result.report is None or result.mode is not Mode.PIPELINE:
        return 0
    return sum(result.report.values[Figure.APPROVALS_PER_WEEK].values())


def held_genuine(result: ModeResult) -> Counter[str]:
    """Holds of incidents opened for a real fault (every fault of the history is real)."""
    return Counter(f.held for f in result.faults if f.held)
