"""What a release that could not lift a node records, the same for both orchestrators: the node
is gone (nothing left to release), or the release failed (closing again retries it)."""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import KubernetesError, SlurmError
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.isolation import IsolatedNode, IsolationState
from sdc_remediation.lambdas.observability import count


def gone(
    step: Step, incident: Incident, instance_id: str, node: IsolatedNode, name: str, err: Exception
) -> IsolatedNode:
    """The node no longer exists where it was isolated: recorded GONE, audited as skipped."""
    outcome = dataclasses.replace(
        node, state=IsolationState.GONE, reason=f"the node is gone: {err}"
    )
    step.audit(
        incident.incident_id,
        AuditAction.NODE_RELEASE_SKIPPED,
        {"instance_id": instance_id, "node_name": name, "reason": outcome.reason},
    )
    return outcome


def release_failed(
    step: Step,
    incident: Incident,
    instance_id: str,
    node: IsolatedNode,
    name: str,
    err: KubernetesError | SlurmError,
) -> IsolatedNode:
    """The release was refused or not answered: recorded RELEASE_FAILED, audited, counted."""
    step.audit(
        incident.incident_id,
        AuditAction.NODE_RELEASE_FAILED,
        {"instance_id": instance_id, "node_name": name, **err.details()},
    )
    count(M.NODE_RELEASES_FAILED)
    return dataclasses.replace(
        node, state=IsolationState.RELEASE_FAILED, cause=err.cause, reason=str(err)
    )
