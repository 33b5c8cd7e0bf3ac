"""A claim: what any trigger (a contributor alarm, an SDC or watch report, a hardware alert, a
person's `proceed`) says about nodes of a cluster, in one typed shape. Every trigger kind is a
parser into a `Claim` (beside its entry in `sdc_remediation.lambdas.logic.intake`), and
what its confirmed claims spend is one row of `SPENDS`; the intake takes every claim down the
same `Stage`s, in their order (`sdc_remediation.lambdas.logic.intake.take`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from sdc_remediation.lambdas.models.events import MuteDetail
from sdc_remediation.lambdas.models.evidence import Evidence, ReportEvidence, TriggerSource
from sdc_remediation.lambdas.models.report import SdcReport


class Stage(StrEnum):
    """The intake's stages, in the order every claim goes through them."""

    BOUND = "bound"
    """How much of the claim is looked at: a claim asks about a few nodes at most, so a forged
    one buys a small constant number of HyperPod calls and records."""
    CONFIRM = "confirm"
    """Every node it names, against HyperPod and the cluster's orchestrator (Kubernetes with or
    without job pods, Slurm's host names)."""
    BUDGET = "budget"
    """The storm flags, the rate bound, the pause switch and mute rules: spent on confirmed
    nodes only."""
    JUDGE = "judge"
    """The course the one policy gives the evidence (`course_of`)."""
    ACT = "act"
    """Open, join, hold or refuse."""
    AUDIT = "audit"
    """What the audit log says of it."""


class JobClaim(StrEnum):
    """What the claim says about which job runs on its nodes (checked with `sdc:jobPods`)."""

    NAMED = "named"
    """A report: its job (`Claim.job_name`) runs pods on each node it names."""
    ANY = "any"
    """A contributor alarm: some job runs a pod on its node (any pod can put the metric)."""
    NONE = "none"
    """A hardware alert or a person's decision: about the node itself, no job involved."""


@dataclass(frozen=True, slots=True)
class NodeClaim:
    """One node a claim names."""

    item: Evidence
    """The evidence it brings for this node."""
    instance_id: str | None = None
    """None: the trigger names the node by name only (a hardware alert's `ip-…` host), and the
    orchestrator gives the instance (Kubernetes by providerID, HyperPod by host name)."""
    node_name: str | None = None
    """The name the trigger gives the node, checked against the orchestrator."""
    opens: bool = True
    """It asks for its node's own incident (False: it only joins an incident already open, as
    an involved instance of a report does)."""
    metric: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    source: TriggerSource
    cluster_name: str
    event_id: str
    at: datetime
    """The incident id's time (the alarm's state change, the report's emission, the receipt)."""
    nodes: tuple[NodeClaim, ...]
    job: JobClaim = JobClaim.NONE
    job_name: str | None = None
    report: SdcReport | None = None
    job_level: bool = False
    """One incident for all its nodes (an ambiguous report), not one per node."""
    job_item: ReportEvidence | None = None
    """The evidence of a job-level claim as a whole."""
    mute: MuteDetail | None = None
    alarm_name: str | None = None


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

RATED: Final = frozenset(s for s, spends in SPENDS.items() if spends.rate)
"""The trigger kinds whose claims spend the rate bound."""
