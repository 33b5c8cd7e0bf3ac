"""The drill's scenarios: the job and its cluster (4 nodes of 8 GPUs), the alarms a training
rank raises, and for each scenario what the drill's approver does and what must come of it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.local.slurm import DRILL_CONTROLLER
from sdc_remediation.lambdas.models.audit import AuditAction

CLUSTER = "ml-cluster-1"
NODES = ("i-0aa00000000000001", "i-0bb00000000000002", "i-0cc00000000000003", "i-0dd00000000000004")
GPUS_PER_NODE = 8

RANK_MAP = [
    {
        "rank": rank,
        "node": f"hyperpod-{NODES[rank // GPUS_PER_NODE]}",
        "instance_id": NODES[rank // GPUS_PER_NODE],
        "gpu_uuid": f"GPU-{rank:08x}-5a1e-4c1d-9e7b-{rank * 7919:012x}",
    }
    for rank in range(len(NODES) * GPUS_PER_NODE)
]
"""The job: 4 nodes of 8 GPUs, rank r on node r // 8 (as the rank map all-gathered at start)."""

REPLAY_CULPRIT = {
    "step": 30,
    "check": "compute",
    "nonfinite": [],
    "mismatched_pairs": [[13, 5], [21, 13]],
    "culprits": [13],
    "verdicts": [],
    "suspect_window": [21, 30],
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
    "checkpoints": [
        {
            "step": s,
            "last_audit_pass": s,
            "last_weight_check_pass": s,
            "location": f"s3://ckpt/step-{s}",
        }
        for s in (10, 20)
    ],
}
NONFINITE_TRANSIENT = {
    "step": 25,
    "check": "compute",
    "nonfinite": [13],
    "mismatched_pairs": [[13, 5]],
    "culprits": [],
    "verdicts": [{"pair": [13, 5], "third": 21, "suspect": 13, "kind": "transient"}],
    "suspect_window": [21, 25],
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
    "checkpoints": REPLAY_CULPRIT["checkpoints"],
}
WEIGHTS_NO_MAJORITY = {
    "step": 40,
    "check": "weights",
    "suspects": None,
    "suspect_window": [31, 40],
    "last_audit_pass": 30,
    "last_weight_check_pass": 30,
    "checkpoints": [
        {
            "step": s,
            "last_audit_pass": s,
            "last_weight_check_pass": s,
            "location": f"s3://ckpt/step-{s}",
        }
        for s in (20, 30)
    ],
}
STORM = {
    "step": 30,
    "check": "compute",
    "nonfinite": [],
    "mismatched_pairs": [[5, 13], [13, 21], [21, 29], [29, 5]],
    "culprits": [5, 13, 21, 29],
    "verdicts": [],
    "suspect_window": [21, 30],
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
}
"""Every replay pair mismatches: a culprit on each of the four nodes, which is a recipe or
software problem (a storm), not four broken GPUs at once."""
WEIGHTS_SUSPECT = {
    "step": 35,
    "check": "weights",
    "suspects": [0],
    "suspect_window": [31, 35],
    "last_audit_pass": 30,
    "last_weight_check_pass": 30,
    "checkpoints": WEIGHTS_NO_MAJORITY["checkpoints"],
}


WORKSPACE_ID = "ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"
DASHBOARD = "https://g-1a2b3c4d5e.grafana-workspace.us-west-2.amazonaws.com/d/gpu-health"
TELEMETRY_CONTEXT = {
    "sdc:telemetry": {CLUSTER: {"workspace": WORKSPACE_ID, "dashboard": DASHBOARD}}
}
"""The cluster's Amazon Managed Service for Prometheus workspace, played by a local Prometheus."""
ROOM_FOR_A_JOB = {
    "sdc:guardMaxOpenNodes": 4,
    "sdc:guardMaxOpenPercent": 100,
    "sdc:stormThreshold": 8,
}
"""A guard and storm rule with room for a job-level incident over the job's four nodes: every
node a job-level incident health-checks counts against both."""
SLURM_CONTEXT = {
    "sdc:nodeIsolation": {},
    "sdc:slurmControllers": {CLUSTER: DRILL_CONTROLLER},
}
"""A cluster orchestrated by Slurm: its suspect node is drained on its controller (a real
slurmctld here, reached through the local Run Command stand-in), no EKS cluster."""
XID = 79
JOB_LABEL = "training.kubeflow.org/job-name"
"""The label of the sweep scenarios' job pods (any workload pod keeps its node busy)."""
BUSY_NODES = NODES[2:]
"""The sweep scenarios' job runs on these two nodes; the other six of the cluster are idle."""
SWEEP_FAILS = NODES[0]
"""The idle node that fails InstanceConnectivity in the sweep scenarios."""
SWEEP_CONTEXT: dict[str, Any] = {
    "sdc:idleSweep": {
        "clusters": [CLUSTER],
        "batchSize": 3,
        "maxSharePercent": 50,
        "minIdleNodes": 2,
        "checks": ["InstanceConnectivity"],
    },
    "sdc:guardMaxOpenNodes": 4,
    "sdc:guardMaxOpenPercent": 50,
}
"""Eight nodes, six idle: a run checks three (the batch, and half the idle ones), leaves two
free (the floor); the guard has room for four nodes."""
DECOY_XIDS = {"other GPU of the suspect node": 31, "a GPU of another node": 48}


def tiny_ddp_job() -> Any:
    """A real 4-rank DDP job on CPU, one rank per node of the cluster, with a fault on one rank:
    its checks' alarm and rank map replace the scenario's hand-written ones."""
    from sdc_remediation.infra.local.ddp_job import run_job  # torch only in the job's processes

    return run_job(NODES)


NOTHING_ACTS = (
    AuditAction.EXECUTION_STARTED,
    AuditAction.NODE_ISOLATED,
    AuditAction.HEALTH_CHECK_STARTED,
    AuditAction.APPROVAL_REQUESTED,
)
"""What a notice never does: no execution, no cordon, no health check, no approval card."""
HANG_RANK = 2
"""The rank the `hang-one-rank` job stops before an all-reduce (one rank per node)."""
HANG_SPAN = (1, 3)
"""The ranks, on two nodes, the `hang-ambiguous` job stops."""
STRAGGLER_RANK = 1


def hang_one_rank_job() -> Any:
    """A real 4-rank DDP job (gloo, CPU) with the training watch: one rank stops; the
    watchdog's alarm and the rank map replace the scenario's."""
    from sdc_remediation.infra.local.watch_job import (
        run_watch_job,
    )  # torch only in the job's processes

    return run_watch_job(NODES, stall=(HANG_RANK,))


def hang_fsdp_job() -> Any:
    """The same with FSDP2 (`fully_shard`): the others wait in its asynchronous gathers."""
    from sdc_remediation.infra.local.watch_job import JobKind, run_watch_job

    return run_watch_job(NODES, kind=JobKind.FSDP, stall=(HANG_RANK,))


def hang_two_groups_job() -> Any:
    """DDP and a second process group for the loss: the stopped rank lags in both."""
    from sdc_remediation.infra.local.watch_job import JobKind, run_watch_job

    return run_watch_job(NODES, kind=JobKind.TWO_GROUPS, stall=(HANG_RANK,))


def hang_ambiguous_job() -> Any:
    from sdc_remediation.infra.local.watch_job import run_watch_job

    return run_watch_job(NODES, stall=HANG_SPAN)


def straggler_job() -> Any:
    from sdc_remediation.infra.local.watch_job import run_watch_job

    return run_watch_job(NODES, steps=15, straggler=STRAGGLER_RANK, straggler_seconds=0.05)


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    alarm: dict[str, Any]
    decision: str | None
    """What the drill's approver does: "approve", "reboot", "reject", or None (never answers)."""
    expect: str
    """The final state every incident must reach."""
    context: dict[str, Any] = field(default_factory=dict)
    deliveries: int = 1
    """How often each contributor event is delivered (EventBridge is at-least-once)."""
    replaced: bool = False
    """Whether BatchReplaceClusterNodes must have been called (and only then)."""
    rebooted: bool = False
    """Whether BatchRebootClusterNodes must have been called (and only then)."""
    recommends: str | None = None
    """The recommendation the approval card must make (its RECOMMENDATION line), if checked."""
    approval: bool = True
    """Whether the incident asks for a decision (a health-check-only incident does not)."""
    node_recovery: str = "None"
    """The fake cluster's NodeRecovery setting."""
    health_check_fails: bool = False
    """Whether the suspect node fails its deep health check."""
    incidents: int = 1
    """How many incidents the scenario must end with."""
    storm: bool = False
    """Whether a storm hold must start (one notice) and the drill's approver resets it."""
    job: Callable[[], Any] | None = None
    """A training job whose checks raise the alarm (with its own rank map) instead of `alarm`."""
    hardware: bool = False
    """The cluster's Prometheus workspace holds dcgm-exporter's series of every GPU (served by a
    real Prometheus when one is installed): the culprit's GPU logged an XID and a row remap
    failure twenty minutes before the alarm; the card must say so, and nothing of other GPUs."""
    hardware_alert: bool = False
    """No training report: the culprit's GPU throttles in the cluster's Prometheus (a real one,
    loaded with the stack's hardware rules); the rule fires, the drill delivers the alert as
    SNS would to the claims intake, and that opens the incident."""
    muted: bool = False
    """Whether an alarm mute rule (MUTE_RULE) mutes the detection alarms; the job then
    publishes metrics only, so the muted alarm is what opens the incident."""
    spare_nodes: int = 0
    """Nodes of the cluster beyond the job's four (the guard keeps one node of a cluster out
    of remediation: a job-level incident over all four needs a fifth)."""
    approvers: tuple[str, ...] = ()
    """IAM users of the local account who each give `decision` in turn, as `sdc approve` does
    (an identity proof signed with their key); empty: one unsigned, console-like decision."""
    straggler_telemetry: bool | None = None
    """The cluster's Prometheus workspace holds every GPU's clock-throttle reasons (None: no
    workspace): True, the straggler's GPU is held down by HW slowdown (the hardware
    corroboration), False, no GPU is throttled by the hardware."""
    steps: tuple[str, ...] = ()
    """Audit actions each incident's trail must hold in this order (its timeline)."""
    never: tuple[str, ...] = ()
    """Audit actions no incident's trail may hold."""
    notice_says: str | None = None
    """What the one held notice (the only notification) must say."""
    slurm: bool = False
    """The cluster is orchestrated by Slurm (SLURM_CONTEXT): a real slurmctld plays its
    controller, and `scontrol show node` must show our drain while the approval waits and the
    node back in service after (unless replaced)."""
    sweep: bool = False
    """No training report: the cluster's idle sweep (SWEEP_CONTEXT) finds the failing node.
    The job runs on BUSY_NODES (pods of the job on EKS, jobs on Slurm); SWEEP_FAILS fails
    InstanceConnectivity; HyperPod holds each node it checks out of scheduling meanwhile (the
    node health label on EKS, a maintenance reservation on Slurm)."""


SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "replay-culprit",
            "rank 13 mismatches both ring comparisons; approved; node replaced",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            replaced=True,
        ),
        Scenario(
            "two-person",
            "two approvals required: alice approves (1 of 2), alice again (counts once), bob "
            "approves; node replaced",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            context={"sdc:approvalsRequired": 2},
            replaced=True,
            approvers=("alice", "alice", "bob"),
        ),
        Scenario(
            "nonfinite-transient",
            "rank 13 emits a NaN and a third rank confirms it transient; two metrics, one incident",
            NONFINITE_TRANSIENT,
            "approve",
            "replaced",
            replaced=True,
        ),
        Scenario(
            "reboot-transient",
            "a transient verdict on rank 13: the card recommends a reboot; the approver reboots, "
            "the deep health check after it passes, the node is released; nothing is replaced",
            NONFINITE_TRANSIENT,
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
        ),
        Scenario(
            "slurm-replay-culprit",
            "replay-culprit on a cluster orchestrated by Slurm: the node is drained on the "
            "controller with the incident's reason while the approval waits; approved; node "
            "replaced",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            replaced=True,
            recommends="replace after review",
            context=SLURM_CONTEXT,
            slurm=True,
        ),
        Scenario(
            "slurm-reboot-transient",
            "reboot-transient on a cluster orchestrated by Slurm: drained while the approval "
            "waits; rebooted, the health check after it passes, the drain is lifted (the node "
            "back in service); nothing is replaced",
            NONFINITE_TRANSIENT,
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
            context=SLURM_CONTEXT,
            slurm=True,
        ),
        Scenario(
            "weight-suspect",
            "rank 0's weights differ from the strict majority; approved; node replaced",
            WEIGHTS_SUSPECT,
            "approve",
            "replaced",
            replaced=True,
        ),
        Scenario(
            "weight-no-majority",
            "replicas disagree with no strict majority: one job-level incident, health checks "
            "only, nothing proposed for replacement (its four nodes count four against the "
            "guard and the storm rule, which this deployment leaves room for)",
            WEIGHTS_NO_MAJORITY,
            None,
            "checked",
            approval=False,
            context=ROOM_FOR_A_JOB,
            spare_nodes=1,
        ),
        Scenario(
            "hyperpod-replaces",
            "the deep health check fails on a NodeRecovery=Automatic cluster: HyperPod replaces "
            "the node itself, the pipeline sees it and does not replace it again",
            REPLAY_CULPRIT,
            "approve",
            "replaced_by_hyperpod",
            node_recovery="Automatic",
            health_check_fails=True,
        ),
        Scenario(
            "storm-hold",
            "a culprit on every node at once is a recipe problem: the cluster is held with one "
            "notice, nothing is health-checked or replaced, an audited reset lifts the hold",
            STORM,
            "reset",
            "held",
            approval=False,
            incidents=len(NODES),
            storm=True,
        ),
        Scenario(
            "hardware-evidence",
            "rank 13's GPU logged XID 79, a row remap failure and PCIe replays (stored under "
            "_total, as the add-on does) in the cluster's Prometheus: the card names all three; "
            "approved; node replaced",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            context=TELEMETRY_CONTEXT,
            replaced=True,
            hardware=True,
        ),
        Scenario(
            "hardware-alert",
            "no SDC check fired: rank 13's GPU is held down by HW thermal slowdown in the "
            "cluster's Prometheus; the stack's rule fires, the alert arrives as SNS delivers it, "
            "the node is isolated and health-checked, the card recommends a reboot; rebooted",
            REPLAY_CULPRIT,
            "reboot",
            "rebooted",
            context={**TELEMETRY_CONTEXT, "sdc:hardwareAlerts": {"throttleMinutes": 1}},
            rebooted=True,
            recommends="reboot",
            hardware_alert=True,
        ),
        Scenario(
            "muted-alarm",
            "a CloudWatch alarm mute rule mutes the SDC alarms (maintenance): the alarm still "
            "reaches the pipeline, which holds the incident as if paused and names the rule",
            REPLAY_CULPRIT,
            None,
            "held",
            approval=False,
            muted=True,
        ),
        Scenario(
            "reject",
            "the approver rejects: nothing is replaced",
            REPLAY_CULPRIT,
            "reject",
            "rejected",
            context={"sdc:approverTimeZone": "America/New_York"},  # the card's deadline in it
        ),
        Scenario(
            "approval-timeout",
            "nobody answers within the approval timeout: expired, never auto-approved",
            REPLAY_CULPRIT,
            None,
            "expired",
            context={"sdc:approvalTimeoutSeconds": 3},
        ),
        Scenario(
            "duplicate-events",
            "every contributor event arrives three times: one incident, one execution",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            deliveries=3,
            replaced=True,
        ),
        Scenario(
            "dry-run",
            "dry-run deployment: everything runs, the replacement is only recorded",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            context={"sdc:dryRun": True},
        ),
        Scenario(
            "ddp-replay",
            "a real 4-rank DDP job on CPU: one rank's forward goes wrong (x1000), its ring-replay "
            "audit names the rank; approved; node replaced (needs torch)",
            {},
            "approve",
            "replaced",
            replaced=True,
            job=tiny_ddp_job,
        ),
        Scenario(
            "hang-one-rank",
            "a real 4-rank DDP job on CPU (gloo, no collective of its own): one rank stops; the "
            "watchdog names it by the collective and its stack; its node is isolated, a reboot is "
            "recommended and done (needs torch)",
            {},
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
            job=hang_one_rank_job,
        ),
        Scenario(
            "hang-ambiguous",
            "a real 4-rank gloo job on CPU: ranks on two nodes stop; the hang spans instances: "
            "one job-level incident, health checks of the two nodes only, nothing cordoned, "
            "nothing proposed (needs torch)",
            {},
            None,
            "checked",
            approval=False,
            context=ROOM_FOR_A_JOB,
            spare_nodes=1,
            job=hang_ambiguous_job,
        ),
        Scenario(
            "straggler",
            "a real 4-rank DDP job on CPU (gloo): one rank sleeps a part of every step; the straggler "
            "scores flag it; its node's telemetry in the cluster's Prometheus shows no hardware "
            "throttling, so it is a notice only: nothing cordoned, no health check, nothing "
            "proposed (needs torch)",
            {},
            None,
            "held",
            approval=False,
            context=TELEMETRY_CONTEXT,
            job=straggler_job,
            straggler_telemetry=False,
            steps=(AuditAction.INCIDENT_HELD, AuditAction.HELD_NOTIFIED),
            never=NOTHING_ACTS,
            notice_says="NOTICE ONLY",
        ),
        Scenario(
            "straggler-corroborated",
            "the straggler job again, and the cluster's Prometheus shows the slow rank's GPU "
            "held down by HW slowdown: its node is isolated and health-checked, the card "
            "recommends a reboot; rebooted (needs torch)",
            {},
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
            context=TELEMETRY_CONTEXT,
            job=straggler_job,
            straggler_telemetry=True,
            steps=(
                AuditAction.NODE_ISOLATED,
                AuditAction.HEALTH_CHECK_STARTED,
                AuditAction.APPROVAL_REQUESTED,
                AuditAction.REBOOT_REQUESTED,
            ),
        ),
        Scenario(
            "sweep",
            "no job reported anything: the scheduled idle sweep checks idle nodes of an EKS "
            "cluster (six idle, two running a job's pods); one fails InstanceConnectivity: one "
            "incident, isolated, approved, replaced; the busy nodes are never touched",
            {},
            "approve",
            "replaced",
            replaced=True,
            recommends="replace after review",
            context=SWEEP_CONTEXT,
            spare_nodes=4,
            sweep=True,
            steps=(
                AuditAction.INCIDENT_OPENED,
                AuditAction.NODE_ISOLATED,
                AuditAction.APPROVAL_REQUESTED,
                AuditAction.REPLACEMENT_REQUESTED,
            ),
        ),
        Scenario(
            "slurm-sweep",
            "the idle sweep on a cluster orchestrated by Slurm (six idle nodes, two allocated "
            "to a job): one idle node fails InstanceConnectivity: one incident, drained, "
            "approved, replaced; the allocated nodes are never touched",
            {},
            "approve",
            "replaced",
            replaced=True,
            recommends="replace after review",
            context={**SLURM_CONTEXT, **SWEEP_CONTEXT},
            spare_nodes=4,
            sweep=True,
            slurm=True,
            steps=(
                AuditAction.INCIDENT_OPENED,
                AuditAction.NODE_ISOLATED,
                AuditAction.APPROVAL_REQUESTED,
                AuditAction.REPLACEMENT_REQUESTED,
            ),
        ),
        Scenario(
            "hang-fsdp",
            "a real 4-rank FSDP2 job on CPU (fully_shard, gloo): one rank stops; the others wait "
            "in its gathers; the watchdog names it by the collective and its stack; its node is "
            "isolated, a reboot is recommended and done (needs torch)",
            {},
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
            job=hang_fsdp_job,
        ),
        Scenario(
            "hang-two-groups",
            "a real 4-rank DDP job on CPU with a second process group for its loss: one rank "
            "stops before its loss all-reduce and lags in both groups; the watchdog names it by "
            "the collective and its stack; its node is isolated, a reboot is recommended and "
            "done (needs torch)",
            {},
            "reboot",
            "rebooted",
            rebooted=True,
            recommends="reboot",
            job=hang_two_groups_job,
        ),
    )
}
DEFAULT = "replay-culprit"
MUTE_RULE = "drill-gpu-maintenance"
"""The alarm mute rule of the muted-alarm scenario (an hour's window around the drill)."""


def culprit_gpu(alarm: dict[str, Any], rank_map: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rank map entry of the alarm's one culprit rank."""
    (culprit,) = alarm["culprits"]
    return next(entry for entry in rank_map if entry["rank"] == culprit)
