"""`make drill`: watch an SDC incident go from a training rank to an audited outcome, locally.

    python -m infra.local.drill                      # the default scenario: replay culprit
    python -m infra.local.drill --list
    python -m infra.local.drill --scenario reject --json

A training rank calls the emitter with an alarm; the metrics land in moto; the local evaluator
applies the deployed alarms' semantics and emits contributor events; the deployed rule patterns
route them; the handlers run in-process; the state machine definitions from the synthesized
template run in moto's interpreter; the decision goes through the approval state machine, the
console's path; the fake HyperPod replaces the node. Exit status 0 only when the scenario's
expected outcome happened.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

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
XID = 79
DECOY_XIDS = {"other GPU of the suspect node": 31, "a GPU of another node": 48}


def tiny_ddp_job() -> Any:
    """A real 4-rank DDP job on CPU, one rank per node of the cluster, with a fault on one rank:
    its checks' alarm and rank map replace the scenario's hand-written ones."""
    from infra.local.ddp_job import run_job  # torch only in the job's processes

    return run_job(NODES)


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
    muted: bool = False
    """Whether an alarm mute rule (MUTE_RULE) mutes the detection alarms; the job then
    publishes metrics only, so the muted alarm is what opens the incident."""


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
            "only, nothing proposed for replacement",
            WEIGHTS_NO_MAJORITY,
            None,
            "checked",
            approval=False,
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
            "rank 13's GPU logged XID 79 and a row remap failure in the cluster's Prometheus: "
            "the card names both; approved; node replaced",
            REPLAY_CULPRIT,
            "approve",
            "replaced",
            context=TELEMETRY_CONTEXT,
            replaced=True,
            hardware=True,
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
    )
}
DEFAULT = "replay-culprit"
MUTE_RULE = "drill-gpu-maintenance"
"""The alarm mute rule of the muted-alarm scenario (an hour's window around the drill)."""


@dataclass
class Line:
    at: float
    who: str
    what: str
    ids: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    scenario: str
    passed: bool
    problems: list[str]
    incidents: list[dict[str, Any]]
    timeline: list[Line]
    notification: str | None
    audit: dict[str, list[dict[str, Any]]]
    chain_ok: bool
    replace_calls: list[dict[str, Any]]
    seconds: float
    dashboard: list[str] = field(default_factory=list)
    """The metrics this run's incidents put on the deployed dashboard, each checked against
    what the run published (`infra.local.dashboard_check`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "passed": self.passed,
            "problems": self.problems,
            "incidents": self.incidents,
            "timeline": [vars(line) for line in self.timeline],
            "notification": self.notification,
            "audit": self.audit,
            "audit_chain_verified": self.chain_ok,
            "replace_calls": self.replace_calls,
            "seconds": round(self.seconds, 2),
            "dashboard": self.dashboard,
        }


def run_scenario(
    scenario: Scenario,
    *,
    progress: Callable[[str], None] = lambda _: None,
    ask: Callable[[Any, str, str], str | None] | None = None,
) -> Outcome:
    """Run one scenario end to end and judge it. `ask(run, incident_id, card)` replaces the
    scripted approver (interactive and serve modes): it returns "approve", "reboot" or "reject" for the
    drill to send, or None when the decision was made elsewhere (the CLI, against the served
    endpoint)."""
    from infra.local.run import LocalRun, default_cluster  # heavy: moto, CDK on first synth
    from lambdas.logic.audit import verify_chain

    started = time.monotonic()
    wall_start = time.time()
    timeline: list[Line] = []

    def note(who: str, what: str, at: float | None = None, **ids: str) -> None:
        """`at`: when it happened (monotonic), if earlier than now."""
        when = time.monotonic() if at is None else at
        timeline.append(Line(round(when - started, 2), who, what, ids))
        progress(what)

    alarm, rank_map = scenario.alarm, RANK_MAP
    if scenario.job is not None:
        progress("training: a DDP job on CPU with its SDC checks, until its first alarm")
        job = scenario.job()
        alarm, rank_map = job.alarm, job.rank_map
        for what, ids in job.lines():
            note("training", what, **ids)
    progress("synthesizing the stack and standing it up in a local account")
    hyperpod = default_cluster(NODES, node_recovery=scenario.node_recovery)
    if scenario.health_check_fails:
        culprits = alarm.get("culprits", [])
        suspects = {str(d["instance_id"]) for d in rank_map if d["rank"] in culprits}
        for instance_id in suspects:
            hyperpod.set_health_check_result(CLUSTER, instance_id, passes=False)
    with ExitStack() as stack:
        endpoints = None
        if scenario.hardware:
            progress("a local Prometheus with dcgm-exporter's series of every GPU")
            endpoints = {WORKSPACE_ID: stack.enter_context(_prometheus(alarm, rank_map, note))}
        run = stack.enter_context(
            LocalRun.open(
                context=scenario.context, hyperpod=hyperpod, telemetry_endpoints=endpoints
            )
        )
        note("local", "stack deployed into the local account (moto) from the synthesized template")
        if scenario.muted:
            _mute_alarms(run, note)
        reported_at = time.monotonic()  # the report event is handled before report() returns
        emitter = run.emitter(rank_map, report_events=not scenario.muted)
        result = emitter.report(alarm)
        published = ", ".join(f"{d.metric.value} on {d.instance_id}" for d in result.datapoints)
        note(
            "rank 0",
            f"step {alarm['step']}: {alarm['check']} check fired; "
            f"report {result.report_id[:8]} published ({published})",
            at=reported_at,
            report_id=result.report_id,
        )

        events = run.evaluator.evaluate()
        for event in events:
            attrs = event["detail"]["alarmContributor"]["attributes"]
            mute = event["detail"].get("muteDetail")
            note(
                "cloudwatch",
                f"alarm {event['detail']['alarmName']} → ALARM for contributor "
                f"{attrs['InstanceId']}"
                + (f" (actions muted by {mute['mutedByArn'].rsplit(':', 1)[-1]})" if mute else ""),
                alarm=event["detail"]["alarmName"],
            )
        # What the report event opened (or held) before any alarm arrived.
        by_report = {
            str(i.get("incident_id"))
            for d in run.deliveries
            for i in (d.response or {}).get("incidents") or []
        }
        incident_ids: list[str] = []
        for round_ in range(scenario.deliveries):
            for event in events:
                for delivery in run.put_event(event):
                    response = delivery.response or {}
                    incident_id = response.get("incident_id")
                    action = response.get("action", "failed")
                    if action == "held" and (
                        incident_id in by_report or incident_id in incident_ids
                    ):
                        note(
                            "eventbridge",
                            f"alarm joins held incident {incident_id}",
                            incident_id=str(incident_id),
                        )
                    elif action == "held":
                        note(
                            "eventbridge",
                            f"alarm recorded incident {incident_id} as held",
                            incident_id=str(incident_id),
                        )
                    elif action == "attached" and round_ == 0:
                        note(
                            "eventbridge",
                            f"alarm attached to {incident_id} (the report opened it first)",
                            incident_id=str(incident_id),
                        )
                    elif action != "opened":  # the audit log shows the opening
                        note(
                            "eventbridge",
                            f"delivered again: {action} to {incident_id}",
                            incident_id=str(incident_id),
                        )
                    if incident_id and incident_id not in incident_ids:
                        incident_ids.append(incident_id)

        for delivery in run.deliveries:  # the report event may have opened it first
            for opened in (delivery.response or {}).get("incidents") or []:
                if opened.get("incident_id") and opened["incident_id"] not in incident_ids:
                    incident_ids.append(opened["incident_id"])
        card: str | None = None
        holds: list[Any] = []
        if scenario.storm:
            card, hold = _reset_storm(run, scenario, note)
            holds.append(hold)
        for incident_id in incident_ids if scenario.approval else []:
            run.wait_for(incident_id, "awaiting_approval", timeout=60)
            notice = run.wait_for_notification("approve")
            card = notice["message"]
            note("approver", f"notified: {notice['subject']}", incident_id=incident_id)
            decision = ask(run, incident_id, card) if ask else scenario.decision
            if decision is None and ask:
                note("approver", "decided outside the drill")
                continue
            if decision is None:
                note("approver", "no answer (waiting for the approval timeout)")
                continue
            execution = run.decide(incident_id, decision, f"drill: {decision}")
            note(
                "approver",
                f"{decision} via the approval state machine → {execution['status']}",
                execution=execution["executionArn"].rsplit(":", 1)[-1],
            )

        finals = [
            run.wait_for(
                i,
                scenario.expect,
                "replaced",
                "rebooted",
                "rejected",
                "expired",
                "failed",
                "skipped",
                timeout=90,
            )
            for i in incident_ids
        ]
        audit: dict[str, list[dict[str, Any]]] = {}
        chain_ok = True
        every_entry: list[Any] = []
        for subject in [i.incident_id for i in finals] + [h.hold_id for h in holds]:
            entries = run.audit(subject)
            every_entry.extend(entries)
            chain_ok = chain_ok and verify_chain(entries).ok
            timeline.extend(_audit_lines(entries, wall_start))
            audit[subject] = [
                {
                    "seq": e.seq,
                    "at": e.at,
                    "actor": e.actor,
                    "action": e.action,
                    "hash": e.hash[:12],
                    "prev_hash": e.prev_hash[:12],
                }
                for e in entries
            ]
        replace_calls = run.hyperpod.calls_to("BatchReplaceClusterNodes")
        reboot_calls = run.hyperpod.calls_to("BatchRebootClusterNodes")
        health_checks = run.hyperpod.calls_to("StartClusterHealthCheck")
        received = run.inbox + run.notifications()
        notices = [n["attributes"].get("kind") for n in received]
        held_texts = [n["message"] for n in received if n["attributes"].get("kind") == "held"]
        if scenario.muted and held_texts:
            card = held_texts[0]
        holds = [run.deps.guard.get_hold(h.hold_id) or h for h in holds]
        isolated = _still_isolated(run)
        sdc = {(emitter.config.namespace, d.metric.value) for d in result.datapoints}
        dashboard, dashboard_problems = _check_dashboard(run, every_entry, sdc)
    timeline.sort(key=lambda line: line.at)

    problems = _judge(scenario, finals, replace_calls, chain_ok, ask is not None)
    problems += _judge_recovery(scenario, reboot_calls, card, ask is not None)
    problems += [
        f"{i.instance_id}'s Kubernetes node is still cordoned or tainted after the incident "
        f"closed as {i.state.value}"
        for i in finals
        if i.state.value not in GONE and set(i.locked_instances) & isolated
    ]
    if scenario.storm:
        problems += _judge_storm(holds, notices, health_checks)
    if scenario.hardware:
        problems += _judge_hardware(card, finals, _culprit_gpu(alarm, rank_map))
    if scenario.muted:
        problems += _judge_muted(finals, notices, held_texts, health_checks)
    problems += dashboard_problems
    return Outcome(
        scenario=scenario.name,
        passed=not problems,
        problems=problems,
        incidents=[
            {
                "incident_id": i.incident_id,
                "instance_id": i.instance_id,
                "state": i.state.value,
                "new_instance_id": (i.replacement or {}).get("new_instance_id"),
                "dry_run": bool((i.replacement or {}).get("dry_run")),
            }
            for i in finals
        ],
        timeline=timeline,
        notification=card,
        audit=audit,
        chain_ok=chain_ok,
        replace_calls=replace_calls,
        seconds=time.monotonic() - started,
        dashboard=dashboard,
    )


_SHOWN = ("status", "state", "decision", "outcome", "new_instance_id", "node_status", "reason")


def _audit_lines(entries: Sequence[Any], wall_start: float) -> list[Line]:
    """The audit log as timeline lines: what each step of the pipeline recorded, when."""
    from datetime import datetime

    lines = []
    for entry in entries:
        if entry.action in ("incident_opened", "execution_started") and entry.seq > 2:
            continue
        shown = {
            k: str(entry.details[k]) for k in _SHOWN if isinstance(entry.details.get(k), str | int)
        }
        what = entry.action.replace("_", " ") + (
            " (" + ", ".join(f"{k} {v}" for k, v in shown.items()) + ")" if shown else ""
        )
        at = datetime.fromisoformat(entry.at).timestamp() - wall_start
        who = "approver" if entry.actor.startswith("approver") else entry.actor
        lines.append(Line(round(at, 2), who, what, {"audit_seq": str(entry.seq)}))
    return lines


def _judge(
    scenario: Scenario,
    finals: Sequence[Any],
    replace_calls: list[dict[str, Any]],
    chain_ok: bool,
    interactive: bool,
) -> list[str]:
    problems: list[str] = []
    if not finals:
        problems.append("no incident was opened")
    if len(finals) != scenario.incidents:
        problems.append(f"{len(finals)} incidents recorded; expected {scenario.incidents}")
    if not chain_ok:
        problems.append("the audit chain does not verify")
    if interactive:
        return problems
    for incident in finals:
        if incident.state.value != scenario.expect:
            problems.append(
                f"{incident.incident_id} ended {incident.state.value}, expected {scenario.expect}"
            )
    if scenario.replaced and len(replace_calls) != 1:
        problems.append(f"expected one BatchReplaceClusterNodes call, saw {len(replace_calls)}")
    if not scenario.replaced and replace_calls:
        problems.append(
            f"BatchReplaceClusterNodes was called {len(replace_calls)} times; expected none"
        )
    return problems


def _judge_recovery(
    scenario: Scenario, reboot_calls: list[dict[str, Any]], card: str | None, interactive: bool
) -> list[str]:
    """The reboot tier: rebooted exactly when the scenario says, and the card's recommendation."""
    problems: list[str] = []
    if interactive:
        return problems
    if scenario.rebooted and len(reboot_calls) != 1:
        problems.append(f"expected one BatchRebootClusterNodes call, saw {len(reboot_calls)}")
    if not scenario.rebooted and reboot_calls:
        problems.append(
            f"BatchRebootClusterNodes was called {len(reboot_calls)} times; expected none"
        )
    if scenario.recommends and f"RECOMMENDATION: {scenario.recommends.upper()}" not in (card or ""):
        problems.append(f"the approval card does not recommend {scenario.recommends}")
    return problems


def _check_dashboard(
    run: Any, entries: Sequence[Any], sdc: set[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """The deployed dashboard against this run (infra/local/dashboard_check.py): the metrics it
    had to show, and the problems found."""
    from infra.local.dashboard_check import facts, judge_dashboard, published_metrics

    bodies = list(run.stack.dashboards.values())
    if len(bodies) != 1:
        return [], [f"the stack has {len(bodies)} dashboards; expected one"]
    stack = run.stack
    expected = facts(entries, sdc)
    problems = judge_dashboard(
        bodies[0],
        published_metrics(run.session.client("cloudwatch")),
        expected,
        sdc_namespace=run.deps.settings.namespace,
        resources={
            "FunctionName": {f.name for f in stack.functions.values()},
            "QueueName": {q["arn"].rsplit(":", 1)[-1] for q in stack.queues.values()},
            "StateMachineArn": {m.arn for m in stack.state_machines.values()},
        },
        alarms={a["AlarmArn"] for a in stack.alarms.values()},
    )
    return sorted(f"{namespace}/{name}" for namespace, name in expected), problems


GONE = ("replaced", "replaced_by_hyperpod")
"""Outcomes after which the suspect node is gone, its cordon with it."""


def _still_isolated(run: Any) -> set[str]:
    """The instances whose Kubernetes node (in the local API stand-in) is still unschedulable or
    carries an incident taint."""
    from lambdas.models.kubernetes import TAINT_KEY, KubeNode

    nodes = [KubeNode.from_json(raw) for raw in run.kube_api.nodes.values()]
    return {
        node.instance_id
        for node in nodes
        if node.instance_id
        and (node.unschedulable or any(t.get("key") == TAINT_KEY for t in node.taints))
    }


def _reset_storm(run: Any, scenario: Scenario, note: Callable[..., None]) -> tuple[str | None, Any]:
    """The storm hold's one notice, then the approver's audited reset through the approval
    state machine (decision `reset` on the hold's id, exactly as the notice says)."""
    notice = run.wait_for_notification("storm on")
    hold_id = notice["attributes"]["incident_id"]
    note("approver", f"notified: {notice['subject']}", hold_id=hold_id)
    hold = run.deps.guard.get_hold(hold_id)
    if scenario.decision == "reset":
        execution = run.decide(hold_id, "reset", "drill: the recipe is fixed")
        note(
            "approver",
            f"reset via the approval state machine → {execution['status']}",
            execution=execution["executionArn"].rsplit(":", 1)[-1],
        )
    return notice["message"], hold


def _mute_alarms(run: Any, note: Callable[..., None]) -> None:
    """An alarm mute rule over the detection alarms, its window around now (maintenance)."""
    from datetime import UTC, datetime, timedelta

    from infra.local.evaluator import MuteRule

    now = datetime.now(UTC)
    rule = MuteRule(MUTE_RULE, now - timedelta(minutes=5), now + timedelta(hours=1))
    run.evaluator.mute(rule)
    note(
        "cloudwatch",
        f"alarm mute rule {MUTE_RULE} mutes the SDC alarms' actions for the next hour; the job "
        "publishes metrics only (no report event)",
    )


def _judge_muted(
    finals: Sequence[Any],
    notices: Sequence[str | None],
    held_texts: Sequence[str],
    checks: Sequence[Any],
) -> list[str]:
    problems: list[str] = []
    for incident in finals:
        hold = incident.hold or {}
        if (hold.get("kind"), hold.get("mute_rule")) != ("muted", MUTE_RULE):
            problems.append(
                f"{incident.incident_id} is not held by mute rule {MUTE_RULE}: hold {hold}"
            )
        if incident.execution_arn:
            problems.append(f"{incident.incident_id} started a remediation execution")
    if notices.count("held") != 1 or not all(MUTE_RULE in text for text in held_texts):
        problems.append(
            f"{notices.count('held')} held notices; expected one naming mute rule {MUTE_RULE}"
        )
    if checks:
        problems.append(f"{len(checks)} deep health checks started; expected none")
    return problems


def _judge_storm(
    holds: Sequence[Any], notices: Sequence[str | None], checks: Sequence[Any]
) -> list[str]:
    problems: list[str] = []
    if len(holds) != 1:
        problems.append(f"{len(holds)} storm holds; expected one")
    elif holds[0].active:
        problems.append(f"storm hold {holds[0].hold_id} is still active after the reset")
    storm_notices = notices.count("storm_hold")
    if storm_notices != 1:
        problems.append(f"{storm_notices} storm notices; expected one")
    if notices.count("held"):
        problems.append(f"{notices.count('held')} held notices besides the storm notice")
    if checks:
        problems.append(f"{len(checks)} deep health checks started; expected none")
    return problems


def _culprit_gpu(alarm: dict[str, Any], rank_map: Sequence[dict[str, Any]]) -> dict[str, Any]:
    (culprit,) = alarm["culprits"]
    return next(entry for entry in rank_map if entry["rank"] == culprit)


@contextmanager
def _prometheus(
    alarm: dict[str, Any], rank_map: Sequence[dict[str, Any]], note: Callable[..., None]
) -> Iterator[str]:
    """A local Prometheus with dcgm-exporter's series of every GPU of the job over the last 90
    minutes, as the HyperPod observability add-on would have written them: each series names its
    node by the Kubernetes node name (the local EKS stand-in's) in `Hostname`. The culprit's GPU
    logged XID 79 twenty minutes ago and a row remap failure 30 s later; decoys: another GPU of
    the same node (XID 31) and a GPU of another node (XID 48). Yields the base URL."""
    from infra.local import prometheus
    from infra.local.run import kube_node_names

    now = int(time.time()) // 15 * 15
    start = now - 90 * 60
    culprit = _culprit_gpu(alarm, rank_map)
    hosts = kube_node_names(sorted({str(e["instance_id"]) for e in rank_map}))
    same_node = next(
        e
        for e in rank_map
        if e["instance_id"] == culprit["instance_id"] and e["rank"] != culprit["rank"]
    )
    other_node = next(e for e in rank_map if e["instance_id"] != culprit["instance_id"])
    decoys = {
        str(same_node["gpu_uuid"]): DECOY_XIDS["other GPU of the suspect node"],
        str(other_node["gpu_uuid"]): DECOY_XIDS["a GPU of another node"],
    }
    series = []
    for entry in rank_map:
        uuid = str(entry["gpu_uuid"])
        changes: dict[str, list[tuple[int, float]]] = {}
        if uuid == culprit["gpu_uuid"]:
            changes = {
                "DCGM_FI_DEV_XID_ERRORS": [(now - 20 * 60, XID)],
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": [(now - 20 * 60 + 30, 1)],
            }
        elif uuid in decoys:
            changes = {"DCGM_FI_DEV_XID_ERRORS": [(now - 40 * 60, decoys[uuid])]}
        series += prometheus.gpu_series(
            host=hosts[str(entry["instance_id"])],
            gpu=str(entry["rank"] % GPUS_PER_NODE),
            uuid=uuid,
            start=start,
            end=now,
            changes=changes,
        )
    what = (
        f"dcgm-exporter series of {len(rank_map)} GPUs: XID {XID} and a row remap failure on "
        f"{culprit['gpu_uuid']} ({culprit['instance_id']})"
    )
    if prometheus.binaries() is None:
        with prometheus.StandIn(series).serve() as url:
            note("prometheus", f"a stand-in (no prometheus installed) at {url} holds {what}")
            yield url
        return
    with prometheus.real_prometheus(series) as server:
        note(
            "prometheus",
            f"Prometheus {server.version} at {server.base_url} holds {what} "
            "(backfilled with promtool)",
        )
        yield server.base_url


def _judge_hardware(card: str | None, finals: Sequence[Any], culprit: dict[str, Any]) -> list[str]:
    """The card names the culprit GPU's XID and row remap failure, and nothing of the decoys."""
    problems: list[str] = []
    lines = (card or "").splitlines()
    uuid = culprit["gpu_uuid"]
    if not any(f"XID {XID} at " in line and uuid in line for line in lines):
        problems.append(f"the card does not name XID {XID} on {uuid}")
    if not any("row remap FAILED" in line and uuid in line for line in lines):
        problems.append(f"the card does not name the row remap failure on {uuid}")
    for where, xid in DECOY_XIDS.items():
        if f"XID {xid} " in (card or ""):
            problems.append(f"the card names XID {xid} of {where}")
    states = [getattr(i.telemetry, "state", None) for i in finals]
    if states != ["signal"]:
        problems.append(f"the incidents' telemetry is {states}; expected ['signal']")
    return problems


OUTPUTS_FILE = ".drill/outputs.json"


def _serve_until_decided(run: Any, incident_id: str, port: int) -> None:
    """Serve the local account over HTTP and wait until someone decides with the CLI."""
    endpoint = run.serve(port)
    path = run.write_outputs(OUTPUTS_FILE)
    print(
        "\nThe local account is served at " + endpoint + ". Decide from another shell:\n\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} show {incident_id}\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} approve {incident_id} -m 'looks bad'\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} reject {incident_id} -m 'not the GPU'\n"
        "\nWaiting for the decision (Ctrl-C to stop)...",
        flush=True,
    )
    while True:
        incident = run.incident(incident_id)
        if incident is not None and incident.state.value != "awaiting_approval":
            return None
        time.sleep(0.2)


# -- output -------------------------------------------------------------------------------------


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text


def render(outcome: Outcome, out: TextIO, style: Style) -> None:
    bold, dim = "1", "2"
    out.write(style(f"SDC drill: {outcome.scenario}", bold) + "\n\n")
    out.write(style("Timeline", bold) + "\n")
    for line in outcome.timeline:
        out.write(f"  {style(f'+{line.at:6.2f}s', dim)}  {line.who:<19} {line.what}\n")
    if outcome.notification:
        out.write("\n" + style("The notification the approver got", bold) + "\n")
        for text in outcome.notification.splitlines():
            out.write(f"  │ {text}\n")
    out.write("\n" + style("Audit log", bold) + "\n")
    for incident_id, entries in outcome.audit.items():
        out.write(f"  {incident_id}\n")
        for entry in entries:
            out.write(
                f"    {entry['seq']:>3}  {entry['at'][11:23]}  {entry['actor'][:28]:<28} "
                f"{entry['action']:<24} {style(entry['hash'], dim)} ← {style(entry['prev_hash'] or '-', dim)}\n"
            )
    verdict = "verified" if outcome.chain_ok else "BROKEN"
    out.write(f"  hash chain: {verdict}\n\n")
    if outcome.dashboard:
        out.write(style("Dashboard", bold) + "\n")
        out.write(
            f"  {len(outcome.dashboard)} metrics of this run on it, each as published: "
            + ", ".join(m.rsplit("/", 1)[-1] for m in outcome.dashboard)
            + "\n\n"
        )
    for incident in outcome.incidents:
        new_id = incident["new_instance_id"]
        out.write(
            f"  {incident['instance_id'] or 'job-level incident'}: {incident['state']}"
            + (f" → new instance {new_id}" if new_id else "")
            + (
                " (dry run: recorded as would-replace, nothing was called)"
                if incident["dry_run"]
                else ""
            )
            + "\n"
        )
    if outcome.passed:
        out.write(style(f"PASS  {outcome.scenario} ({outcome.seconds:.1f} s)", "32;1") + "\n")
    else:
        out.write(style(f"FAIL  {outcome.scenario}", "31;1") + "\n")
        for problem in outcome.problems:
            out.write(f"  - {problem}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make drill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=DEFAULT, choices=[*sorted(SCENARIOS), "all"])
    parser.add_argument(
        "--ddp",
        dest="scenario",
        action="store_const",
        const="ddp-replay",
        help="--scenario ddp-replay",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--json", action="store_true", help="one JSON document per scenario")
    parser.add_argument(
        "--interactive", action="store_true", help="pause at the approval and ask for the decision"
    )
    parser.add_argument(
        "--serve",
        type=int,
        nargs="?",
        const=5005,
        metavar="PORT",
        help="at the approval, serve the local account on 127.0.0.1:PORT (default 5005) and "
        "wait for a decision from the sdc CLI (it prints the command)",
    )
    parser.add_argument("--verbose", action="store_true", help="show the functions' own logs")
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:<20} {scenario.summary}")
        return 0
    if not args.verbose:
        # The functions log JSON lines to stdout, as on Lambda; here they would bury the
        # timeline. Set before the handlers are imported. (Their EMF metrics never reach stdout
        # in the local run: infra/local/metrics.py puts them into the local account.)
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    tty = sys.stdout.isatty() and not args.json
    style = Style(tty and os.environ.get("NO_COLOR") is None)

    def progress(text: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K… {text[:100]}")
            sys.stderr.flush()

    def ask(run: Any, incident_id: str, card: str) -> str | None:
        if tty:
            sys.stderr.write("\r\033[K")
        print(card)
        if args.serve is not None:
            _serve_until_decided(run, incident_id, args.serve)
            return None
        while True:
            answer = (
                input(f"\nDecision for {incident_id} [approve/reboot/reject]: ").strip().lower()
            )
            if answer in ("approve", "reboot", "reject"):
                return answer

    names = sorted(SCENARIOS) if args.scenario == "all" else [args.scenario]
    failed = 0
    for name in names:
        try:
            outcome = run_scenario(
                SCENARIOS[name],
                progress=progress,
                ask=ask if args.interactive or args.serve is not None else None,
            )
        except Exception as exc:  # a drill that breaks says how, in one line, and fails
            if tty:
                sys.stderr.write("\r\033[K")
            print(style(f"FAIL  {name}: {type(exc).__name__}: {exc}", "31;1"))
            failed += 1
            continue
        if tty:
            sys.stderr.write("\r\033[K")
        if args.json:
            print(json.dumps(outcome.to_json()))
        else:
            render(outcome, sys.stdout, style)
        failed += not outcome.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
