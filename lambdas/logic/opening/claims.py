"""What a report claims about nodes, checked against what the reporter cannot forge.

Every training pod holds the training policy, so a report is a claim by a party the pipeline
cannot authenticate. Before anything acts on an instance a report names:

- HyperPod must know it as a node of the report's cluster (`hyperpod_nodes`); what it does not
  know is never flagged for the storm rule, counted, cordoned or health-checked.
- Where node isolation is configured for the cluster (it gives the pipeline the Kubernetes API),
  the node Kubernetes finds by `spec.providerID` is the truth about the node's name: a report
  naming another node for the instance does not match (`kubernetes_mismatches`).
- On a cluster orchestrated by Slurm, HyperPod's `PrivateDnsHostname` is the truth about the
  node's name (the Slurm node is named after its host): a report naming another host for the
  instance does not match (`slurm_mismatches`). `mismatches` asks whichever applies.
- Where the cluster also names a pod label for jobs (`job_pods`, such as the training
  operator's job-name label), the job's pods are listed (`<label>=<the report's job name>`, any
  namespace): an instance whose node runs none of them does not match either.

A contributor alarm is a claim too (any pod can put the metric, with any `InstanceId`), but it
names no job: for an alarm, "the job's pods" are the pods of any job (`<label>` exists, any
value, any namespace), so with `job_pods` configured an alarm for an instance whose node runs no
job's pod is not confirmed (`Claims.any_job`). A hardware alert is about the node itself: no
job's pods are looked for (`Claims.no_job`). Without `job_pods` only HyperPod's word (and the
node's name) is checked.

`confirm` is the intake's CONFIRM stage for every claim: a node-level claim whose own claim about
a node does not hold is refused (nothing spent, nothing acted on, a skipped incident says why);
a job-level one keeps what does not match on the incident (`Incident.unconfirmed`, with why),
shown in the card's own section, never acted on. A report is stored under a node only once its
claim about the node held (`sdc_remediation.lambdas.logic.intake.keep`). An alarm brings the node's
stored reports whose claims still hold (those pointing at the node read apart from the others);
only when none does, the newest that points at the node with why it does not (it then proposes
nothing beyond a health check).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety.guard import open_limit
from sdc_remediation.lambdas.models.claim import Claim, JobClaim, NodeClaim
from sdc_remediation.lambdas.models.errors import (
    ClaimNotConfirmed,
    ClusterNotFound,
    KubernetesError,
    KubernetesNotFound,
    NodeNotFound,
    SdcError,
)
from sdc_remediation.lambdas.models.evidence import TriggerSource
from sdc_remediation.lambdas.models.hyperpod import ClusterInfo, NodeInfo, NodeStatus, Orchestrator
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.kubernetes import LABEL_VALUE_RE
from sdc_remediation.lambdas.models.report import SdcReport
from sdc_remediation.lambdas.models.reporter_text import quoted
from sdc_remediation.lambdas.models.slurm import slurm_node_name

MAX_CHECKED = 256
"""The most instances of a held job asked of HyperPod when a person lets it `proceed` (one
DescribeClusterNode each); the rest are unconfirmed, never acted on."""


def hyperpod_nodes(
    step: Step, cluster_name: str, instance_ids: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Which of the instances HyperPod knows as nodes of the cluster (in the given order), and
    why each other one is not. Raises ClusterNotFound, and what HyperPod raises beyond
    NodeNotFound."""
    nodes: list[str] = []
    unconfirmed: dict[str, str] = {}
    for index, instance_id in enumerate(instance_ids):
        controller = controller_refusal(step, cluster_name, instance_id)
        if controller is not None:
            unconfirmed[instance_id] = controller
            continue
        if index >= MAX_CHECKED:
            unconfirmed[instance_id] = (
                f"not checked: the report names more than {MAX_CHECKED} instances"
            )
            continue
        try:
            node = step.deps.hyperpod.describe_node(cluster_name, instance_id)
        except NodeNotFound as err:
            unconfirmed[instance_id] = f"not a node of cluster {cluster_name} ({err})"
            continue
        if node.status == NodeStatus.NOT_FOUND:
            unconfirmed[instance_id] = f"not a node of cluster {cluster_name} (status NotFound)"
        else:
            nodes.append(instance_id)
    return nodes, unconfirmed


def controller_refusal(step: Step, cluster_name: str, instance_id: str) -> str | None:
    """Why the instance is never a suspect (None: it may be one): it is the cluster's Slurm
    controller as configured. HyperPod lists the controller as a node of the cluster, so a
    forged report or alarm naming it would otherwise propose to reboot or replace the one
    machine every job of the cluster depends on."""
    if instance_id == step.deps.settings.isolation_for(cluster_name).slurm_controller:
        return (
            f"{instance_id} is the Slurm controller of cluster {cluster_name} "
            "(sdc:slurmControllers): never a suspect"
        )
    return None


@dataclass(frozen=True, slots=True)
class Claims:
    """What a report (or an alarm) claims about its instances' nodes."""

    job_name: str | None = None
    node_names: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Per instance, the node names the reporter gives for it."""
    any_job: bool = False
    """An alarm's claim: the instance's node runs a pod of some job (no job is named)."""
    no_job: bool = False
    """A claim about the node itself (a hardware alert): no job's pods are looked for."""

    @classmethod
    def of(cls, report: SdcReport) -> Claims:
        names: dict[str, set[str]] = {}
        for s in report.suspects:
            if s.node_name and s.instance_id:
                names.setdefault(s.instance_id, set()).add(s.node_name)
        return cls(report.job_name, {i: frozenset(n) for i, n in names.items()})


ALARM_CLAIMS = Claims(any_job=True)
"""A contributor alarm's claim about its instance (see the module docstring)."""


def mismatches(
    step: Step,
    cluster: ClusterInfo,
    report: SdcReport | Claims | None,
    instance_ids: Sequence[str],
    described: Mapping[str, NodeInfo] | None = None,
) -> dict[str, str]:
    """The instances whose claims the cluster's orchestrator does not confirm, each with why:
    Slurm's host names on a Slurm cluster, Kubernetes otherwise (see the two below).
    `described`: the nodes as HyperPod described them already (not asked again)."""
    if _is_slurm(step, cluster):
        return slurm_mismatches(step, cluster, report, instance_ids, described)
    return kubernetes_mismatches(step, cluster, report, instance_ids)


def confirmer(step: Step, cluster: ClusterInfo) -> str:
    """Whose word `mismatches` takes for the cluster's node names, for a sentence."""
    return "HyperPod's host name" if _is_slurm(step, cluster) else "Kubernetes"


def _is_slurm(step: Step, cluster: ClusterInfo) -> bool:
    config = step.deps.settings.isolation_for(cluster.name)
    return cluster.orchestrator is Orchestrator.SLURM or bool(config.slurm_controller)


def slurm_mismatches(
    step: Step,
    cluster: ClusterInfo,
    report: SdcReport | Claims | None,
    instance_ids: Sequence[str],
    described: Mapping[str, NodeInfo] | None = None,
) -> dict[str, str]:
    """The instances of a Slurm cluster whose claimed node name is not the host HyperPod names
    for them (`PrivateDnsHostname`'s first label, the Slurm node's name), each with why; an
    instance whose node the report does not name is not checked (an alarm names none: only
    HyperPod's word that it is a node of the cluster holds for it)."""
    if report is None:
        return {}
    claims = report if isinstance(report, Claims) else Claims.of(report)
    found: dict[str, str] = {}
    for instance_id in instance_ids[:MAX_CHECKED]:
        claimed = sorted(claims.node_names.get(instance_id, ()))
        if not claimed:
            continue
        try:
            node = (described or {}).get(instance_id) or step.deps.hyperpod.describe_node(
                cluster.name, instance_id
            )
        except NodeNotFound as err:
            found[instance_id] = f"not a node of cluster {cluster.name} ({err})"
            continue
        host = slurm_node_name(node.hostname) if node.hostname else None
        if host is None:
            found[instance_id] = (
                f"the report names node {', '.join(quoted(n) for n in claimed)}; HyperPod "
                f"gives {instance_id} no host name to check it against"
            )
        elif claimed != [host]:
            found[instance_id] = (
                f"the report names node {', '.join(quoted(n) for n in claimed)}; HyperPod "
                f"names {instance_id}'s host {host} (its Slurm node)"
            )
    return found


def kubernetes_mismatches(
    step: Step,
    cluster: ClusterInfo,
    report: SdcReport | Claims | None,
    instance_ids: Sequence[str],
) -> dict[str, str]:
    """The instances whose claims Kubernetes does not confirm, each with why: the report names
    another node for it than Kubernetes finds by providerID, or (with `job_pods` configured for
    the cluster) the report's job runs no pod on its node, or it could not be checked. Nothing
    is checked without node isolation for the cluster, on a cluster not orchestrated by EKS, or
    for an instance whose node the report does not name when no job pods are listed."""
    config = step.deps.settings.isolation_for(cluster.name)
    eks = config.eks_cluster or cluster.eks_cluster_name
    if report is None or not config.isolate or eks is None:
        return {}
    claims = report if isinstance(report, Claims) else Claims.of(report)
    job = None if claims.no_job else _job_nodes(step, eks, config.job_pods, claims)
    mismatches: dict[str, str] = {}
    for instance_id in instance_ids:
        claimed = sorted(claims.node_names.get(instance_id, ()))
        if not claimed and job is None:
            continue
        try:
            node = step.deps.kubernetes.find_node(eks, instance_id)
        except KubernetesError as err:
            mismatches[instance_id] = (
                f"its node could not be checked against Kubernetes ({type(err).__name__})"
            )
            continue
        reasons = []
        if claimed and claimed != [node.name]:
            reasons.append(
                f"the report names node {', '.join(quoted(n) for n in claimed)}; Kubernetes "
                f"finds {instance_id} by providerID as node {node.name}"
            )
        if isinstance(job, str):
            reasons.append(job)
        elif job is not None and node.name not in job:
            reasons.append(
                f"no job runs a pod on node {node.name} (pods labelled {config.job_pods})"
                if claims.any_job
                else f"the job {quoted(claims.job_name or '')} runs no pod on node {node.name} "
                f"(pods labelled {config.job_pods}={claims.job_name})"
            )
        if reasons:
            mismatches[instance_id] = "; ".join(reasons)
    return mismatches


def _job_nodes(
    step: Step, eks: str, label_key: str | None, claims: Claims
) -> set[str] | str | None:
    """The nodes the claimed job runs pods on (`label_key`=<job name>, any namespace; for an
    alarm, any job's: `label_key` exists); a sentence saying why they cannot be known; or None
    when the cluster lists no job pods."""
    if label_key is None:
        return None
    if claims.any_job:
        try:
            return step.deps.kubernetes.pod_nodes(eks, label_key)
        except KubernetesError as err:
            return f"the jobs' pods could not be listed ({type(err).__name__})"
    job = claims.job_name
    if not job or not LABEL_VALUE_RE.match(job):
        return (
            f"the report's job name {quoted(job) if job else '(none)'} is no pod label value: "
            "the job's pods cannot be listed"
        )
    try:
        return step.deps.kubernetes.pod_nodes(eks, f"{label_key}={job}")
    except KubernetesError as err:
        return f"the job's pods could not be listed ({type(err).__name__})"


# -- the CONFIRM stage ---------------------------------------------------------------------------

MAX_ASKED: Final = 8
"""The most nodes of one claim the intake asks about: the BOUND stage cuts a claim's opening
nodes to these, so a forged claim buys one DescribeCluster and at most this many
DescribeClusterNode calls, orchestrator checks and records, however many it names."""
MAX_STORED: Final = 5
"""The most stored reports of each kind an alarm's confirmation reads for its node (newest
first): those pointing at it, then those naming it involved only."""


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The CONFIRM stage's answer about one node a claim names."""

    claim: NodeClaim
    instance_id: str | None
    node: NodeInfo | None = None
    why_not: str | None = None
    """None: HyperPod and the orchestrator confirm the claim about this node."""
    error: SdcError | None = None
    reports: tuple[SdcReport, ...] = ()
    """The reports that come with it: its own report, or, for an alarm, the node's stored
    reports whose claims the orchestrator confirms (an unconfirmed one never displaces them)."""
    unconfirmed: Mapping[str, str] = field(default_factory=dict)
    """What its reports claim about it that the orchestrator does not confirm (only when no
    stored report is confirmed): kept on the incident, it proposes nothing beyond a health
    check."""

    pending: bool = False
    """A node of a job too large to act on as claimed: HyperPod and the orchestrator are not
    asked (the guard holds the job whatever they say; a person's `proceed` asks about each)."""

    @property
    def confirmed(self) -> bool:
        return self.node is not None and self.why_not is None


@dataclass(frozen=True, slots=True)
class Checked:
    """The CONFIRM stage's answer about a claim: the cluster (None: HyperPod does not know it)
    and each node the claim names."""

    cluster: ClusterInfo | None
    nodes: tuple[Confirmed, ...]
    oversized: bool = False
    """A job-level claim naming more nodes than the guard lets act at once (or than a claim
    is asked about): held by the guard whatever the checks say; only its first MAX_ASKED nodes
    are asked of HyperPod (something real must be named before it spends a budget), none of
    the orchestrator."""


def confirm(step: Step, claim: Claim) -> Checked:
    """Every node the (bounded) claim names, against HyperPod (a node of the cluster, not its
    Slurm controller) and the cluster's orchestrator (the node name the trigger gives, and with
    `sdc:jobPods` the job's pods on it). A node that only joins an open incident (an involved
    instance, a resolved alert) is resolved to its instance but not asked about. Raises what
    HyperPod, Kubernetes or the stores raise beyond "not found"."""
    try:
        cluster = step.deps.hyperpod.describe_cluster(claim.cluster_name)
    except ClusterNotFound as err:
        why = f"HyperPod does not know cluster {claim.cluster_name}"
        return Checked(
            None, tuple(Confirmed(n, n.instance_id, why_not=why, error=err) for n in claim.nodes)
        )
    slurm = _is_slurm(step, cluster)
    described: dict[str, NodeInfo] = {}
    if claim.job_level and _oversized(step, cluster, claim):
        found = [
            _on_hyperpod(step, cluster, n, described, slurm)
            if i < MAX_ASKED
            else Confirmed(n, n.instance_id, pending=True)
            for i, n in enumerate(claim.nodes)
        ]
        return Checked(cluster, tuple(found), oversized=True)
    found = [_on_hyperpod(step, cluster, n, described, slurm) for n in claim.nodes]
    asked = sorted({c.instance_id for c in found if c.confirmed and c.instance_id})
    refused = mismatches(step, cluster, own_claims(claim, found, slurm), asked, described)
    whose = confirmer(step, cluster)
    found = [
        dataclasses.replace(
            c,
            why_not=f"{whose} does not confirm the {claim.source.value} for {c.instance_id}: "
            f"{refused[c.instance_id]}",
        )
        if c.instance_id in refused and c.confirmed
        else c
        for c in found
    ]
    if claim.report is not None:
        found = [dataclasses.replace(c, reports=(claim.report,)) for c in found]
    elif claim.source is TriggerSource.ALARM:
        found = [_stored_reports(step, cluster, c, described) if c.confirmed else c for c in found]
    return Checked(cluster, tuple(found))


def _oversized(step: Step, cluster: ClusterInfo, claim: Claim) -> bool:
    named = len({n.instance_id for n in claim.nodes})
    limit = open_limit(cluster.node_count, step.deps.settings)
    return named > min(limit, MAX_ASKED)


def _on_hyperpod(
    step: Step,
    cluster: ClusterInfo,
    claim: NodeClaim,
    described: dict[str, NodeInfo],
    slurm: bool,
) -> Confirmed:
    instance_id = claim.instance_id or _instance_named(step, cluster, claim.node_name, slurm)
    if instance_id is None:
        return Confirmed(
            claim,
            None,
            why_not=f"node {quoted(claim.node_name or '')} names no instance: it is not "
            "hyperpod-<instance id>, and neither Kubernetes (by providerID) nor HyperPod (by "
            "host name, on Slurm) gives one for it",
        )
    if not claim.opens:
        return Confirmed(claim, instance_id, why_not="joins an open incident only: not asked")
    controller = controller_refusal(step, cluster.name, instance_id)
    if controller is not None:
        return Confirmed(
            claim, instance_id, why_not=controller, error=ClaimNotConfirmed(controller)
        )
    try:
        node = described.get(instance_id) or step.deps.hyperpod.describe_node(
            cluster.name, instance_id
        )
    except NodeNotFound as err:
        why = f"instance {instance_id} is not a node of cluster {cluster.name}: {err}"
        return Confirmed(claim, instance_id, why_not=why, error=err)
    if node.status == NodeStatus.NOT_FOUND:
        why = f"instance {instance_id} is not a node of cluster {cluster.name}: status NotFound"
        return Confirmed(claim, instance_id, why_not=why, error=NodeNotFound(why))
    described[instance_id] = node
    return Confirmed(claim, instance_id, node=node)


def _instance_named(
    step: Step, cluster: ClusterInfo, node_name: str | None, slurm: bool
) -> str | None:
    """The instance the orchestrator gives for a node name: on Slurm the node whose
    PrivateDnsHostname's first label it is (the exporter's host name, `ip-10-1-2-3`); on EKS
    the node Kubernetes finds under that name, by its providerID (where the cluster gives the
    pipeline its Kubernetes API). None when it has none."""
    if not node_name:
        return None
    if slurm:
        return step.deps.hyperpod.instance_with_host(cluster.name, node_name.split(".", 1)[0])
    config = step.deps.settings.isolation_for(cluster.name)
    if not config.isolate or config.eks_cluster is None:
        return None
    try:
        return step.deps.kubernetes.find_node_named(config.eks_cluster, node_name).instance_id
    except KubernetesNotFound:
        return None


def own_claims(claim: Claim, found: Sequence[Confirmed], slurm: bool) -> Claims:
    """What the trigger claims about its nodes beyond their instance ids, for `mismatches`:
    a report its node names and job; an alarm that some job runs on the node; a hardware alert
    the node name its series gave (a `hyperpod-<instance id>` name on Slurm is the id itself:
    the host name is not asked)."""
    if claim.report is not None:
        return Claims.of(claim.report)
    if claim.job is JobClaim.ANY:
        return ALARM_CLAIMS
    names = {
        c.instance_id: frozenset({c.claim.node_name})
        for c in found
        if c.instance_id
        and c.claim.node_name
        and not (slurm and c.claim.node_name == f"hyperpod-{c.instance_id}")
    }
    return Claims(node_names=names, no_job=claim.job is JobClaim.NONE)


def _stored_reports(
    step: Step, cluster: ClusterInfo, alarm: Confirmed, described: Mapping[str, NodeInfo]
) -> Confirmed:
    """An alarm's node with the reports stored for it whose claims the orchestrator confirms
    (newest first, at most MAX_STORED of each kind read); when none is, the newest that points at the node
    with why it is not (it proposes nothing beyond a health check). A report that does not
    hold up never displaces one that does; one that does not point at the node (an ambiguous
    report: a job too large to ask the orchestrator about is stored under the nodes HyperPod
    knows) is left out: it claims nothing against the node, so it weakens none of its
    evidence."""
    assert alarm.instance_id is not None
    stored = step.deps.reports.recent_reports(cluster.name, alarm.instance_id, MAX_STORED)
    kept: list[SdcReport] = []
    first_refused: tuple[SdcReport, dict[str, str]] | None = None
    for report in stored:
        refused = mismatches(step, cluster, report, [alarm.instance_id], described)
        if not refused:
            kept.append(report)
        elif first_refused is None and report.points_at(alarm.instance_id):
            first_refused = (report, refused)
    if kept:
        return dataclasses.replace(alarm, reports=tuple(kept))
    if first_refused is not None:
        report, refused = first_refused
        return dataclasses.replace(alarm, reports=(report,), unconfirmed=refused)
    return alarm


def reported(deps: Deps, incident: Incident, instance_ids: Sequence[str]) -> SdcReport | None:
    """The report the incident's evidence names (its first), as stored under the first of
    `instance_ids` that has it: read by its id, so however many reports named those nodes
    since, and whichever delivery of it the evidence came with, it is found. None when none
    has it (it expired)."""
    for item in incident.reports:
        if not item.received_at:
            continue
        for instance_id in instance_ids:
            found = deps.reports.stored_report(
                incident.cluster_name, instance_id, item.received_at, item.report_id
            )
            if found is not None:
                return found
        return None
    return None
