"""The drill's judge: what a scenario's run left behind against what the scenario expects.
Every problem is one sentence; a run passes with none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.local.drill.scenarios import (
    BUSY_NODES,
    DECOY_XIDS,
    MUTE_RULE,
    SWEEP_FAILS,
    XID,
    Scenario,
    culprit_gpu,
)
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.slurm import drain_reason
from sdc_remediation.lambdas.models.sweep import SkipReason
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from sdc_remediation.lambdas.wording.card_lines import (
    DEADLINE_LABEL,
    HARDWARE_ALERTS_HEADING,
    RECOMMENDATION_HEADING,
    deadline_words,
)

GONE = ("replaced", "replaced_by_hyperpod")
"""Outcomes after which the suspect node is gone, its cordon with it."""


@dataclass(frozen=True)
class Observed:
    """What a scenario's run left behind."""

    finals: Sequence[Any]
    """The incidents, as they ended."""
    holds: Sequence[Any]
    """The storm holds, as they ended."""
    chain_ok: bool
    card: str | None
    """The approval card the approver got (the held notice of a muted alarm)."""
    notices: Sequence[str | None]
    """The kind of every notification sent."""
    held_texts: Sequence[str]
    replace_calls: list[dict[str, Any]]
    reboot_calls: list[dict[str, Any]]
    health_checks: Sequence[Any]
    isolated: set[str]
    """The instances whose Kubernetes node is still cordoned or tainted."""
    alarm: dict[str, Any]
    rank_map: Sequence[dict[str, Any]]
    interactive: bool
    """A person decided (the drill's expectations of the decision do not apply)."""
    actions: dict[str, list[str]] = field(default_factory=dict)
    """Each incident's audit actions, in the order of its trail (its timeline)."""
    drains: dict[str, str | None] = field(default_factory=dict)
    """On Slurm: the reason each incident node carried on the controller while the approval
    waited (instance id → reason)."""
    sweeps: Sequence[dict[str, Any]] = ()
    """The idle sweep's runs, as each audited itself (`SweepRecord`s)."""


def _judge_drains(finals: Sequence[Any], drains: dict[str, str | None]) -> list[str]:
    """Each incident's nodes carried the drain reason naming it while its approval waited."""
    return [
        f"{instance_id}'s Slurm node showed reason {drains.get(instance_id)!r} while the "
        f"approval waited, not {drain_reason(i.incident_id)!r}"
        for i in finals
        for instance_id in i.locked_instances
        if drains.get(instance_id) != drain_reason(i.incident_id)
    ]


def problems(scenario: Scenario, seen: Observed) -> list[str]:
    """Every expectation of `scenario` that `seen` does not meet, in words."""
    found = _judge(scenario, seen.finals, seen.replace_calls, seen.chain_ok, seen.interactive)
    found += _judge_recovery(scenario, seen.reboot_calls, seen.card, seen.interactive)
    found += [
        f"{i.instance_id}'s node is still cordoned, tainted or drained after the incident "
        f"closed as {i.state.value}"
        for i in seen.finals
        if i.state.value not in GONE and set(i.locked_instances) & seen.isolated
    ]
    if scenario.slurm and not seen.interactive:
        found += _judge_drains(seen.finals, seen.drains)
    if scenario.slurm and seen.isolated:
        found.append(
            f"Slurm nodes of {', '.join(sorted(seen.isolated))} are still drained with our reason "
            "after the incidents closed (a replacement keeps the node's name: the drain must go)"
        )
    if scenario.storm:
        found += _judge_storm(seen.holds, seen.notices, seen.health_checks)
    if scenario.hardware:
        found += _judge_hardware(seen.card, seen.finals, culprit_gpu(seen.alarm, seen.rank_map))
    if scenario.hardware_alert:
        found += _judge_hardware_alert(seen.card, culprit_gpu(seen.alarm, seen.rank_map))
    if scenario.muted:
        found += _judge_muted(seen.finals, seen.notices, seen.held_texts, seen.health_checks)
    if scenario.approvers and not seen.interactive:
        found += _judge_approvers(scenario, seen.finals)
    if scenario.sweep:
        found += _judge_sweep(seen)
    if not seen.interactive:
        found += _judge_trail(scenario, seen)
    return found


def _judge_sweep(seen: Observed) -> list[str]:
    """The sweep checked idle nodes only and recorded the busy ones as busy; the one failed
    check opened the one incident, on the failing node; nothing touched the busy nodes."""
    problems: list[str] = []
    checked = {
        i
        for call in seen.health_checks
        for config in call["DeepHealthCheckConfigurations"]
        for i in config["InstanceIds"]
    }
    touched = sorted(set(BUSY_NODES) & checked)
    if touched:
        problems.append(f"busy nodes {touched} were health-checked")
    replaced = {i for call in seen.replace_calls for i in call["NodeIds"]}
    if set(BUSY_NODES) & replaced:
        problems.append(f"busy nodes {sorted(set(BUSY_NODES) & replaced)} were replaced")
    incident_nodes = {i for f in seen.finals for i in f.locked_instances}
    if incident_nodes != {SWEEP_FAILS}:
        problems.append(f"incidents on {sorted(incident_nodes)}; expected one on {SWEEP_FAILS}")
    if SWEEP_FAILS not in checked:
        problems.append(f"{SWEEP_FAILS} was never health-checked")
    for run, record in enumerate(seen.sweeps, start=1):
        busy = {record["skipped"].get(i) for i in BUSY_NODES}
        if busy != {SkipReason.BUSY}:
            problems.append(f"sweep run {run} recorded the busy nodes as {sorted(map(str, busy))}")
    if not seen.sweeps or not seen.sweeps[0]["checked"]:
        problems.append("the first sweep run checked nothing")
    for incident in seen.finals:
        if not incident.sweeps:
            problems.append(f"{incident.incident_id} holds no failed sweep check as evidence")
    return problems


def _judge_trail(scenario: Scenario, seen: Observed) -> list[str]:
    """Each incident's audit trail holds the scenario's steps in order and none of what must
    never happen; a notice-only scenario's one notification is the notice, saying so, and
    nothing was health-checked or cordoned."""
    problems: list[str] = []
    for incident in seen.finals:
        trail = seen.actions.get(incident.incident_id, [])
        found = [a for a in trail if a in scenario.steps]
        order = list(dict.fromkeys(found))
        if order != list(scenario.steps):
            problems.append(
                f"{incident.incident_id}'s trail has {order} of the steps "
                f"{list(scenario.steps)}, not all in that order"
            )
        done = sorted(set(trail) & set(scenario.never))
        if done:
            problems.append(f"{incident.incident_id}'s trail holds {done}; expected none")
    if scenario.notice_says is not None:
        if (
            list(seen.notices) != [NoticeKind.HELD]
            or scenario.notice_says not in seen.held_texts[0]
        ):
            problems.append(
                f"notifications {list(seen.notices)}; expected one held notice saying "
                f"{scenario.notice_says!r}"
            )
        if seen.health_checks:
            problems.append(f"{len(seen.health_checks)} deep health checks started; expected none")
        cordoned = [i.incident_id for i in seen.finals if i.isolation is not None]
        if cordoned or seen.isolated:
            problems.append(
                f"isolation ran for {cordoned}, nodes left cordoned {sorted(seen.isolated)}; "
                "expected none"
            )
        kinds = [i.hold_kind for i in seen.finals]
        if kinds != [HoldKind.NOTICE] * len(seen.finals):
            problems.append(f"the incidents are held as {kinds}; expected notice only")
    return problems


def _judge_approvers(scenario: Scenario, finals: Sequence[Any]) -> list[str]:
    """The decision names each distinct approver once, in the order they approved, each as
    the IAM user STS named."""
    expected = [
        f"arn:aws:iam::123456789012:user/{name}" for name in dict.fromkeys(scenario.approvers)
    ]
    found: list[str] = []
    for incident in finals:
        decision = incident.decision
        counted = (
            [a["principal"].get("arn") for a in (decision.approvals or [])] if decision else []
        )
        if counted != expected:
            found.append(
                f"{incident.incident_id} was decided with the approvals of {counted}; "
                f"expected {expected}"
            )
    return found


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


def stuck(reconciled: dict[str, Any]) -> list[str]:
    """What the reconciliation after a scenario had to settle or could not: a finished scenario
    leaves nothing stuck."""
    return [
        f"reconciliation found {entry['incident_id']} stuck ({entry['finding']}): {entry['why']}"
        for key in ("settled", "needs_person")
        for entry in reconciled.get(key) or []
    ]


def check_dashboard(
    run: Any, entries: Sequence[Any], sdc: set[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """The deployed dashboard against this run (infra/local/dashboard_check.py): the metrics it
    had to show, and the problems found."""
    from sdc_remediation.infra.local.dashboard_check import (
        facts,
        judge_dashboard,
        published_metrics,
    )

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


def _judge_muted(
    finals: Sequence[Any],
    notices: Sequence[str | None],
    held_texts: Sequence[str],
    checks: Sequence[Any],
) -> list[str]:
    problems: list[str] = []
    for incident in finals:
        hold = incident.hold
        if (incident.hold_kind, hold and hold.mute_rule) != (HoldKind.MUTED, MUTE_RULE):
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
    if states != [TelemetryState.SIGNAL]:
        problems.append(f"the incidents' telemetry is {states}; expected ['signal']")
    return problems


def _judge_hardware_alert(card: str | None, culprit: dict[str, Any]) -> list[str]:
    """The card lists the throttling alert on the culprit's GPU, still firing, in the section of
    its own."""
    paragraphs = (card or "").split("\n\n")
    section = next((p for p in paragraphs if p.startswith(HARDWARE_ALERTS_HEADING)), None)
    if section is None:
        return ["the card has no HARDWARE ALERTS section"]
    uuid = culprit["gpu_uuid"]
    if not any(
        "hardware_throttling on GPU" in entry and uuid in entry and "still firing" in entry
        for entry in _entries(section)
    ):
        return [f"the card's HARDWARE ALERTS do not list the throttling alert on {uuid} firing"]
    return []


def _entries(paragraph: str) -> list[str]:
    """A card paragraph's entries, each a line indented two and the deeper lines under it (what
    it continues onto, wrapped, and its details), as one line."""
    entries: list[list[str]] = []
    for line in paragraph.splitlines()[1:]:
        if (line.startswith("  ") and not line.startswith("   ")) or not entries:
            entries.append([])
        entries[-1].append(line.strip())
    return [" ".join(entry) for entry in entries]


def labelled(text: str | None, label: str) -> str | None:
    """What follows `label` on the first line of `text` that starts with it."""
    for line in (text or "").splitlines():
        if line.startswith(label):
            return line.removeprefix(label)
    return None


def heading_advice(text: str | None) -> str | None:
    """The advice a card or `sdc show` heads its recommendation with, as `Advice` spells it."""
    found = labelled(text, RECOMMENDATION_HEADING)
    return found.strip().lower() if found is not None else None


def last_waiting_event(
    lifecycle: Sequence[dict[str, Any]], incident_id: str
) -> dict[str, Any] | None:
    """The incident's last lifecycle event into awaiting_approval (None: it never waited)."""
    waiting = [
        event
        for event in lifecycle
        if event["incident_id"] == incident_id
        and event["new_state"] == IncidentState.AWAITING_APPROVAL
    ]
    return waiting[-1] if waiting else None


def event_advice(lifecycle: Sequence[dict[str, Any]], incident_id: str) -> str | None:
    """The advice of the incident's last lifecycle event into awaiting_approval."""
    event = last_waiting_event(lifecycle, incident_id)
    recommendation = event.get("recommendation") if event else None
    return recommendation.get("advice") if recommendation else None


def one_recommendation(said: dict[str, dict[str, str | None]]) -> list[str]:
    """Every surface an approver or a paging tool reads says the stored recommendation."""
    problems = []
    for incident_id, surfaces in said.items():
        stored = surfaces.get("stored record")
        if stored is None:
            problems.append(f"{incident_id} waited for approval with no stored recommendation")
            continue
        differ = {where: advice for where, advice in surfaces.items() if advice != stored}
        if differ:
            problems.append(
                f"{incident_id}: the stored recommendation is {stored!r}, but "
                + ", ".join(f"the {where} says {advice!r}" for where, advice in differ.items())
            )
    return problems


def card_deadline(text: str | None) -> str | None:
    """The deadline a card's `DECIDE BY:` line gives, as `deadline_words` spells it."""
    found = labelled(text, DEADLINE_LABEL)
    return found.split(";", 1)[0].strip() if found is not None else None


def shown_deadline(text: str | None) -> str | None:
    """The deadline `sdc show` gives in its `decide by` field."""
    for line in (text or "").splitlines():
        name, _, value = line.strip().partition("  ")
        if name == "decide by":
            return value.strip()
    return None


def event_deadline(lifecycle: Sequence[dict[str, Any]], incident_id: str) -> str | None:
    """The deadline of the incident's last lifecycle event into awaiting_approval, worded."""
    event = last_waiting_event(lifecycle, incident_id)
    found = event.get("approval_deadline") if event else None
    if not found:
        return None
    return deadline_words(ApprovalDeadline(found["expires_at"], found["time_zone"]))


def one_deadline(said: dict[str, dict[str, str | None]]) -> list[str]:
    """Every surface an approver or a paging tool reads gives the stored approval deadline."""
    problems = []
    for incident_id, surfaces in said.items():
        stored = surfaces.get("stored record")
        if stored is None:
            problems.append(f"{incident_id} waited for approval with no stored deadline")
            continue
        differ = {where: when for where, when in surfaces.items() if when != stored}
        if differ:
            problems.append(
                f"{incident_id}: the stored approval deadline is {stored!r}, but "
                + ", ".join(f"the {where} says {when!r}" for where, when in differ.items())
            )
    return problems


def card_leads(
    heads: dict[str, list[str]],
    advice: dict[str, dict[str, str | None]],
    deadlines: dict[str, dict[str, str | None]],
) -> list[str]:
    """Each approval card's first five lines hold the stored recommendation and the stored
    deadline (an approver decides from them)."""
    problems = []
    for incident_id, head in heads.items():
        stored = advice.get(incident_id, {}).get("stored record")
        if stored is None or f"{RECOMMENDATION_HEADING}{stored.upper()}" not in head:
            problems.append(
                f"{incident_id}: the card's first five lines do not hold the recommendation "
                f"{stored!r}"
            )
        when = deadlines.get(incident_id, {}).get("stored record")
        if when is None or card_deadline("\n".join(head)) != when:
            problems.append(
                f"{incident_id}: the card's first five lines do not hold the deadline {when!r}"
            )
    return problems
