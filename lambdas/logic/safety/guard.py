"""When the pipeline must not act: the pause switch, the storm hold and the blast-radius guard.

- Pause switch: one SSM parameter (`PAUSE_PARAMETER`) an operator flips without a deploy.
  `false` = running; `true` = paused; any other value, or a switch that cannot be read, counts as
  paused (fail closed: nothing acts on an unknown switch). Paused: new incidents are recorded as
  `held` and notified; steps that would act (start a health check, replace a node) hold instead.
- Alarm mute rules: a contributor alarm that arrives with `muteDetail` (a CloudWatch alarm mute
  rule mutes the alarm's actions, and this pipeline is one) is held as if paused, the rule
  named; only the incident that alarm would open, for as long as the mute window lasts.
- Storm hold: every claim flags the nodes it asks to act on (a report's culprits and
  confirmed suspects, a hardware alert's node, a job-level report's nodes), only once HyperPod
  and the orchestrator confirmed them, at the pipeline's own clock. A contributor alarm flags
  nothing: any pod can put the metric's datapoint with any InstanceId dimension, so a few
  datapoints from one pod would otherwise hold a cluster; a genuine storm's nodes are named by
  their reports (`sdc_remediation.lambdas.models.claim.SPENDS`). When `STORM_THRESHOLD`
  distinct instances of one cluster are flagged within `STORM_WINDOW_SECONDS`, that is a software or
  recipe problem, not hardware: the cluster gets one storm hold (a conditional write, so one
  hold and one notification however many alarms race), every new incident is held without a
  notification of its own, and in-flight incidents hold at their next acting step. Evidence no
  training pod can send (`TriggerSource.trusted`: a hardware alert, an idle sweep's failed
  check) is held only by a storm its own kind made (`storm_blocker`): a storm of forged reports
  holds no hardware alert, no sweep and no incident such evidence opened. Only an
  audited reset lifts it: the approval state machine with `{"incident_id": "<hold id>",
  "decision": "reset"}`; flags from before the reset no longer count.
- Blast-radius guard: it counts nodes. At most `open_limit(nodes)` guard slots per cluster are
  taken, one per node an open incident acts on (a job-level incident one per node it would
  cordon and health-check), atomically with the incident; beyond it a new incident is recorded
  as `held` and notified, and a job-level incident that names more nodes than the limit is held
  before anything acts (`too_many_nodes`).

    open_limit(N) = max(1, min(GUARD_MAX_OPEN_NODES, ceil(N * GUARD_MAX_OPEN_PERCENT / 100), N - 1))

  Rounding up lets every cluster have one (3 nodes at 10 % → 1); N - 1 keeps one node of a
  small cluster out of remediation (2 nodes → 1); a one-node cluster still allows its one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step, publish_with_retries
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import ConditionFailed
from sdc_remediation.lambdas.models.events import MuteDetail
from sdc_remediation.lambdas.models.guard import ClusterHold, HoldKind, HoldRecord, reads_as_paused
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.models.writes import Created, HoldExists
from sdc_remediation.lambdas.observability import count, logger
from sdc_remediation.lambdas.wording import cards, chat

FLAG_TTL = timedelta(days=2)


@dataclass(frozen=True, slots=True)
class Blocker:
    """Why nothing may act on a cluster (or, for a muted alarm, on its incident) right now."""

    kind: HoldKind
    reason: str
    hold_id: str | None = None
    mute: dict[str, str] | None = None
    """The alarm mute rule of a muted alarm (`MuteDetail.to_json`)."""
    window_notice: bool = False
    """A rate-held incident that is its cluster's first of the minute: its held notice is the
    minute's one notice (the others rate-held then get none)."""

    def record(self) -> HoldRecord:
        return HoldRecord(self.kind, self.reason, self.hold_id, **(self.mute or {}))


def too_many_nodes(incident: Incident, limit: int, node_count: int | None) -> Blocker:
    """A job-level incident that would act on more nodes than the guard allows at all: held
    before anything is cordoned or health-checked."""
    return Blocker(
        HoldKind.GUARD,
        f"blast-radius guard: the job-level incident names {len(incident.instance_ids)} nodes, "
        f"at most {limit} may be acted on at once on {incident.cluster_name} "
        f"({node_count or 'an unknown number of'} nodes); every node counts",
    )


def open_limit(node_count: int | None, settings: Settings) -> int:
    """How many nodes of a cluster with `node_count` nodes open incidents may act on at once."""
    if not node_count or node_count < 1:
        return settings.guard_max_open_nodes
    by_share = math.ceil(node_count * settings.guard_max_open_percent / 100)
    return max(1, min(settings.guard_max_open_nodes, by_share, node_count - 1))


def pause_blocker(deps: Deps) -> Blocker | None:
    name = deps.settings.pause_parameter
    try:
        value = deps.switch.read()
    except Exception as err:
        logger.warning("pause switch unreadable", parameter=name, error=str(err))
        return Blocker(
            HoldKind.PAUSED,
            f"the pause switch {name} could not be read ({type(err).__name__}: {err}); "
            "nothing acts while it cannot be read",
        )
    if value is None or not reads_as_paused(value):
        return None
    if value.strip().lower() == "true":
        return Blocker(HoldKind.PAUSED, f"the pipeline is paused (pause switch {name} is true)")
    return Blocker(
        HoldKind.PAUSED,
        f"the pause switch {name} holds {value[:50]!r}, neither 'true' nor 'false': "
        "counted as paused",
    )


def mute_blocker(alarm_name: str, mute: MuteDetail) -> Blocker:
    """A contributor alarm whose actions an alarm mute rule mutes: the pipeline is one of those
    actions (EventBridge delivers the event anyway), so its incident is held, as paused."""
    return Blocker(
        HoldKind.MUTED,
        f"the actions of alarm {alarm_name} are muted by alarm mute rule {mute.rule_name} "
        f"from {mute.window_start.isoformat()} to {mute.window_end.isoformat()}; a muted "
        "alarm holds its incident, as the pause switch does",
        mute=mute.to_json(),
    )


def storm_blocker(deps: Deps, cluster_name: str, *, trusted: bool = False) -> Blocker | None:
    """The cluster's storm hold, if it holds this: evidence from a trusted source
    (`TriggerSource.trusted`) is held only by a storm its own kind made (`trusted_at`: trusted
    flags alone reached the storm rule, `flag`); a storm of forged reports, however many nodes
    they name, holds no hardware alert and no sweep failure."""
    hold = deps.guard.active_hold(cluster_name)
    if hold is None:
        return None
    if trusted and hold.trusted_at is None:
        return None
    return Blocker(HoldKind.STORM, f"storm hold {hold.hold_id}: {hold.reason}", hold.hold_id)


def blocker(deps: Deps, cluster_name: str, *, trusted: bool = False) -> Blocker | None:
    """What stops acting on the cluster now: its storm hold first (`storm_blocker`: `trusted`
    for evidence no training pod can speak for), then the pause switch."""
    return storm_blocker(deps, cluster_name, trusted=trusted) or pause_blocker(deps)


def flag(
    step: Step, cluster_name: str, instance_ids: Sequence[str], *, trusted: bool
) -> ClusterHold | None:
    """Flag the instances for storm detection; returns the cluster's active storm hold, started
    here when these flags reach the threshold. The hold's one notification goes out here.

    Flagged at the pipeline's own clock, never a time the event carries (a reporter sets its
    report's `emitted_at`, and `PutEvents` lets it set the event's time): a report dated ahead
    cannot keep its flags inside every future window, nor one dated back stay out of all.
    Callers flag only instances HyperPod confirmed are nodes of the cluster; `trusted`: the
    claim comes from a source no training pod can speak for (`storm_blocker`)."""
    deps = step.deps
    settings = deps.settings
    flagged_at = int(deps.clock.now().timestamp())
    for instance_id in instance_ids:
        deps.guard.flag_instance(
            cluster_name,
            instance_id,
            flagged_at,
            flagged_at + int(FLAG_TTL.total_seconds()),
            trusted=trusted,
        )
    hold = deps.guard.active_hold(cluster_name)
    state = deps.guard.guard_state(cluster_name)
    since = flagged_at - settings.storm_window_seconds
    if state.storm_reset_at is not None:
        since = max(since, state.storm_reset_at)
    if hold is None:
        flagged = deps.guard.flagged_instances(cluster_name, since)
        if len(flagged) < settings.storm_threshold:
            return None
        hold = _start_hold(step, cluster_name, sorted(flagged), list(state.open_ids))
        if hold is None:
            return None
    if trusted and hold.trusted_at is None:
        hold = _trusted_storm(step, hold, since)
    notify_storm(step, hold)
    return hold


def _trusted_storm(step: Step, hold: ClusterHold, since: int) -> ClusterHold:
    """The hold, noted as made by trusted flags (`trusted_at`) when they alone meet the storm
    rule in the window ending now. Judged here, one window at a time, never over the hold's
    whole life: alerts spread over the days a report storm holds the cluster make no storm."""
    deps = step.deps
    flagged = deps.guard.flagged_instances(hold.cluster_name, since, trusted_only=True)
    if len(flagged) < deps.settings.storm_threshold:
        return hold
    for _ in range(3):  # a racing save (the notification's claim, another trusted flag)
        noted = replace(hold, trusted_at=step.now())
        try:
            deps.guard.save_hold(noted)
        except ConditionFailed:
            again = deps.guard.active_hold(hold.cluster_name)
            if again is None or again.hold_id != hold.hold_id or again.trusted_at is not None:
                return again or hold
            hold = again
            continue
        logger.warning(
            "storm hold holds trusted evidence now", hold_id=hold.hold_id, flagged=len(flagged)
        )
        if noted.notified:  # its notice said hardware alerts and sweeps still act
            _widened(step, noted, sorted(flagged))
        return noted
    return hold


def _widened(step: Step, hold: ClusterHold, trusted: list[str]) -> None:
    """A hold that reports and alarms made now holds hardware alerts and sweeps too: audited,
    and its notice sent again (it says every incident is held now), so nobody reads the first
    one's "hardware alerts still act" as still true."""
    step.audit(
        hold.hold_id,
        AuditAction.STORM_HOLD_WIDENED,
        {
            "cluster_name": hold.cluster_name,
            "trusted_instances": trusted[:100],
            "flagged": len(trusted),
            "threshold": hold.threshold,
        },
    )
    _storm_notice(step, hold)


def _start_hold(
    step: Step, cluster_name: str, flagged: list[str], open_ids: list[str]
) -> ClusterHold | None:
    settings = step.deps.settings
    hold = ClusterHold(
        hold_id=ids.hold_id(cluster_name, step.deps.clock.now()),
        cluster_name=cluster_name,
        reason=(
            f"{len(flagged)} distinct instances flagged within {settings.storm_window_seconds} s "
            f"(threshold {settings.storm_threshold}): a software or recipe problem, not hardware"
        ),
        created_at=step.now(),
        instances=flagged[:100],
        threshold=settings.storm_threshold,
        window_seconds=settings.storm_window_seconds,
    )
    match step.deps.guard.create_hold(hold):
        case HoldExists():
            return step.deps.guard.active_hold(cluster_name)
        case Created():
            return _started(step, hold, flagged, open_ids)


def _started(step: Step, hold: ClusterHold, flagged: list[str], open_ids: list[str]) -> ClusterHold:
    step.audit(
        hold.hold_id,
        AuditAction.STORM_HOLD_STARTED,
        {
            "cluster_name": hold.cluster_name,
            "reason": hold.reason,
            "instances": flagged[:100],
            "flagged": len(flagged),
            "threshold": hold.threshold,
            "window_seconds": hold.window_seconds,
            "open_incidents": open_ids,
        },
    )
    count(M.STORM_HOLDS)
    logger.warning("storm hold started", hold_id=hold.hold_id, cluster_name=hold.cluster_name)
    return hold


def notify_storm(step: Step, hold: ClusterHold) -> None:
    """The hold's one notification: claimed on the hold record first (a conditional save), so
    racing alarms send it once; a failed publish gives the claim back for the next alarm."""
    if hold.notified:
        return
    hold.notified = True
    try:
        step.deps.guard.save_hold(hold)
    except ConditionFailed:
        return  # another invocation claimed it
    if not _storm_notice(step, hold):
        hold.notified = False
        step.deps.guard.save_hold(hold)


def _storm_notice(step: Step, hold: ClusterHold) -> bool:
    """The hold's notice, naming the incidents open now, published and audited
    (`storm_notified`); whether it went out."""
    open_ids = list(step.deps.guard.guard_state(hold.cluster_name).open_ids)
    notice = cards.storm_notice(hold, step.deps.settings, open_ids)
    return _publish(
        step,
        hold,
        notice,
        NoticeKind.STORM_HOLD,
        AuditAction.STORM_NOTIFIED,
        open_incidents=open_ids,
    )


def _publish(
    step: Step,
    hold: ClusterHold,
    notice: cards.Card,
    kind: NoticeKind,
    action: AuditAction,
    **details: Any,
) -> bool:
    """Publish a notice about the hold and audit it as `action`; a failed publish is audited
    (`notification_failed`), never raised; it is retried with backoff first (`publish_with_retries`).
    Returns whether it went out."""
    delivered, request_id = publish_with_retries(
        step,
        hold.hold_id,
        kind,
        lambda: step.deps.notifier.publish(
            notice.subject,
            notice.text,
            {"incident_id": hold.hold_id, "kind": kind, "cluster": hold.cluster_name},
            chat.hold_notice(kind, hold, notice.subject, notice.text),
        ),
    )
    if not delivered:
        return False
    step.audit(hold.hold_id, action, {"subject": notice.subject, **details}, [request_id])
    return True


def lift(step: Step, hold: ClusterHold, actor: str, comment: str) -> ClusterHold:
    """End the storm hold (the reset decision): audited, notified; flags up to now stop
    counting. Raises ConditionFailed when the hold changed meanwhile."""
    hold.lifted_at = step.now()
    hold.lifted_by = actor
    hold.comment = comment
    step.deps.guard.lift_hold(hold, int(step.deps.clock.now().timestamp()))
    step.audit(
        hold.hold_id,
        AuditAction.STORM_HOLD_RESET,
        {"cluster_name": hold.cluster_name, "comment": comment},
        actor=actor,
    )
    count(M.STORM_HOLDS_RESET)
    _publish(
        step,
        hold,
        cards.hold_lifted_notice(hold),
        NoticeKind.STORM_HOLD_RESET,
        AuditAction.RESET_NOTIFIED,
    )
    return hold


def hold_in_flight(step: Step, incident: Incident, blocker: Blocker) -> None:
    """Record why an open incident stops before acting; the state machine closes it as held."""

    def note(current: Incident) -> bool:
        current.hold = blocker.record()
        current.reason = blocker.reason
        return True

    step.update(incident.incident_id, note, incident)
    step.audit(
        incident.incident_id, AuditAction.HELD, {**blocker.record().to_record(), "step": step.actor}
    )
    count(M.INCIDENTS_HELD_IN_FLIGHT)
    logger.info("incident held", incident_id=incident.incident_id, kind=blocker.kind)
