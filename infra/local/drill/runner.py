"""The drill's runner: one scenario end to end on the local run, then judged.

A training rank calls the emitter with an alarm; the metrics land in moto; the local evaluator
applies the deployed alarms' semantics and emits contributor events; the deployed rule patterns
route them; the handlers run in-process; the state machine definitions from the synthesized
template run in moto's interpreter; the decision goes through the approval state machine, the
console's path; the fake HyperPod replaces the node.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.cli.main import main as sdc
from sdc_remediation.infra.local.drill import judge, stage
from sdc_remediation.infra.local.drill.scenarios import CLUSTER, RANK_MAP, WORKSPACE_ID, Scenario
from sdc_remediation.infra.local.grants import GrantsInsufficient, calls_per_function
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import Decision, OpenAction
from sdc_remediation.lambdas.wording.card_lines import advice_summary, deadline_words
from sdc_remediation.lambdas.wording.cards import SUMMARY_LINES

Note = Callable[..., None]
"""`note(who, what, at=None, **ids)`: a timeline line; `at` (monotonic) if earlier than now."""

CLOSED = ("replaced", "rebooted", "rejected", "expired", "failed", "skipped")
"""The states the drill waits for besides the scenario's expected one."""


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
    what the run published (`sdc_remediation.infra.local.dashboard_check`)."""
    lifecycle: list[dict[str, Any]] = field(default_factory=list)
    """The incident lifecycle events a rule on the default bus got, each incident's in its
    `sequence` order."""
    calls: dict[str, list[str]] = field(default_factory=dict)
    """Function → the AWS actions its calls needed, each checked against its role in the
    synthesized template (`sdc_remediation.infra.local.grants`)."""
    recommendations: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Incident → what its stored record, e-mail card, chat notice, lifecycle event and
    `sdc show` said its recommendation was while it waited for approval."""
    deadlines: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Incident → the approval deadline its stored record, e-mail card, chat notice, lifecycle
    event, `sdc show` and `sdc status` gave while it waited for approval."""
    card_heads: dict[str, list[str]] = field(default_factory=dict)
    """Incident → the first five lines of its approval card."""

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
            "lifecycle_events": self.lifecycle,
            "calls": self.calls,
            "recommendations": self.recommendations,
            "deadlines": self.deadlines,
            "card_heads": self.card_heads,
        }


def run_scenario(
    scenario: Scenario,
    *,
    progress: Callable[[str], None] = lambda _: None,
    ask: Callable[[Any, str, str], str | None] | None = None,
    linger: Callable[[Any, Outcome], None] | None = None,
) -> Outcome:
    """Run one scenario end to end and judge it. `ask(run, incident_id, card)` replaces the
    scripted approver (interactive and serve modes): it returns "approve", "reboot" or "reject"
    for the drill to send, or None when the decision was made elsewhere (the CLI, against the
    served endpoint). `linger(run, outcome)` is called once the scenario is judged, with the
    local account still standing (serve mode keeps it served until it returns); the outcome
    returned adds what the account's teardown finds (grants the functions lacked)."""
    from sdc_remediation.infra.local.run import LocalRun  # heavy: moto, CDK on first synth

    started = time.monotonic()
    wall_start = time.time()
    timeline: list[Line] = []

    def note(who: str, what: str, at: float | None = None, **ids: str) -> None:
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
    if scenario.slurm:
        rank_map = stage.slurm_rank_map(rank_map)
    progress("synthesizing the stack and standing it up in a local account")
    hyperpod = stage.cluster(scenario, alarm, rank_map)

    def judged(more: Sequence[str] = ()) -> Outcome:
        """The outcome of what the scenario saw, with `more` problems found after it."""
        timeline.sort(key=lambda line: line.at)
        problems = (
            judge.problems(scenario, seen)
            + judge.one_recommendation(said)
            + judge.one_deadline(deadlines)
            + judge.card_leads(heads, said, deadlines)
            + dashboard_problems
            + judge.stuck(reconciled)
            + list(more)
        )
        return Outcome(
            scenario=scenario.name,
            passed=not problems,
            problems=problems,
            incidents=[
                {
                    "incident_id": i.incident_id,
                    "instance_id": i.instance_id,
                    "state": i.state.value,
                    "new_instance_id": i.replacement.new_instance_id if i.replacement else None,
                    "dry_run": bool(i.replacement and i.replacement.dry_run),
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
            lifecycle=lifecycle,
            calls=calls,
            recommendations=said,
            deadlines=deadlines,
            card_heads=heads,
        )

    grant_problems: list[str] = []
    try:
        with ExitStack() as stack:
            endpoints = None
            server = None
            if scenario.hardware_alert:
                progress("a local Prometheus evaluating the stack's hardware rules")
                server = stack.enter_context(
                    stage.alerting_workspace(alarm, rank_map, scenario.context, note)
                )
                endpoints = {WORKSPACE_ID: server.base_url}
            elif scenario.straggler_telemetry is not None:
                progress("a local Prometheus with every GPU's clock-throttle reasons")
                workspace = stage.throttle_workspace(
                    alarm, rank_map, scenario.straggler_telemetry, note
                )
                endpoints = {WORKSPACE_ID: stack.enter_context(workspace)}
            elif scenario.hardware:
                progress("a local Prometheus with dcgm-exporter's series of every GPU")
                workspace = stage.prometheus_workspace(alarm, rank_map, note)
                endpoints = {WORKSPACE_ID: stack.enter_context(workspace)}
            slurm = None
            if scenario.slurm:
                progress("Debian's slurmctld playing the cluster's Slurm controller")
                slurm = stack.enter_context(
                    stage.slurm_controller(hyperpod, note, jobs=scenario.sweep)
                )
            run = stack.enter_context(
                LocalRun.open(
                    context=scenario.context,
                    hyperpod=hyperpod,
                    telemetry_endpoints=endpoints,
                    slurm=slurm,
                )
            )
            note(
                "local",
                "stack deployed into the local account (moto) from the synthesized template",
            )
            if scenario.muted:
                stage.mute_alarms(run, note)
            sdc: set[tuple[str, str]] = set()
            sweeps: list[dict[str, Any]] = []
            if scenario.sweep:
                stack.enter_context(stage.sweep_watching(run, note))
                incident_ids = _sweep(run, note, sweeps)
            elif server is not None:
                incident_ids = stage.deliver_hardware_alert(run, server, note)
            else:
                reported_at = time.monotonic()  # handled before report() returns
                emitter = run.emitter(rank_map, report_events=not scenario.muted)
                result = emitter.report(alarm)
                published = ", ".join(
                    f"{d.metric.value} on {d.instance_id}" for d in result.datapoints
                )
                note(
                    "rank 0",
                    f"step {alarm['step']}: {alarm['check']} check fired; "
                    f"report {result.report_id[:8]} published ({published})",
                    at=reported_at,
                    report_id=result.report_id,
                )
                sdc = {(emitter.config.namespace, d.metric.value) for d in result.datapoints}
                incident_ids = _deliver_alarms(run, scenario, note)
            card: str | None = None
            holds: list[Any] = []
            if scenario.storm:
                card, hold = _reset_storm(run, scenario, note)
                holds.append(hold)
            said: dict[str, dict[str, str | None]] = {}
            deadlines: dict[str, dict[str, str | None]] = {}
            heads: dict[str, list[str]] = {}
            drains: dict[str, str | None] = {}
            if scenario.approval:
                card = (
                    _approve(run, scenario, incident_ids, ask, note, said, deadlines, heads, drains)
                    or card
                )
            finals = [run.wait_for(i, scenario.expect, *CLOSED, timeout=90) for i in incident_ids]
            if scenario.sweep:
                _sweep_again(run, note, sweeps)
            if run.slurm is not None:
                _nodes_after(run, drains, note)
            subjects = [i.incident_id for i in finals] + [h.hold_id for h in holds]
            audit, chain_ok, every_entry = _read_audit(run, subjects, wall_start, timeline)
            replace_calls = run.hyperpod.calls_to("BatchReplaceClusterNodes")
            reboot_calls = run.hyperpod.calls_to("BatchRebootClusterNodes")
            health_checks = run.hyperpod.calls_to("StartClusterHealthCheck")
            received = run.inbox + run.notifications()
            held_texts = [
                n["message"] for n in received if n["attributes"].get("kind") == NoticeKind.HELD
            ]
            if (scenario.muted or scenario.notice_says) and held_texts:
                card = held_texts[0]
            seen = judge.Observed(
                finals=finals,
                holds=[run.deps.guard.get_hold(h.hold_id) or h for h in holds],
                chain_ok=chain_ok,
                card=card,
                notices=[n["attributes"].get("kind") for n in received],
                held_texts=held_texts,
                replace_calls=replace_calls,
                reboot_calls=reboot_calls,
                health_checks=health_checks,
                isolated=_still_isolated(run),
                drains=drains,
                alarm=alarm,
                rank_map=rank_map,
                interactive=ask is not None,
                actions={
                    subject: [entry["action"] for entry in entries]
                    for subject, entries in audit.items()
                },
                sweeps=sweeps,
            )
            lifecycle = sorted(
                run.lifecycle_events(), key=lambda d: (d["incident_id"], d["sequence"])
            )
            for incident_id, surfaces in said.items():
                surfaces["lifecycle event"] = judge.event_advice(lifecycle, incident_id)
            for incident_id, surfaces in deadlines.items():
                surfaces["lifecycle event"] = judge.event_deadline(lifecycle, incident_id)
            dashboard, dashboard_problems = judge.check_dashboard(run, every_entry, sdc)
            # The scheduled reconciliation, after the scenario: nothing may be left stuck.
            reconciled = run.reconcile()
            note(
                "reconcile",
                f"the scheduled reconciliation ran: {len(reconciled['settled'])} settled, "
                f"{len(reconciled['needs_person'])} needing a person",
            )
            calls = calls_per_function(run.recorder.calls, run.cluster_arns)
            if linger is not None:
                linger(run, judged())
    except GrantsInsufficient as err:
        grant_problems = [str(denied) for denied in err.denied]
    return judged(grant_problems)


def _sweep(run: Any, note: Note, sweeps: list[dict[str, Any]]) -> list[str]:
    """The idle sweep as its schedule runs it: a first run starts checks on idle nodes, HyperPod
    runs them, the next run reads the results; the incidents the failed checks opened."""
    sweeps.append(run.sweep())
    _note_sweep(note, sweeps[-1], 1)
    run.hyperpod.advance(run.hyperpod.health_check_polls + 1)
    sweeps.append(run.sweep())
    _note_sweep(note, sweeps[-1], 2)
    return [str(r["incident_id"]) for r in sweeps[-1]["results"] if r.get("incident_id")]


def _sweep_again(run: Any, note: Note, sweeps: list[dict[str, Any]]) -> None:
    """Once the incidents closed: the checks the last run started end, and one more run reads
    them (and starts the next turn's, as a scheduled run does)."""
    run.hyperpod.advance(run.hyperpod.health_check_polls + 1)
    sweeps.append(run.sweep())
    _note_sweep(note, sweeps[-1], len(sweeps))


def _note_sweep(note: Note, record: dict[str, Any], number: int) -> None:
    by_reason: dict[str, list[str]] = {}
    for instance_id, reason in sorted(record["skipped"].items()):
        by_reason.setdefault(reason, []).append(instance_id)
    skipped = "; ".join(f"{reason}: {', '.join(ids)}" for reason, ids in by_reason.items())
    results = ", ".join(
        f"{r['instance_id']} {'passed' if r['passed'] else 'FAILED → ' + str(r['incident_id'])}"
        for r in record["results"]
    )
    note(
        "scheduler",
        f"idle sweep run {number}: checked {', '.join(record['checked']) or 'none'}"
        + (f"; not checked: {skipped}" if skipped else "")
        + (f"; results: {results}" if results else ""),
    )


def _deliver_alarms(run: Any, scenario: Scenario, note: Note) -> list[str]:
    """The evaluator's contributor events, each delivered as often as the scenario says; the
    incidents they (or the report event before them) opened or held, in order."""
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
                if action == OpenAction.HELD and (
                    incident_id in by_report or incident_id in incident_ids
                ):
                    note(
                        "eventbridge",
                        f"alarm joins held incident {incident_id}",
                        incident_id=str(incident_id),
                    )
                elif action == OpenAction.HELD:
                    note(
                        "eventbridge",
                        f"alarm recorded incident {incident_id} as held",
                        incident_id=str(incident_id),
                    )
                elif action == OpenAction.ATTACHED and round_ == 0:
                    note(
                        "eventbridge",
                        f"alarm attached to {incident_id} (the report opened it first)",
                        incident_id=str(incident_id),
                    )
                elif action != OpenAction.OPENED:  # the audit log shows the opening
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
    return incident_ids


def _approve(
    run: Any,
    scenario: Scenario,
    incident_ids: Sequence[str],
    ask: Callable[[Any, str, str], str | None] | None,
    note: Note,
    said: dict[str, dict[str, str | None]],
    deadlines: dict[str, dict[str, str | None]],
    heads: dict[str, list[str]],
    drains: dict[str, str | None],
) -> str | None:
    """Each incident's approval card, then the scenario's decision (or the person's) through
    the approval state machine. Returns the last card; `said` and `deadlines` get what each
    surface said the incident's recommendation and approval deadline were while it waited,
    `heads` the card's first five lines; `drains`, on Slurm, the reason each of its nodes
    carried on the controller meanwhile (instance id → reason)."""
    card = None
    for incident_id in incident_ids:
        waiting = run.wait_for(incident_id, "awaiting_approval", timeout=60)
        notice = run.wait_for_notification("approve")
        card = notice["message"]
        said[incident_id], deadlines[incident_id] = _surfaces_said(
            run, incident_id, waiting, notice
        )
        heads[incident_id] = card.splitlines()[:SUMMARY_LINES]
        if run.slurm is not None:
            drains.update(_drains_shown(run, waiting.locked_instances, note))
        note(
            "approver",
            f"notified: {notice['subject']}",
            incident_id=incident_id,
            recommends=advice_summary(waiting.recommendation),
        )
        decision = ask(run, incident_id, card) if ask else scenario.decision
        if decision is None and ask:
            note("approver", "decided outside the drill")
            continue
        if decision is None:
            note("approver", "no answer (waiting for the approval timeout)")
            continue
        if scenario.approvers and not ask:
            _approve_in_turn(run, scenario, incident_id, decision, note)
            continue
        execution = run.decide(incident_id, decision, f"drill: {decision}")
        note(
            "approver",
            f"{decision} via the approval state machine → {execution['status']}",
            execution=execution["executionArn"].rsplit(":", 1)[-1],
        )
    return card


def _drains_shown(run: Any, instance_ids: Sequence[str], note: Note) -> dict[str, str | None]:
    """What `scontrol show node` on the local controller shows for each instance's node while
    the approval waits: its state and reason in the timeline, the reason returned."""
    shown: dict[str, str | None] = {}
    for instance_id in instance_ids:
        host = stage.slurm_host(run.hyperpod, instance_id)
        if host is None:
            continue
        node = run.slurm.node(host)
        shown[instance_id] = node.reason
        run.drained_hosts.add(host)
        note(
            "slurm",
            f"scontrol show node {host}: State={node.state} Reason={node.reason}",
            instance_id=instance_id,
        )
    return shown


def _nodes_after(run: Any, drains: dict[str, str | None], note: Note) -> None:
    """What `scontrol show node` shows, once the incidents closed, for each node that was
    drained while its approval waited (a replacement keeps the node's name)."""
    for host in sorted(run.drained_hosts):
        node = run.slurm.node(host)
        note("slurm", f"scontrol show node {host}: State={node.state} Reason={node.reason}")


def _surfaces_said(
    run: Any, incident_id: str, waiting: Any, notice: dict[str, Any]
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The incident's stored recommendation and approval deadline, and what the e-mail card,
    its chat rendering, `sdc show` and `sdc status` (the operator CLI, against this account)
    say they are."""
    chat = json.loads(run.renderings(notice["subject"]).get("https") or "{}")
    context = chat.get("metadata", {}).get("additionalContext", {})
    shown, status = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as folder:
        outputs = run.write_outputs(f"{folder}/outputs.json")
        with contextlib.redirect_stdout(shown):
            sdc(["--outputs", outputs, "show", incident_id], session=run.session)
        with contextlib.redirect_stdout(status):
            sdc(["--outputs", outputs, "status", "--json"], session=run.session)
    listed = {
        w["incident_id"]: w.get("deadline")
        for w in json.loads(status.getvalue())["approvals_waiting"]
    }
    stored = waiting.recommendation
    recommendation = {
        "stored record": stored.advice.value if stored else None,
        "e-mail card": judge.heading_advice(notice["message"]),
        "chat notice": context.get("advice"),
        "sdc show": judge.heading_advice(shown.getvalue()),
    }
    deadline = {
        "stored record": (
            deadline_words(waiting.approval_deadline) if waiting.approval_deadline else None
        ),
        "e-mail card": judge.card_deadline(notice["message"]),
        "chat notice": context.get("deadline"),
        "sdc show": judge.shown_deadline(shown.getvalue()),
        "sdc status": listed.get(incident_id),
    }
    return recommendation, deadline


def _approve_in_turn(
    run: Any, scenario: Scenario, incident_id: str, decision: str, note: Note
) -> None:
    """Each of the scenario's approvers gives the decision, signed as that IAM user; what each
    approval execution answered (\"1 of 2\", waiting) goes into the timeline."""
    for approver in scenario.approvers:
        execution = run.decide(
            incident_id, decision, f"drill: {decision} by {approver}", approver=approver
        )
        output = json.loads(execution.get("output") or "{}")
        counted = output.get("approvals") or "-"
        waiting = "; waiting for another approver" if output.get("waiting") else ""
        note(
            "approver",
            f"{approver}: {decision} via the approval state machine → {execution['status']}, "
            f"approvals {counted}{waiting}",
            execution=execution["executionArn"].rsplit(":", 1)[-1],
        )


def _reset_storm(run: Any, scenario: Scenario, note: Note) -> tuple[str | None, Any]:
    """The storm hold's one notice, then the approver's audited reset through the approval
    state machine (decision `reset` on the hold's id, exactly as the notice says)."""
    notice = run.wait_for_notification("storm on")
    hold_id = notice["attributes"]["incident_id"]
    note("approver", f"notified: {notice['subject']}", hold_id=hold_id)
    hold = run.deps.guard.get_hold(hold_id)
    if scenario.decision == Decision.RESET:
        execution = run.decide(hold_id, "reset", "drill: the recipe is fixed")
        note(
            "approver",
            f"reset via the approval state machine → {execution['status']}",
            execution=execution["executionArn"].rsplit(":", 1)[-1],
        )
    return notice["message"], hold


def _read_audit(
    run: Any, subjects: Sequence[str], wall_start: float, timeline: list[Line]
) -> tuple[dict[str, list[dict[str, Any]]], bool, list[Any]]:
    """Each subject's audit entries (shortened for the outcome), whether every chain verifies,
    and every entry; the entries join the timeline."""
    from sdc_remediation.lambdas.logic.core.audit import verify_chain

    audit: dict[str, list[dict[str, Any]]] = {}
    chain_ok = True
    every_entry: list[Any] = []
    for subject in subjects:
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
    return audit, chain_ok, every_entry


_SHOWN = ("status", "state", "decision", "outcome", "new_instance_id", "node_status", "reason")


def _audit_lines(entries: Sequence[Any], wall_start: float) -> list[Line]:
    """The audit log as timeline lines: what each step of the pipeline recorded, when."""
    from datetime import datetime

    lines = []
    for entry in entries:
        if (
            entry.action in (AuditAction.INCIDENT_OPENED, AuditAction.EXECUTION_STARTED)
            and entry.seq > 2
        ):
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


def _still_isolated(run: Any) -> set[str]:
    """The instances whose Kubernetes node (in the local API stand-in) is still unschedulable or
    carries an incident taint; on Slurm, whose node the controller shows drained with our
    reason."""
    from sdc_remediation.lambdas.models.kubernetes import TAINT_KEY, KubeNode
    from sdc_remediation.lambdas.models.slurm import DRAIN_REASON_PREFIX

    if run.slurm is not None:
        drained = set()
        for instance_id in list(run.hyperpod.clusters[CLUSTER].nodes):
            host = stage.slurm_host(run.hyperpod, instance_id)
            node = run.slurm.node(host) if host else None
            if node and node.drained and (node.reason or "").startswith(DRAIN_REASON_PREFIX):
                drained.add(instance_id)
        return drained

    nodes = [KubeNode.from_json(raw) for raw in run.kube_api.nodes.values()]
    return {
        node.instance_id
        for node in nodes
        if node.instance_id
        and (node.unschedulable or any(t.get("key") == TAINT_KEY for t in node.taints))
    }
