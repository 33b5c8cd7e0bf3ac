"""Letting a held job-level incident proceed: the decision `proceed`.

A job-level incident naming more nodes than the blast-radius guard allows is held before
anything is cordoned or health-checked. If the report is genuine, a person may let its nodes be
health-checked anyway, the same way a storm hold is reset: an execution of the approval state
machine with `{"incident_id": "<held incident>", "decision": "proceed", "comment": "<why>"}`,
audited under both incidents with the approval execution as actor.

The held incident stays closed as it was; a new job-level incident
(`sdc-<cluster>-job-go-<digest>-<stamp>`, the same id however often the decision is given) opens
over the nodes HyperPod still knows and Kubernetes confirms, with the held incident's evidence.
The guard held the job before Kubernetes was asked (a forged report must not buy a call per
node it names), so its claims are checked here, before anything acts: the node names its report
gives and, with `job_pods`, the job's pods (`opening.claims.mismatches`; on Slurm, the host
names HyperPod gives). What does not match is kept unconfirmed and never acted on; when nothing
is confirmed, the decision is refused. Its nodes count against the guard like any others (it
takes one slot per node, beyond the limit: the person decided so), so nothing else opens in the
cluster until it closes. Refused, audited: an incident that is not
a held job-level one, one held for another reason than the guard, a cluster under a storm hold
or paused, a second `proceed`.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime
from typing import Any

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.evidence.recommendation import course_of
from sdc_remediation.lambdas.logic.opening import arrivals, claims
from sdc_remediation.lambdas.logic.opening.execution import ensure_execution
from sdc_remediation.lambdas.logic.opening.trail import audited_since, mark, passed
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.claim import Stage
from sdc_remediation.lambdas.models.errors import ClusterNotFound, DecisionRefused
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, Scope
from sdc_remediation.lambdas.models.payloads import OpenAction
from sdc_remediation.lambdas.models.writes import Created, GuardFull
from sdc_remediation.lambdas.observability import count, logger


def proceed_id(held: Incident) -> str:
    """The incident a `proceed` opens for `held`: the same id every time."""
    digest = hashlib.sha256(held.incident_id.encode()).hexdigest()[:10]
    return ids.incident_id(
        held.cluster_name, f"job-go-{digest}", datetime.fromisoformat(held.created_at)
    )


def proceed(step: Step, held: Incident, actor: str, comment: str) -> str:
    """Open the job-level incident that health-checks `held`'s nodes; returns its id. Raises
    DecisionRefused (the caller audits it) when `held` may not proceed."""
    deps = step.deps
    at = mark(step)
    check_may_proceed(step, held)
    passed(step, Stage.BOUND, named=len(held.instance_ids), asked=claims.MAX_CHECKED)
    try:
        cluster = deps.hyperpod.describe_cluster(held.cluster_name)
        nodes, unconfirmed = claims.hyperpod_nodes(step, held.cluster_name, held.instance_ids)
    except ClusterNotFound as err:
        raise DecisionRefused(f"incident {held.incident_id} cannot proceed: {err}") from err
    mismatched = claims.mismatches(step, cluster, _claims(step, held), nodes)
    unconfirmed.update(mismatched)
    nodes = [i for i in nodes if i not in mismatched]
    passed(step, Stage.CONFIRM, confirmed=nodes, unconfirmed=unconfirmed)
    if not nodes:
        raise DecisionRefused(
            f"incident {held.incident_id} cannot proceed: none of its instances is a node of "
            f"cluster {held.cluster_name} that Kubernetes confirms ({len(unconfirmed)} not "
            "confirmed)"
        )
    now = step.now()
    incident = Incident(
        incident_id=proceed_id(held),
        cluster_name=held.cluster_name,
        instance_id="",
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        node_recovery=held.node_recovery,
        evidence=copy.deepcopy(held.evidence),
        evidence_dropped=held.evidence_dropped,
        scope=Scope.JOB,
        instance_ids=nodes,
        job_name=held.job_name,
        unconfirmed={**held.unconfirmed, **unconfirmed},
    )
    # A person decided: its nodes take guard slots beyond the limit; no rate, no storm flag.
    taken = len(deps.guard.guard_state(held.cluster_name).slots)
    passed(step, Stage.BUDGET, guard_slots=len(incident.guard_slots), taken=taken)
    course, why = course_of(incident)
    passed(step, Stage.JUDGE, course=course, why=why)
    match deps.incidents.create(incident, slot_limit=taken + len(incident.guard_slots)):
        case Created():
            pass
        case GuardFull():
            raise DecisionRefused(
                f"incident {held.incident_id} cannot proceed now: the cluster's guard changed "
                "meanwhile; decide again"
            )
        case _:
            raise DecisionRefused(
                f"incident {held.incident_id} already proceeded as {incident.incident_id}"
            )
    logger.set_correlation_id(incident.incident_id)
    incident = arrivals.claim_locks(step, incident)
    details: dict[str, Any] = {
        "scope": Scope.JOB,
        "cluster_name": incident.cluster_name,
        "instance_ids": incident.instance_ids,
        "job_name": incident.job_name,
        "proceeded_from": held.incident_id,
        "comment": comment,
        "unconfirmed": incident.unconfirmed,
    }
    step.audit(incident.incident_id, AuditAction.INCIDENT_OPENED, details, actor=actor)
    step.audit(
        held.incident_id,
        AuditAction.PROCEEDED,
        {"incident_id": incident.incident_id, "instance_ids": nodes, "comment": comment},
        actor=actor,
    )
    count(M.JOB_INCIDENTS_OPENED)
    ensure_execution(step, incident.incident_id, incident)
    passed(step, Stage.ACT, action=OpenAction.OPENED)
    passed(step, Stage.AUDIT, audited=audited_since(step, at))
    return incident.incident_id


def _claims(step: Step, held: Incident) -> claims.Claims:
    """What the held incident's report claims: the report its evidence names, as stored under
    the nodes the intake asked about (its first MAX_ASKED, whether or not HyperPod still knows
    them), else only the job's name it kept."""
    report = claims.reported(step.deps, held, held.instance_ids[: claims.MAX_ASKED])
    return claims.Claims.of(report) if report else claims.Claims(job_name=held.job_name)


def check_may_proceed(step: Step, held: Incident) -> None:
    """DecisionRefused (the caller audits it) unless `held` may proceed now: checked before an
    approval of it is counted, and again when it proceeds."""
    why_not = _why_not(step, held)
    if why_not:
        raise DecisionRefused(f"incident {held.incident_id} cannot proceed: {why_not}")


def _why_not(step: Step, held: Incident) -> str | None:
    if not held.is_job or held.state is not IncidentState.HELD:
        return "only a held job-level incident proceeds (an incident awaiting approval is decided)"
    if held.hold_kind != HoldKind.GUARD:
        return f"it is held by {held.hold_kind}, not by the blast-radius guard"
    opened = proceed_id(held)
    if step.deps.incidents.get(opened) is not None:
        return f"it already proceeded as {opened}"
    blocker = guard.blocker(step.deps, held.cluster_name, trusted=held.has_trusted_evidence)
    if blocker is not None:
        return f"nothing acts on cluster {held.cluster_name} now: {blocker.reason}"
    return None
