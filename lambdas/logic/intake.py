"""Events in: every trigger is a claim, and every claim takes one path, in one order.

A contributor alarm, an SDC or training-watch report, a hardware alert (and a person's
`proceed`, `sdc_remediation.lambdas.logic.opening.proceeding`) each says something about nodes of a cluster that
the pipeline cannot authenticate: a training pod can put any metric datapoint and send any
report. Each trigger kind is only a parser into the same typed claim
(`sdc_remediation.lambdas.models.claim`), written beside its entry below (`of_alarm`, `of_report`,
`of_alerts`; the idle sweep's `sdc_remediation.lambdas.logic.sweep.claim.of_sweep`), and what its
confirmed claims may spend is one row of `SPENDS`. `take` runs every claim through the same
stages (`Stage`), in this order:

1. BOUND: a claim asks about a few nodes at most (`claims.MAX_ASKED`; a hardware notification
   one node, as the alert manager groups them): a forged claim buys one DescribeCluster, a few
   DescribeClusterNode calls and a few records, however many nodes it names;
2. CONFIRM: every node it names against HyperPod (a node of that cluster, not its Slurm
   controller) and the orchestrator (Kubernetes by providerID, with `sdc:jobPods` the job's
   pods on it; Slurm's host names): `claims.confirm`. A node it names by name only (an alert's
   `ip-…` host) is resolved by the orchestrator. What is not confirmed is refused here, before
   it can spend anything. A report is stored under the nodes it is confirmed for, and only
   those (`keep`); an alarm brings the node's stored reports the orchestrator still confirms,
   those pointing at the node read apart from those naming it involved (an unconfirmed or a
   weaker report never displaces confirmed evidence);
3. BUDGET: only now, on confirmed nodes: the storm flags of the claim's nodes, all at once (a
   report naming a storm's worth of culprits holds them all under one storm hold; an alarm
   flags nothing, see `SPENDS`), then per incident: an open or still-held incident
   joins the evidence and spends nothing, else the storm hold, the alarm's mute rule or the
   pause switch holds it, else the rate bound takes an opening;
4. JUDGE: the one policy's course for the drafted incident (`course_of`);
5. ACT: open (with the blast-radius guard's slots), join, hold or refuse (`opening.incidents`,
   `opening.holding`, `opening.arrivals`);
6. AUDIT: each act writes its entry; the trail (`opening.trail`) names the stages each node
   passed and what was audited.

A held incident is closed at birth, so it takes no open lock; a node-level one takes a held
lock on its instance instead, valid for STORM_WINDOW_SECONDS: whatever else arrives for the
instance in that window that the hold would hold too joins the held incident (a notice holds
only what is no stronger than a notice). After the window, or once the storm hold is reset or
the pause switch is back to false, or the rate bound's minute is over, a new trigger is judged
afresh; a rate-held incident's notice says so.

An event without the documented shape never gets that far: its handler fails to parse it and
calls `refuse`, then raises the error again, so the event lands in the function's dead-letter
queue with the error, and the audit log names the bad field under the event's id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, NoReturn

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step, error_details, mark_audited, was_audited
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.recommendation import report_row
from sdc_remediation.lambdas.logic.opening import claims, incidents
from sdc_remediation.lambdas.logic.opening.claims import Checked
from sdc_remediation.lambdas.logic.opening.trail import IntakeStep, passed
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import guard, rate
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.claim import (
    RATED,
    SPENDS,
    Claim,
    JobClaim,
    NodeClaim,
    Spends,
    Stage,
)
from sdc_remediation.lambdas.models.errors import ClusterNotFound, MalformedEvent
from sdc_remediation.lambdas.models.events import ContributorEvent
from sdc_remediation.lambdas.models.evidence import (
    Evidence,
    HardwareEvidence,
    ReportEvidence,
    TriggerSource,
)
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.hardware_alert import (
    AlertNotification,
    AlertStatus,
    sns_message_id,
)
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import (
    OpenAction,
    OpenIncidentResult,
    StoreReportResult,
)
from sdc_remediation.lambdas.models.report import ReportEvent, SdcReport
from sdc_remediation.lambdas.models.reporter_text import clean
from sdc_remediation.lambdas.observability import count, logger
from trainer_emitter.contract import REPORT_SOURCE

REPORT_TTL = timedelta(days=14)
MAX_AHEAD = timedelta(minutes=5)
"""How far ahead of the pipeline's clock a report's `emitted_at` may be (clock skew between
nodes); a report dated further ahead is refused."""
ALERT_SOURCE = "aps.hardware-alert"
"""How the audit names where a hardware alert came from (the workspace's alert manager)."""
MAX_ALERT_NODES: Final = 1
"""The nodes one hardware notification is taken for: the alert manager groups its alerts per
node (`sdc_remediation.infra.stack.alert_manager.GROUP_BY`), so a genuine one names one; the alerts of any
other node it names are audited once and taken no further (one message cannot storm-hold a
cluster)."""


# -- the one path ------------------------------------------------------------------------------


def take(step: Step, claim: Claim) -> list[OpenIncidentResult]:
    """The one path of every claim, stage by stage (see the module docstring); each node's
    result (a node naming no instance, or only joining where nothing is open, has none)."""
    claim = bound(step, claim)  # 1. BOUND
    checked = confirm(step, claim)  # 2. CONFIRM
    keep(step, claim, checked)
    spends = SPENDS[claim.source]
    flag(step, claim, checked, spends)  # 3. BUDGET (the claim's storm flags, all at once)
    if claim.job_level:  # 3.-6. per incident: BUDGET, JUDGE, ACT, AUDIT
        return incidents.take_job(step, claim, checked, spends)
    results = [incidents.take_node(step, claim, checked, f, spends) for f in checked.nodes]
    return [r for r in results if r is not None]


def bound(step: Step, claim: Claim) -> Claim:
    """The claim cut to the nodes it may ask about: its first MAX_ASKED distinct nodes that ask
    for an incident (a hardware notification: its first node's alerts only), and of a
    node-level claim its first MAX_ASKED distinct nodes that only join an open incident (a
    report's involved instances: each is looked up for one); the rest are audited once under
    the event and taken no further. A report's instance named again (the schema lets a report
    repeat one 2048 times) is taken once, as first named."""
    seen: list[str] = []
    joining: list[str] = []
    kept: list[NodeClaim] = []
    left_out: list[str] = []
    taken: set[str] = set()
    most = MAX_ALERT_NODES if claim.source is TriggerSource.HARDWARE else claims.MAX_ASKED
    for node in claim.nodes:
        key = node.instance_id or node.node_name or ""
        if claim.report is not None and key in taken:
            continue  # a report names an instance once: a repeat of it is taken no further
        taken.add(key)
        limited = (node.opens and not claim.job_level) or claim.source is TriggerSource.HARDWARE
        if limited and key not in seen:
            if len(seen) >= most:
                left_out.append(key)
                continue
            seen.append(key)
        elif limited and key in left_out:
            continue
        elif not limited and not claim.job_level:
            if len(joining) >= claims.MAX_ASKED:
                left_out.append(key)
                continue
            joining.append(key)
        kept.append(node)
    if left_out:
        step.audit(
            ids.event_subject(claim.event_id),
            AuditAction.EVENT_IGNORED,
            {
                "reason": f"the {claim.source.value} names more than {most} node(s) to act on "
                f"or more than {claims.MAX_ASKED} to join: the others are not asked about, "
                "flagged, opened or joined",
                "cluster_name": claim.cluster_name,
                "left_out": [clean(k, 253) for k in left_out[:20]],
                "left_out_count": len(left_out),
            },
        )
        count(M.EVENTS_IGNORED)
    passed(step, Stage.BOUND, named=len(claim.nodes), kept=len(kept), left_out=len(left_out))
    if any(n.opens for n in kept):
        step.deps.settings.require_state_machine_arn()
    return dataclasses.replace(claim, nodes=tuple(kept))


def confirm(step: Step, claim: Claim) -> Checked:
    """`claims.confirm`, on the trail; an error beyond "not found" is audited as
    `open_failed` under the event, then raised (the event is retried)."""
    try:
        checked = claims.confirm(step, claim)
    except Exception as err:
        _open_failed(step, claim, err)
        raise
    passed(
        step,
        Stage.CONFIRM,
        confirmed=[c.instance_id for c in checked.nodes if c.confirmed],
        unconfirmed={str(c.instance_id): c.why_not for c in checked.nodes if not c.confirmed},
    )
    return checked


def keep(step: Step, claim: Claim, checked: Checked) -> None:
    """A report, stored under each node CONFIRM confirmed its claim for (where the node's
    alarms and a retake read it back), and nowhere else: a node it invents, names wrongly or
    names involved only in a report that points elsewhere keeps nothing of it, so forged
    reports cost no records and never reach a genuine alarm's evidence. Stored as pointing at
    the node (`pointing`) only when its own evidence there proposes more than a health check."""
    report = claim.report
    if report is None or report.received_at is None:
        return
    expires_at = int((datetime.fromisoformat(report.received_at) + REPORT_TTL).timestamp())
    confirmed: dict[str, NodeClaim] = {}
    for c in checked.nodes:
        if c.confirmed and c.instance_id:
            confirmed.setdefault(c.instance_id, c.claim)
    stored: list[str] = []
    for instance_id, node in confirmed.items():
        kind = pointing(report, instance_id, node.item)
        if step.deps.reports.put_report(report, instance_id, expires_at, pointing=kind):
            stored.append(instance_id)
        else:
            _same_report(step, claim, report, instance_id)
    if isinstance(step, IntakeStep):
        step.stored.extend(stored)
    if not stored:
        return
    step.audit(
        ids.event_subject(claim.event_id),
        AuditAction.REPORT_STORED,
        {
            "report_id": report.report_id,
            "cluster_name": report.cluster_name,
            "instances": stored,
            "check": report.check,
            "step": report.step,
            "ambiguous": report.ambiguous,
        },
    )
    count(M.REPORTS_STORED)


def _same_report(step: Step, claim: Claim, report: SdcReport, instance_id: str) -> None:
    """A report already stored under the node is a redelivery of it (the same detail); another
    report under its id is refused (audited under the event, counted, raised: the event is
    retried, then kept in the dead-letter queue), as the stored copy is what a retake, a
    `proceed` and the node's alarms read in its stead."""
    first = step.deps.reports.stored_report(
        report.cluster_name, instance_id, report.received_at or "", report.report_id
    )
    if first is None or first.detail == report.detail:
        return
    err = MalformedEvent(
        "detail.report_id",
        f"report {clean(report.report_id, 100)} was received before with other content (a "
        "report id names one report)",
    )
    _refuse_report(step, claim.event_id, report.report_id, err)


def pointing(report: SdcReport, instance_id: str, item: Evidence) -> bool:
    """The report points at the instance: it names it a culprit or confirmed suspect
    (`SdcReport.points_at`) and its evidence there (`item`, its summary for the instance), read
    by the decision table, proposes more than a health check. A role alone is a claim: a
    straggler on the node, or a check whose evidence names no rank there, is no stronger than
    a report naming the node involved, and is stored with those."""
    if not report.points_at(instance_id) or not isinstance(item, ReportEvidence):
        return False
    row, _ = report_row(item)
    return row.proposes_recovery


def flag(step: Step, claim: Claim, checked: Checked, spends: Spends) -> None:
    """The claim's confirmed nodes that ask for an incident, flagged for the storm rule at
    once, before any opens (for the trigger kinds whose nodes count toward it)."""
    if not spends.storm:
        return
    confirmed = [c.instance_id for c in checked.nodes if c.confirmed and c.instance_id]
    if confirmed:
        unique = list(dict.fromkeys(confirmed))
        guard.flag(step, claim.cluster_name, unique, trusted=claim.source.trusted)


def _open_failed(step: Step, claim: Claim, err: Exception) -> None:
    """The claim's failure in the audit log (`open_failed` under its event, with its first
    node's evidence), unless audited already; a failing audit log is logged and never hides
    `err`."""
    if was_audited(err):
        return
    subject = ids.event_subject(claim.event_id)
    first = claim.nodes[0] if claim.nodes else None
    key = "alert" if claim.source is TriggerSource.HARDWARE else "evidence"
    evidence = {key: first.item.to_record()} if first else {}
    try:
        step.audit(
            subject,
            AuditAction.OPEN_FAILED,
            error_details(
                err,
                source=claim.source,
                cluster_name=claim.cluster_name,
                instance_id=first.instance_id if first else None,
                **evidence,
            ),
            [getattr(err, "request_id", None)],
        )
    except Exception:
        logger.exception("could not audit the failed claim", event_id=claim.event_id)
        return
    mark_audited(err, AuditAction.OPEN_FAILED, subject)


# -- a claim the rate bound held, once its minute is over -------------------------------------

RETAKE_WITHIN: Final = timedelta(minutes=15)
"""How long after it was held a rate-held incident is still taken again (by reconciliation);
older ones are left to the next trigger for their node."""


def due_again(held: Incident, now: datetime) -> datetime | None:
    """When the rate bound's minute that held `held` freed (the start of the next minute), if
    it has and the incident is to be taken again now; else None."""
    if held.hold_kind != HoldKind.RATE or held.is_job or not held.closed_at:
        return None
    closed = datetime.fromisoformat(held.closed_at)
    freed = closed.replace(second=0, microsecond=0) + timedelta(seconds=rate.WINDOW_SECONDS)
    if not freed <= now < closed + RETAKE_WITHIN:
        return None
    return freed


def again_id(deps: Deps, held: Incident, freed: datetime) -> str:
    """The incident its claim asks for when it is taken again (the same every time, whatever
    else is dated `freed`: `incidents.node_incident_id`)."""
    claim = of_rate_held(held, None, freed)
    if claim is None:
        return ids.incident_id(held.cluster_name, held.instance_id, freed)
    key = claim.nodes[0].item.key
    return incidents.node_incident_id(deps, held.cluster_name, held.instance_id, freed, key)


def retake(deps: Deps, held: Incident, freed: datetime) -> list[OpenIncidentResult]:
    """A confirmed claim the rate bound held, judged again down the one path once the budget
    freed (HyperPod and the orchestrator asked again, the budget spent again: over the bound
    again, it is held again)."""
    step = IntakeStep(deps, "reconcile")
    report = claims.reported(deps, held, [held.instance_id])
    claim = of_rate_held(held, report, freed)
    if claim is None or (claim.source is TriggerSource.REPORT and report is None):
        return []
    return take(step, claim)


def of_rate_held(held: Incident, report: SdcReport | None, freed_at: datetime) -> Claim | None:
    """A node-level incident the rate bound held, as the claim it was, taken again once its
    minute is over (`retake`): at the start of the next minute, so however
    often it is taken again it asks for the same incident. None when it is not one (a job-level
    incident, evidence of no kind that spends the bound). Its trusted evidence first (a hardware
    alert that joined a held report): the claim is then the alert's, which a storm of reports
    does not hold (`sdc_remediation.lambdas.logic.safety.guard.storm_blocker`)."""
    rated = [e for e in held.items if e.kind in RATED]
    item = next((e for e in rated if e.trusted), None) or next(iter(rated), None)
    if held.is_job or item is None:
        return None
    source = item.kind
    if source is not TriggerSource.REPORT:
        report = None
    node_name, metric = None, None
    if isinstance(item, HardwareEvidence):
        node_name, metric = item.node_name, item.rule.value
    elif isinstance(item, ReportEvidence):
        metric = next(iter(item.metrics), None)
    return Claim(
        source=source,
        cluster_name=held.cluster_name,
        event_id=f"again-{held.incident_id}",
        at=freed_at,
        nodes=(
            NodeClaim(
                item,
                held.instance_id,
                node_name=node_name,
                metric=metric,
            ),
        ),
        job=JobClaim.NAMED if report is not None else JobClaim.NONE,
        job_name=report.job_name if report is not None else None,
        report=report,
    )


# -- alarms ------------------------------------------------------------------------------------


def open_incident(alarm: ContributorEvent, deps: Deps) -> OpenIncidentResult:
    """One contributor alarm → at most one open incident per (cluster, instance).

    OK-state events and clusters outside ALLOWED_CLUSTERS are ignored (audited under the event);
    otherwise the alarm is a claim on the one path (`take`): an instance HyperPod does not know
    is recorded as a skipped incident; an alarm for an instance with an open incident (node- or
    job-level) attaches to it. The remediation execution is named after the incident, so it is
    started once however often the event is delivered.
    """
    step = IntakeStep(deps, "open_incident")
    if not alarm.is_alarm:
        return _ignore(step, alarm, f"contributor state is {alarm.state}, not ALARM")
    if alarm.cluster_name not in deps.settings.allowed_clusters:
        return _ignore(step, alarm, f"cluster {alarm.cluster_name} is not in ALLOWED_CLUSTERS")
    (result,) = take(step, of_alarm(alarm))
    return result


def of_alarm(alarm: ContributorEvent) -> Claim:
    item = summaries.alarm_evidence(alarm)
    return Claim(
        source=TriggerSource.ALARM,
        cluster_name=alarm.cluster_name,
        event_id=alarm.event_id,
        at=alarm.state_at,
        nodes=(NodeClaim(item, alarm.instance_id, metric=alarm.metric.value),),
        job=JobClaim.ANY,
        mute=alarm.mute,
        alarm_name=alarm.alarm_name,
    )


def _ignore(step: Step, alarm: ContributorEvent, reason: str) -> OpenIncidentResult:
    step.audit(
        ids.event_subject(alarm.event_id),
        AuditAction.EVENT_IGNORED,
        {
            "reason": reason,
            "cluster_name": alarm.cluster_name,
            "instance_id": alarm.instance_id,
            "alarm": summaries.alarm_evidence(alarm).to_record(),
        },
    )
    count(M.EVENTS_IGNORED)
    logger.info("event ignored", event_id=alarm.event_id, reason=reason)
    return {"incident_id": None, "action": OpenAction.IGNORED}


# -- reports -----------------------------------------------------------------------------------


def store_report(event: ReportEvent, deps: Deps) -> StoreReportResult:
    """The report as a claim (`take`): stored under each node HyperPod and the orchestrator
    confirm it for (`keep`), a node-level incident per culprit or confirmed suspect they
    confirm, the involved instances' evidence attached to their open incidents, or, for an
    ambiguous report, one job-level incident for its confirmed involved instances.
    `stored`: it was stored under some node for the first time (False for a retry)."""
    step = IntakeStep(deps, "store_report")
    subject = ids.event_subject(event.event_id)
    received = deps.clock.now()
    if event.report.emitted > received + MAX_AHEAD:
        _refuse_ahead(step, event, received)
    report = dataclasses.replace(
        event.report,
        received_at=received.isoformat(),
        stale=received - event.report.emitted
        > timedelta(seconds=deps.settings.storm_window_seconds),
    )
    event = dataclasses.replace(event, report=report)
    reason = None
    if report.cluster_name not in deps.settings.allowed_clusters:
        reason = f"cluster {report.cluster_name} is not in ALLOWED_CLUSTERS"
    elif not report.instances:
        reason = "the report names no instance"
    else:
        reason = _more_than_nodes(step, report)
    if reason:
        step.audit(
            subject,
            AuditAction.REPORT_IGNORED,
            {"report_id": report.report_id, "cluster_name": report.cluster_name, "reason": reason},
        )
        count(M.REPORTS_IGNORED)
        return {"report_id": report.report_id, "stored": False, "incidents": []}

    results = take(step, of_report(event))
    logger.info(
        "report handled",
        report_id=report.report_id,
        stored=step.stored,
        incidents=len(results),
    )
    return {"report_id": report.report_id, "stored": bool(step.stored), "incidents": results}


def of_report(event: ReportEvent) -> Claim:
    """A report as received (`received_at` set): node-level for each instance it names, or one
    job-level claim over them for an ambiguous report."""
    report = event.report
    nodes = tuple(
        NodeClaim(
            summaries.report_evidence(report, i.instance_id),
            i.instance_id,
            opens=report.ambiguous or report.points_at(i.instance_id),
            metric=i.metrics[0].value if i.metrics else None,
        )
        for i in report.instances
    )
    return Claim(
        source=TriggerSource.REPORT,
        cluster_name=report.cluster_name,
        event_id=event.event_id,
        at=report.emitted,
        nodes=nodes,
        job=JobClaim.NAMED,
        job_name=report.job_name,
        report=report,
        job_level=report.ambiguous,
        job_item=summaries.report_evidence(report, None) if report.ambiguous else None,
    )


def _more_than_nodes(step: Step, report: SdcReport) -> str | None:
    """Why a report naming more distinct instances than its cluster has nodes (HyperPod's count)
    is ignored whole: no node is asked about, nothing stored, flagged or opened, one audit entry.
    None when it names no more than that, or HyperPod gives no count."""
    named = len({i.instance_id for i in report.instances})
    try:
        nodes = step.deps.hyperpod.describe_cluster(report.cluster_name).node_count
    except ClusterNotFound:
        return f"HyperPod does not know cluster {report.cluster_name}"
    if nodes is not None and named > nodes:
        return (
            f"the report names {named} instances; cluster {report.cluster_name} has {nodes} "
            "nodes: nothing it names is checked, stored or opened"
        )
    return None


def _refuse_ahead(step: Step, event: ReportEvent, received: datetime) -> NoReturn:
    """A report dated ahead of the pipeline's clock by more than MAX_AHEAD: refused (audited
    under the event, counted) and raised, so that the event is retried and then kept in the
    dead-letter queue (a node whose clock ran ahead loses nothing); nothing stored, flagged or
    opened."""
    report = event.report
    err = MalformedEvent(
        "detail.emitted_at",
        f"{report.emitted_at} is more than {int(MAX_AHEAD.total_seconds())} s ahead of the "
        f"time the pipeline received the report ({received.isoformat()})",
    )
    _refuse_report(step, event.event_id, report.report_id, err)


def _refuse_report(step: Step, event_id: str, report_id: str, err: MalformedEvent) -> NoReturn:
    """`err` audited as `event_refused` under the event, counted, and raised: the event is
    retried, then kept in the dead-letter queue."""
    step.audit(
        ids.event_subject(event_id),
        AuditAction.EVENT_REFUSED,
        error_details(err, source=REPORT_SOURCE, report_id=report_id),
    )
    count(M.EVENTS_REFUSED)
    logger.warning("report refused", report_id=report_id, field=err.field)
    raise err


# -- hardware alerts ----------------------------------------------------------------------------


def hardware_alerts(note: AlertNotification, deps: Deps) -> list[OpenIncidentResult]:
    """The alerts of one notification of the hardware alert topic, taken as one claim (`take`)
    about the node they name: on EKS `hyperpod-<instance id>` or the Kubernetes node (found by
    providerID), on Slurm the exporter's host (`ip-…`, HyperPod's PrivateDnsHostname). A firing
    alert opens the node's incident or attaches to the open one (one per cluster and instance);
    a resolved alert is recorded (on the open incident, else in the audit log) and closes
    nothing.

    The cluster is the notification's SNS attribute, which the stack fixes per workspace; an
    alert whose own `cluster` label differs is refused (raised: the message lands in the failure
    queue), a cluster outside ALLOWED_CLUSTERS ignored. An alert that cannot be taken (Kubernetes
    or HyperPod unreachable while its node is resolved or checked, a table that fails) is
    audited as `open_failed` under the notification's event, then raised: SNS retries the
    message and then keeps it in the failure queue, and the audit log says why."""
    step = IntakeStep(deps, "store_report")
    subject = ids.event_subject(hardware_event_id(note))
    forged = [a.cluster_name for a in note.alerts if a.cluster_name != note.cluster_name]
    if forged:
        err = MalformedEvent(
            "Sns.Message.alerts.labels.cluster",
            f"an alert names cluster {clean(forged[0], 64)!r}; the workspace's "
            f"notification is for {note.cluster_name}",
        )
        step.audit(subject, AuditAction.EVENT_REFUSED, error_details(err, source=ALERT_SOURCE))
        count(M.EVENTS_REFUSED)
        raise err
    if note.cluster_name not in deps.settings.allowed_clusters:
        step.audit(
            subject,
            AuditAction.EVENT_IGNORED,
            {
                "reason": f"cluster {note.cluster_name} is not in ALLOWED_CLUSTERS",
                "cluster_name": note.cluster_name,
            },
        )
        count(M.EVENTS_IGNORED)
        return []
    claim = of_alerts(note, deps.clock.now())
    try:
        return take(step, claim)
    except Exception as err:
        _open_failed(step, claim, err)
        logger.warning(
            "hardware alert failed", message_id=note.message_id, error=type(err).__name__
        )
        raise


def of_alerts(note: AlertNotification, received: datetime) -> Claim:
    """The alerts of one notification, each about the node its series names; a resolved one
    opens nothing."""
    at = received.isoformat()
    return Claim(
        source=TriggerSource.HARDWARE,
        cluster_name=note.cluster_name,
        event_id=hardware_event_id(note),
        at=received,
        nodes=tuple(
            NodeClaim(
                summaries.hardware_evidence(a, at),
                a.claimed_instance,
                node_name=a.node_name,
                opens=a.status is AlertStatus.FIRING,
                metric=a.rule.value,
            )
            for a in note.alerts
        ),
    )


def hardware_event_id(note: AlertNotification) -> str:
    return f"sns-{clean(note.message_id, 100)}"


def refuse(event: Any, err: MalformedEvent, actor: str, deps: Deps) -> None:
    """An `event_refused` audit entry under the event's id naming the bad field, and the
    EventsRefused count."""
    raw = event if isinstance(event, Mapping) else {}
    message_id = sns_message_id(event)
    event_id = f"sns-{clean(message_id, 100)}" if message_id else raw.get("id")
    Step(deps, actor).audit(
        ids.event_subject(str(event_id)[:200] if event_id else "without-id"),
        AuditAction.EVENT_REFUSED,
        error_details(
            err,
            source=_short(raw.get("source")),
            detail_type=_short(raw.get("detail-type")),
        ),
    )
    count(M.EVENTS_REFUSED)


def _short(value: Any) -> Any:
    return value[:200] if isinstance(value, str) else value
