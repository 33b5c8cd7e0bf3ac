"""The fleet what-if: a failure history replayed through the pipeline, on a virtual clock,
against a fake HyperPod cluster, with approvers and a training job modelled.

Each fault of the history strikes a node drawn at random (a node replaced earlier is struck as
its new instance) at a time drawn uniformly over the history's days. What signals it and after
what delay is the cause's (`sdc_remediation.infra.local.fleet.causes`). A hardware alert, an SDC
report or a training-watch alarm is delivered to the function a deployment delivers it to
(`store_report`, `open_incident`), in the event's own shape; from there the stack's own state
machine definitions (`sdc_remediation.infra.stack.definitions`, built from the same settings)
run on the virtual clock (`StateRun`), each task invoking the function's own handler in this
process. The approvers answer each card after their latency by starting the approval state
machine, as a person does. The functions run on the in-memory ports (`infra/local/memory.py`,
the ones the unit tests use) and write a real audit log.

The job: every interruption costs `lost = detection + restart + recomputation since the last
checkpoint + waiting for capacity` (no spare node free: until a node comes back); a faulty node
the pipeline isolated but did not remedy (rejected, expired, failed) goes back to the job and
costs one more restart and a person's triage. ETTR is `(wall time - lost) / wall time` (Meta's
definition, arXiv 2410.21680).

Three ways through the same history and draws (`Mode`): HyperPod's own automatic recovery
alone (what its agent sees it replaces; the rest a person finds after `manual_triage_seconds`),
this pipeline with the approvers modelled, and this pipeline approving at once.
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.infra.local.drill.scenarios import GPUS_PER_NODE, REPLAY_CULPRIT
from sdc_remediation.infra.local.fake_hyperpod import ActionTimes, FakeHyperPod
from sdc_remediation.infra.local.fleet.causes import Cause, Signal
from sdc_remediation.infra.local.lambda_context import LocalContext
from sdc_remediation.infra.local.memory import (
    FakeKubernetesNodes,
    InMemoryAuditLog,
    InMemoryIncidentStore,
    RecordingLifecycleEvents,
    RecordingNotifier,
)
from sdc_remediation.infra.local.metrics import flushed_to
from sdc_remediation.infra.local.state_run import (
    TIMED_OUT,
    Answered,
    AwaitToken,
    Ended,
    FunctionError,
    Sleep,
    StateRun,
    UnsupportedDefinition,
)
from sdc_remediation.infra.stack.definitions import (
    REMEDIATION_STEPS,
    approval_definition,
    remediation_definition,
)
from sdc_remediation.infra.stack.settings import DeploymentSettings as StackSettings
from sdc_remediation.infra.stack.settings import settings_env
from sdc_remediation.infra.stack.template import ACCOUNT, REGION
from sdc_remediation.lambdas import handlers
from sdc_remediation.lambdas.handlers._deps import override
from sdc_remediation.lambdas.logic.core.figures import Figure, Report, compute
from sdc_remediation.lambdas.logic.evidence.policy import DECISION_OF
from sdc_remediation.lambdas.logic.ports import Deps, ExecutionRecord, ExecutionStarted, Workflow
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.errors import ExecutionNotFound, SettingsError, TaskNotWaiting
from sdc_remediation.lambdas.models.events import CONTRIBUTOR_DETAIL_TYPE, CONTRIBUTOR_SOURCE
from sdc_remediation.lambdas.models.hardware_alert import (
    MESSAGE_VERSION,
    AlertSeverity,
    HardwareRule,
)
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import Decision, OpenAction
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.setting_declarations import MAX_APPROVAL_TIMEOUT_SECONDS, key_of
from sdc_remediation.lambdas.models.settings import Settings, list_env
from sdc_remediation.lambdas.models.states import IncidentState
from sdc_remediation.lambdas.observability import logger
from trainer_emitter.contract import NAMESPACE, REPORT_DETAIL_TYPE, REPORT_SOURCE, Metric
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

START: Final = datetime(2026, 1, 5, tzinfo=UTC)
"""The virtual clock's start: a Monday, midnight UTC."""
CRITICAL_RULES: Final = frozenset({HardwareRule.UNCORRECTABLE_ECC, HardwareRule.ROW_REMAP_FAILURE})


REMEDIED: Final = frozenset(
    {IncidentState.REPLACED, IncidentState.REPLACED_BY_HYPERPOD, IncidentState.REBOOTED}
)
"""The ends of an incident after which its node is no longer the bad one it was."""


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

    def __post_init__(self) -> None:
        if not 0 <= self.day_starts_hour <= self.day_ends_hour <= 24:
            raise ValueError("day_starts_hour, day_ends_hour: hours of one day, start <= end <= 24")

    def latency(self, at: datetime, draw: random.Random) -> float:
        """The draw, at most `LATEST_ANSWER_SECONDS`."""
        day = self.day_starts_hour <= at.hour < self.day_ends_hour
        median = self.day_median_seconds if day else self.night_median_seconds
        exponent = draw.gauss(0, self.spread)
        if median > 0 and exponent >= math.log(LATEST_ANSWER_SECONDS / median):
            return LATEST_ANSWER_SECONDS
        return median * math.exp(exponent)


LATEST_ANSWER_SECONDS: Final = MAX_APPROVAL_TIMEOUT_SECONDS + 1
"""An answer drawn later than the longest approval timeout a deployment may set comes after its
card expired whatever the deployment: it is given then (a wide spread draws latencies that no
calendar holds)."""


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
    executions: Counter[str] = field(default_factory=Counter)
    """How the remediation executions ended (SUCCEEDED, FAILED, RUNNING at the end)."""
    invocations: Counter[str] = field(default_factory=Counter)
    """Invocations per function."""

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


CLUSTER: Final = "fleet-cluster"
GROUP: Final = "gpu-workers"
EKS: Final = "fleet-eks"
REMEDIATION_ARN: Final = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:sdc-remediation"
APPROVAL_ARN: Final = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:sdc-approval"
FUNCTION_ARN: Final = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:sdc-"
"""A function's ARN is this and its handler module's name."""


def deployment(context: Mapping[str, Any] | None = None) -> StackSettings:
    """The deployment the what-if runs: the fleet's cluster, orchestrated by EKS with node
    isolation on, and a team's `sdc:*` context keys over it (SettingsError: keys the stack
    refuses, or that the what-if cannot honour)."""
    if key_of("clusters") in (context or {}):
        raise SettingsError(
            f"{key_of('clusters')}: the what-if runs its own cluster ({CLUSTER}, orchestrated by "
            f"EKS as {EKS}); with a deployment's clusters instead, its intake would refuse every "
            "signal of it; leave the keys that name a deployment's clusters out"
        )
    stack = StackSettings.from_context(
        {
            "sdc:clusters": {CLUSTER: "f1ee7c1u5ter"},
            "sdc:nodeIsolation": {CLUSTER: EKS},
            **(context or {}),
        }
    )
    unmodelled = {
        "approvals_required": stack.approvals_required > 1,
        "approvers": bool(stack.approvers),
        "require_identity_proof": stack.require_identity_proof,
        "dry_run": stack.dry_run,
    }
    for attr, set_ in unmodelled.items():
        if set_:
            raise SettingsError(
                f"{key_of(attr)}: the what-if cannot honour it (its modelled approver is one "
                "person deciding without an identity proof, and its pipeline acts on the nodes): "
                "every card would expire, or no node be replaced, under figures that read as if "
                "the pipeline had acted; leave it out here"
            )
    return stack


def function_settings(stack: StackSettings) -> Settings:
    """The functions' settings as they read them on Lambda: from the environment the stack gives
    them (`settings_env`, the node isolation variable), so a context key takes effect here
    exactly where it does in a deployment."""
    environment = {
        EnvVar.INCIDENTS_TABLE: "fleet-incidents",
        EnvVar.AUDIT_TABLE: "fleet-audit",
        EnvVar.TOPIC_ARN: f"arn:aws:sns:{REGION}:{ACCOUNT}:fleet",
        EnvVar.STATE_MACHINE_ARN: REMEDIATION_ARN,
        EnvVar.APPROVAL_STATE_MACHINE_ARN: APPROVAL_ARN,
        EnvVar.ALLOWED_CLUSTERS: list_env(stack.cluster_names),
        EnvVar.NODE_ISOLATION: stack.node_isolation_env(),
        **settings_env(stack),
    }
    return Settings.from_env({str(k): v for k, v in environment.items()})


class _Functions:
    """The pipeline's functions as Lambda runs them: each invocation runs the function's own
    handler in this process on the fleet's Deps; an exception comes back as the function error a
    task's Retry and Catch see."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.invocations: Counter[str] = Counter()

    @staticmethod
    def arn(module: str) -> str:
        return FUNCTION_ARN + module

    def invoke(self, arn: str, payload: Any) -> Any:
        module = arn.removeprefix(FUNCTION_ARN)
        handler = importlib.import_module(f"{handlers.__name__}.{module}").handler
        self.invocations[module] += 1
        with override(self.deps):
            try:
                # through JSON, as Lambda passes an event and returns an answer
                answer = handler(json.loads(json.dumps(payload)), LocalContext(f"sdc-{module}"))
            except Exception as exc:
                raise FunctionError.of_function(type(exc).__name__, str(exc)) from exc
        return json.loads(json.dumps(answer))


class _StepFunctions:
    """Step Functions for the what-if (the `Workflow` port): the stack's own remediation and
    approval definitions, each execution a `StateRun` on the virtual clock. An execution waits
    in the pipeline's queue of steps; a task token waits here until SendTaskSuccess answers it or
    its TimeoutSeconds pass."""

    def __init__(self, replay: _Pipeline, stack: StackSettings) -> None:
        functions = {module: _Functions.arn(module) for module in REMEDIATION_STEPS}
        self.remediation = remediation_definition(functions, stack, APPROVAL_ARN)
        self.approval = approval_definition(_Functions.arn("decide"))
        self.replay = replay
        self.runs: dict[str, StateRun] = {}
        """Execution ARN → its run (remediations and approvals)."""
        self.waiting: dict[str, StateRun] = {}
        """Task token → the run that waits for it."""
        self._ids = itertools.count(1)

    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        arn = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:sdc-remediation:{name}"
        if arn in self.runs:
            return ExecutionStarted(arn, f"fleet-{next(self._ids)}", already_existed=True)
        run = self._run(self.remediation, arn, payload)
        # it runs once the invocation that started it has returned, as on AWS
        self.replay.at(self.replay.now, lambda when: self.advance(run, when))
        return ExecutionStarted(arn, f"fleet-{next(self._ids)}")

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        run = self.waiting.pop(task_token, None)
        if run is None:
            raise TaskNotWaiting("no task waits for this token", code="TaskDoesNotExist")
        answer = Answered(json.loads(json.dumps(output)))
        self.replay.at(self.replay.now, lambda when: self.advance(run, when, answer))
        return f"fleet-{next(self._ids)}"

    def describe_execution(self, execution_arn: str) -> ExecutionRecord:
        run = self.runs.get(execution_arn)
        if run is None:
            raise ExecutionNotFound(
                f"DescribeExecution failed: ExecutionDoesNotExist: {execution_arn}",
                code="ExecutionDoesNotExist",
            )
        machine = APPROVAL_ARN if run.definition is self.approval else REMEDIATION_ARN
        status = run.ended.status if run.ended else "RUNNING"
        return ExecutionRecord(execution_arn, machine, status, run.input)

    def approve(self, payload: Mapping[str, Any]) -> Ended:
        """An approver starts an execution of the approval state machine (it runs at once)."""
        arn = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:sdc-approval:a{next(self._ids)}"
        pause = self._run(self.approval, arn, payload).step()
        if not isinstance(pause, Ended):
            raise UnsupportedDefinition("the approval state machine waits; it never should")
        return pause

    def advance(self, run: StateRun, when: float, received: Answered | str | None = None) -> None:
        """Run `run` from `when` until it waits again, and queue what ends the wait."""
        pause = run.step(received)
        if isinstance(pause, Sleep):
            self.replay.at(when + pause.seconds, lambda later: self.advance(run, later))
        elif isinstance(pause, AwaitToken):
            self.waiting[pause.token] = run
            if pause.timeout_seconds is not None:
                self.replay.at(
                    when + pause.timeout_seconds,
                    lambda later: self._time_out(pause.token, later),
                )
            self.replay.awaiting(run.input["incident_id"], when)
        else:
            self.replay.ended(run.input["incident_id"], when)

    def _time_out(self, token: str, when: float) -> None:
        run = self.waiting.pop(token, None)
        if run is not None:  # not answered in time
            self.advance(run, when, TIMED_OUT)

    def _run(self, definition: dict[str, Any], arn: str, payload: Mapping[str, Any]) -> StateRun:
        run = StateRun(
            definition,
            json.loads(json.dumps(payload)),
            execution_id=arn,
            invoke=self.replay.functions.invoke,
            new_token=self.replay.fleet.token,
        )
        self.runs[arn] = run
        return run


class _Fleet:
    """The fake cluster of `nodes` instances, orchestrated by EKS, and the logic's ports around
    it, in memory."""

    def __init__(self, nodes: int, settings: Settings, job: JobModel, clock: VirtualClock) -> None:
        self.hyperpod = FakeHyperPod(
            now=lambda: clock.current,
            takes=ActionTimes(
                health_check=job.health_check_seconds,
                replacement=job.replacement_seconds,
                reboot=job.reboot_seconds,
            ),
        )
        self.hyperpod.add_cluster(CLUSTER, instance_groups=[GROUP], eks_cluster=EKS)
        self.kube = FakeKubernetesNodes()
        self.store = InMemoryIncidentStore()
        self.audit = InMemoryAuditLog()
        self.settings = settings
        self.clock = clock
        self.slots = [f"i-{0x0F1EE7000000000 + n:017x}" for n in range(nodes)]
        for instance in self.slots:
            self.hyperpod.add_node(CLUSTER, GROUP, instance)
            self.kube.add_node(EKS, f"hyperpod-{instance}", instance)
        self._tokens = itertools.count(1)

    def deps(self, workflow: Workflow) -> Deps:
        return Deps(
            settings=self.settings,
            hyperpod=self.hyperpod,
            incidents=self.store,
            reports=self.store,
            audit=self.audit,
            notifier=RecordingNotifier(),
            workflow=workflow,
            guard=self.store,
            history=self.store,
            clock=self.clock,
            kubernetes=self.kube,
            lifecycle=RecordingLifecycleEvents(),
            sleep=lambda seconds: None,
        )

    def instance(self, slot: int) -> str:
        """The instance in `slot` now: a replaced one's replacement (HyperPod's `replaced_by`),
        which joins the EKS cluster as its node."""
        instance = self.slots[slot]
        while instance in self.hyperpod.replaced_by:
            instance = self.hyperpod.replaced_by[instance]
        if instance != self.slots[slot]:
            self.slots[slot] = instance
            self.kube.add_node(EKS, f"hyperpod-{instance}", instance)
        return instance

    def token(self) -> str:
        return f"AQCEAAAAKgAAAAMAAAAAAAAAAfleet-token-{next(self._tokens):06d}"


def _contributor_event(instance: str, metric: Metric, at: datetime, n: int) -> dict[str, Any]:
    """A CloudWatch Alarm Contributor State Change (the documented event's shape) for the
    training watch's alarm on `instance`."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    expression = (
        f'SELECT MAX({metric.value}) FROM SCHEMA("{NAMESPACE}", ClusterName, InstanceId) '
        "GROUP BY ClusterName, InstanceId"
    )
    return {
        "version": "0",
        "id": f"fleet-alarm-{n:06d}",
        "detail-type": CONTRIBUTOR_DETAIL_TYPE,
        "source": CONTRIBUTOR_SOURCE,
        "account": ACCOUNT,
        "time": stamp,
        "region": REGION,
        "resources": [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{metric.alarm_name}"],
        "detail": {
            "alarmName": metric.alarm_name,
            "alarmContributor": {
                "id": f"fleet{n:011d}",
                "attributes": {"ClusterName": CLUSTER, "InstanceId": instance},
            },
            "state": {
                "value": "ALARM",
                "reason": "Threshold Crossed: 1 datapoint was greater than the threshold (0.0).",
                "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
            },
            "configuration": {
                "metrics": [
                    {"id": "q1", "expression": expression, "returnData": True, "period": 60}
                ],
            },
        },
    }


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
                    "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:HardwareAlertTopic",
                    "Subject": "SDC hardware alert: firing (1)",
                    "Message": json.dumps(message),
                    "MessageAttributes": {"cluster": {"Type": "String", "Value": CLUSTER}},
                },
            }
        ]
    }


CULPRIT_ALARM: Final = {k: v for k, v in REPLAY_CULPRIT.items() if k != "checkpoints"}
"""The alarm a training loop's ring replay audit raises when rank 13 disagrees with both ring
neighbours (the drill's, without the checkpoints it vouches for)."""


JOB_NODES: Final = 4
"""The nodes of the job an SDC report's rank map describes (distinct instances: the cluster has
at least as many)."""


def _report_event(fleet: _Fleet, slot: int, at: datetime, n: int) -> dict[str, Any]:
    """The report the emitter builds for the replay audit's culprit (rank 13, the second node
    of four), the job's ranks laid over this slot and its neighbours."""
    nodes = [fleet.instance((slot + k - 1) % len(fleet.slots)) for k in range(JOB_NODES)]
    rank_map = [
        {
            "rank": rank,
            "node": f"hyperpod-{nodes[rank // GPUS_PER_NODE]}",
            "instance_id": nodes[rank // GPUS_PER_NODE],
            "gpu_uuid": _gpu_uuid(nodes[rank // GPUS_PER_NODE], rank % GPUS_PER_NODE),
        }
        for rank in range(JOB_NODES * GPUS_PER_NODE)
    ]
    report = build_report(
        CULPRIT_ALARM,
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
        "account": ACCOUNT,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [],
        "detail": report.detail,
    }


def modelled_decision(advice: Advice | None) -> Decision:
    """The modelled approver follows the recommendation: the decision that carries out its
    advice (the decision table's `DECISION_OF`), a rejection where it proposes nothing."""
    return DECISION_OF.get(advice, Decision.REJECT) if advice else Decision.REJECT


class _Pipeline:
    """One mode of the pipeline over the history: a queue of (virtual time, step). A fault's
    signal enters as on AWS (the intake function's handler); from there the stack's own state
    machines run it (`_StepFunctions`), and the approvers answer each card after their latency."""

    def __init__(
        self,
        mode: Mode,
        faults: Sequence[Fault],
        job: JobModel,
        approvers: Approvers,
        stack: StackSettings,
        nodes: int,
        seed: int,
    ) -> None:
        self.mode = mode
        self.faults = faults
        self.job = job
        self.approvers = approvers
        self.clock = VirtualClock()
        self.fleet = _Fleet(nodes, function_settings(stack), job, self.clock)
        self.workflow = _StepFunctions(self, stack)
        self.deps = self.fleet.deps(self.workflow)
        self.functions = _Functions(self.deps)
        self.draw = random.Random(seed + 1)
        self.queue: list[tuple[float, int, Callable[[float], None]]] = []
        self.order = itertools.count()
        self.now = 0.0
        """The virtual seconds of the step running."""
        self.returns: dict[str, float] = {}
        """Incident → when its node came back (its execution ended: replaced, rebooted,
        rejected, expired...)."""

    def at(self, when: float, step: Callable[[float], None]) -> None:
        heapq.heappush(self.queue, (when, next(self.order), step))

    def run(self, days: float) -> ModeResult:
        result = ModeResult(self.mode, days * 86_400)
        pending: list[tuple[Fault, str | None, float]] = []
        for n, fault in enumerate(self.faults):
            self.at(fault.at + fault.cause.delay_seconds, self._arrive(fault, n, pending))
        while self.queue:
            when, _, step = heapq.heappop(self.queue)
            self.now = when
            self.clock.move_to(START + timedelta(seconds=when))
            step(when)
        spares = _Spares(self.job.spare_nodes)
        for fault, incident_id, detected_at in sorted(pending, key=lambda p: p[0].at):
            cause = fault.cause
            held = self._held(incident_id)
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
                if cause.node_fault and not self._remedied(incident_id):
                    # rejected, expired or failed: the bad node goes back to the job, which
                    # fails on it again until a person's triage finds it
                    lost += self.job.restart_seconds + self.job.manual_triage_seconds
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
        result.incidents = list(self.fleet.store.incidents.values())
        result.chains = self.fleet.audit.all_chains()
        result.executions = Counter(
            run.ended.status if run.ended else "RUNNING"
            for arn, run in self.workflow.runs.items()
            if run.definition is self.workflow.remediation
        )
        result.invocations = Counter(self.functions.invocations)
        result.report = compute(
            result.chains,
            {i.incident_id: i for i in result.incidents},
            until=START + timedelta(days=days + 30),
        )
        return result

    def _remedied(self, incident_id: str | None) -> bool:
        """Whether the incident ended with its node replaced or rebooted and checked again."""
        found = self.deps.incidents.get(incident_id) if incident_id else None
        return found is not None and found.state in REMEDIED

    def _held(self, incident_id: str | None) -> str | None:
        """Why the incident ended held, if it did: at its intake (guard, rate, storm) or in the
        state machine (a storm hold or the pause switch before its card); either way its node
        is a person's to triage."""
        found = self.deps.incidents.get(incident_id) if incident_id else None
        if found is None or found.state is not IncidentState.HELD:
            return None
        return str(found.hold_kind) if found.hold_kind else OpenAction.HELD.value

    def _isolated(self, incident_id: str | None) -> bool:
        """Whether the job was kept off the node: the isolation step cordoned it (an incident
        whose course only checks or notifies leaves the node to the job)."""
        entries = self.deps.audit.entries(str(incident_id)) if incident_id else []
        return any(e.action == AuditAction.NODE_ISOLATED for e in entries)

    def _arrive(
        self, fault: Fault, n: int, pending: list[tuple[Fault, str | None, float]]
    ) -> Callable[[float], None]:
        def arrive(when: float) -> None:
            cause = fault.cause
            instance = self.fleet.instance(fault.slot)
            now = START + timedelta(seconds=when)
            results: list[Any] = []
            if cause.signal is Signal.HARDWARE_ALERT and cause.rule is not None:
                if cause.node_fault:
                    self.fleet.hyperpod.set_health_check_result(CLUSTER, instance, passes=False)
                alert = _alert_event(instance, cause.rule, now, n)
                results = self._intake("store_report", alert)
            elif cause.signal is Signal.SDC_CHECK:
                report = _report_event(self.fleet, fault.slot, now, n)
                results = list(self._intake("store_report", report)["incidents"])
            elif cause.signal in (Signal.HANG_WATCHDOG, Signal.STRAGGLER):
                metric = Metric.HANG if cause.signal is Signal.HANG_WATCHDOG else Metric.STRAGGLER
                results = [
                    self._intake("open_incident", _contributor_event(instance, metric, now, n))
                ]
            opened = next((r for r in results if r and r.get("incident_id")), None)
            incident_id = str(opened["incident_id"]) if opened else None
            pending.append((fault, incident_id, when))

        return arrive

    def _intake(self, module: str, event: dict[str, Any]) -> Any:
        """The event delivered to the intake function, as EventBridge or SNS delivers it."""
        return self.functions.invoke(_Functions.arn(module), event)

    def awaiting(self, incident_id: str, when: float) -> None:
        """A card asks for a decision: the approvers answer it after their latency (at once when
        approving automatically), following the recommendation."""
        latency = 0.0
        if self.mode is Mode.PIPELINE:
            latency = self.approvers.latency(START + timedelta(seconds=when), self.draw)
        self.at(when + latency, lambda later: self._decide(incident_id))

    def _decide(self, incident_id: str) -> None:
        incident = self.deps.incidents.get(incident_id)
        judged = incident.recommendation if incident else None
        decision = modelled_decision(judged.advice if judged else None)
        payload = {"incident_id": incident_id, "decision": decision, "comment": "fleet what-if"}
        self.workflow.approve(payload)  # too late (the card expired): refused, as on AWS

    def ended(self, incident_id: str, when: float) -> None:
        self.returns[incident_id] = when


def simulate(
    causes: Sequence[Cause],
    *,
    days: float,
    nodes: int,
    job: JobModel,
    approvers: Approvers,
    stack: StackSettings | None = None,
    seed: int = 7,
) -> dict[Mode, ModeResult]:
    """The history's faults, drawn once, through the three modes; `stack`: the deployment's
    settings (default: `deployment()`, every setting at its default)."""
    faults = draw_faults(causes, days, nodes, seed)
    results = {Mode.HYPERPOD_ONLY: hyperpod_only(faults, job, days)}
    level = logger.log_level
    logger.setLevel("ERROR")  # the steps' structured logs, thousands of them, say nothing here
    try:
        # nor do their metrics: there is no account to publish them to
        with flushed_to(lambda document: None):
            for mode in (Mode.PIPELINE, Mode.AUTO_APPROVE):
                replay = _Pipeline(mode, faults, job, approvers, stack or deployment(), nodes, seed)
                results[mode] = replay.run(days)
    finally:
        logger.setLevel(level)
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
