"""Every trigger kind is a parser into the same typed `Claim`, and nothing more: what a trigger
may spend and how it counts is in `SPENDS`, what is done with a claim is the intake's one path
(`sdc_remediation.lambdas.logic.intake.take`). A new trigger kind is one function here and one row of `SPENDS`.

- a contributor alarm: its instance opens (some job's pod must run on it, with `sdc:jobPods`);
- an SDC or watch report: each culprit or confirmed suspect opens its node's incident, the
  involved instances join open ones; an ambiguous report opens one job-level incident;
- a hardware alert: its node (named as the exporter names it: `hyperpod-i-…` or the
  Kubernetes node on EKS, the host `ip-…` on Slurm) opens; a resolved one only joins;
- a failed check of an idle sweep: its node opens (the sweep checked it because no job ran
  there; the check's result is the evidence);
- a claim the rate bound held, taken again once its minute is over (reconciliation).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.models.claim import Claim, JobClaim, NodeClaim
from sdc_remediation.lambdas.models.events import ContributorEvent
from sdc_remediation.lambdas.models.hardware_alert import AlertNotification, AlertStatus
from sdc_remediation.lambdas.models.incident import Incident, TriggerSource
from sdc_remediation.lambdas.models.report import ReportEvent, SdcReport
from sdc_remediation.lambdas.models.reporter_text import clean


@dataclass(frozen=True, slots=True)
class Spends:
    """What a trigger kind's confirmed claims spend (nothing unconfirmed spends anything)."""

    rate: bool
    """One of the cluster's (and the job's) openings per minute per incident it opens."""
    storm: bool
    """Its nodes count toward the storm rule."""


SPENDS: Final = {
    # CloudWatch raises the alarm, the training policy cannot: a report flood must not hold a
    # genuine alarm, so alarms take no opening from the rate bound. But any pod can put the
    # metric's datapoint with any InstanceId dimension: four datapoints from one pod would make
    # a storm of four "nodes". The storm rule counts nodes evidenced by what names them from
    # the outside of the metric channel (a report's checks, the node's own exporter's alert):
    # an alarm flags nothing, its report or alert does.
    TriggerSource.ALARM: Spends(rate=False, storm=False),
    TriggerSource.REPORT: Spends(rate=True, storm=True),
    # The alert manager groups per node; its notifications are bounded and rate-bound like
    # reports (one notification cannot storm-hold a cluster: it names one node).
    TriggerSource.HARDWARE: Spends(rate=True, storm=True),
    # The pipeline's own sweep asked HyperPod, a bounded batch per run: no pod can forge it, so
    # it takes no opening; but many idle nodes failing at once is a fabric or software problem,
    # not one node's hardware: its nodes count toward the storm rule.
    TriggerSource.SWEEP: Spends(rate=False, storm=True),
}


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


def of_sweep(cluster_name: str, instance_id: str, item: dict[str, Any], event_id: str) -> Claim:
    """A failed check of an idle sweep: `item` is the check's result as the incident keeps it
    (`sdc_remediation.lambdas.logic.sweep.claim.sweep_evidence`). About the node itself: no job is named."""
    return Claim(
        source=TriggerSource.SWEEP,
        cluster_name=cluster_name,
        event_id=event_id,
        at=datetime.fromisoformat(str(item["received_at"])),
        nodes=(NodeClaim(item, instance_id, metric=None),),
    )


def of_rate_held(held: Incident, report: SdcReport | None, freed_at: datetime) -> Claim | None:
    """A node-level incident the rate bound held, as the claim it was, taken again once its
    minute is over (`sdc_remediation.lambdas.logic.intake.retake`): at the start of the next minute, so however
    often it is taken again it asks for the same incident. None when it is not one (a job-level
    incident, evidence of no kind that spends the bound). Its trusted evidence first (a hardware
    alert that joined a held report): the claim is then the alert's, which a storm of reports
    does not hold (`sdc_remediation.lambdas.logic.safety.guard.storm_blocker`)."""
    rated = [e for e in held.evidence if e.get("kind") in _RATED]
    item = next((e for e in rated if TriggerSource(e["kind"]).trusted), None)
    item = item or next(iter(rated), None)
    if held.is_job or item is None:
        return None
    source = TriggerSource(item["kind"])
    if source is not TriggerSource.REPORT:
        report = None
    return Claim(
        source=source,
        cluster_name=held.cluster_name,
        event_id=f"again-{held.incident_id}",
        at=freed_at,
        nodes=(
            NodeClaim(
                item,
                held.instance_id,
                node_name=item.get("node_name") if source is TriggerSource.HARDWARE else None,
                metric=item.get("rule") or (item.get("metrics") or [None])[0],
            ),
        ),
        job=JobClaim.NAMED if report is not None else JobClaim.NONE,
        job_name=report.job_name if report is not None else None,
        report=report,
    )


_RATED: Final = frozenset(s for s, spends in SPENDS.items() if spends.rate)


def hardware_event_id(note: AlertNotification) -> str:
    return f"sns-{clean(note.message_id, 100)}"
