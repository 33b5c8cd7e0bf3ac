"""HyperPod's own view of the suspect node, for the approval card and `sdc show`.

Before deciding, an approver wants to know what HyperPod itself recorded about the instance:
reboots, replacements, health-check results (its `ListClusterEvents`, with
`DescribeClusterEvent`'s failure message for each warning and error), and, where node isolation
is on, the HyperPod labels of its Kubernetes node (`node-health-status`,
`deep-health-check-status`, `fault-type`, `fault-reason`).

The events are read from one hour before the first evidence to the approval request: the
incident's own health check and any reboot are in that window, and so is whatever HyperPod saw
just before the alarm. HyperPod keeps events only for clusters with continuous node
provisioning; elsewhere (or on any error) the card says so in one line. `look` never raises:
the approval request goes on whatever HyperPod answers.
"""

from __future__ import annotations

from datetime import datetime

from sdc_remediation.lambdas.logic.evidence.telemetry_query import LOOKBACK, evidence_times
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.models.errors import AwsError, KubernetesError
from sdc_remediation.lambdas.models.events import parse_time
from sdc_remediation.lambdas.models.hyperpod import ClusterEvent, HyperPodView
from sdc_remediation.lambdas.models.incident import Incident

ERROR_TEXT_LIMIT = 300


def gather(deps: Deps, incident: Incident, now: datetime) -> HyperPodView:
    """HyperPod's events for the incident's instance and its node's HyperPod labels; never
    raises."""
    from sdc_remediation.lambdas.observability import logger

    times = evidence_times(incident) or [parse_time(incident.created_at, "created_at")]
    start = min(min(times), now) - LOOKBACK
    events: tuple[ClusterEvent, ...] = ()
    more, events_error = False, None
    try:
        page = deps.hyperpod.cluster_events(incident.cluster_name, incident.instance_id, start, now)
        events, more = page.events, page.more
    except AwsError as err:
        events_error = _events_error(err)
    except Exception as err:  # never stops the approval request: the card says why
        logger.exception("cluster events failed", incident_id=incident.incident_id)
        events_error = f"not available: {type(err).__name__}: {str(err)[:ERROR_TEXT_LIMIT]}"
    node_name, labels, labels_error = _labels(deps, incident)
    logger.info(
        "hyperpod view read",
        incident_id=incident.incident_id,
        events=len(events),
        events_error=events_error,
        labels=len(labels),
    )
    return HyperPodView(
        queried_at=now.isoformat(),
        window_start=start.isoformat(),
        window_end=now.isoformat(),
        events=events,
        more_events=more,
        events_error=events_error,
        node_name=node_name,
        labels=labels,
        labels_error=labels_error,
    )


def _events_error(err: AwsError) -> str:
    if err.code == "ValidationException":
        return (
            "not available: HyperPod keeps node events only for clusters with continuous node "
            f"provisioning ({err.code}: {str(err)[:ERROR_TEXT_LIMIT]})"
        )
    return f"not available: {err.code or type(err).__name__}: {str(err)[:ERROR_TEXT_LIMIT]}"


def _labels(
    deps: Deps, incident: Incident
) -> tuple[str | None, tuple[tuple[str, str], ...], str | None]:
    """The node's HyperPod labels, where node isolation found the node (its EKS cluster)."""
    record = incident.isolation
    if record is None or not record.eks_cluster:
        return None, (), None
    try:
        node = deps.kubernetes.find_node(str(record.eks_cluster), incident.instance_id)
    except KubernetesError as err:
        return None, (), f"not available: {str(err)[:ERROR_TEXT_LIMIT]}"
    return node.name, node.hyperpod_labels, None
