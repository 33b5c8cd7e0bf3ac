"""An in-memory HyperPod, owned by the project: the tests and the local drill run against it.

It implements the same `HyperPod` port as the boto3 adapter (type-checked below) and behaves
the way the pipeline relies on:

- clusters with instance groups and nodes, each cluster with its NodeRecovery setting;
- deep health checks: the node goes `DeepHealthCheckInProgress`, then, after
  `health_check_polls` more looks at it, `Running` (passed) or failed: `Failure` with
  NodeRecovery `None`; with `Automatic`, HyperPod starts replacing the node itself; a node
  fails the checks `fail_check` names (InstanceConnectivity, say) and passes the others, and
  its status message names the check that failed; several groups' nodes start in one call
  (`start_health_checks`, 1 to 99 configurations); `check_watchers` are told when a check
  starts and ends on a node (the drill labels the EKS node Unschedulable, or holds the Slurm
  node in a maintenance reservation, meanwhile);
- ListClusterNodes (`list_nodes`): every node as it is, nothing progresses;
- replacements: the node goes `ShuttingDown`; after `replacement_polls` more looks it is gone
  (DescribeClusterNode → NodeNotFound) and a new node with a new instance id and the same
  logical id and group is `Running`;
- reboots: the node goes `Pending` and after `reboot_polls` more looks is `Running` again, with
  the same instance id (a node with `reboot_returns=False` stays `Pending`: a reboot that never
  comes back);
- BatchReplaceClusterNodes and BatchRebootClusterNodes answer per node like the real API:
  `InstanceIdNotFound` for an unknown node, `InstanceIdInUse` while a replacement or reboot
  runs, `InvalidInstanceStatus` while a health check runs; any documented code can be injected
  (`inject_batch_failure`), and any call can be made to raise (`fail_next`, e.g. `Throttled`);
- HyperPod's own events (ListClusterEvents, DescribeClusterEvent): each health check started,
  passed or failed, reboot and replacement of a node is recorded in the API's shapes
  (`ClusterEventSummary`, `ClusterEventDetail`; `list_cluster_events_answer` and
  `describe_cluster_event_answer` give them as the API would, so a test can check them against
  botocore's model), at the time `now()` says; `add_event` adds any other; a cluster with
  `events_supported=False` answers ValidationException, as one without continuous node
  provisioning does;
- a call log (`calls`, `calls_to`) with AWS operation and parameter names.

A "look" is a DescribeClusterNode of that node (what the poll loops do) or `advance()`; with
`takes` the fake keeps time instead: what is pending ends once its seconds have passed on `now()`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.models.errors import ClusterNotFound, DependencyFailed, NodeNotFound
from sdc_remediation.lambdas.models.hyperpod import (
    BatchErrorCode,
    BatchFailure,
    BatchResult,
    ClusterInfo,
    EventLevel,
    EventPage,
    HealthCheck,
    NodeInfo,
    NodeRecovery,
    NodeStatus,
    Orchestrator,
    collect_events,
)
from sdc_remediation.lambdas.models.slurm import slurm_node_name

MAX_BATCH_NODES = 25
MAX_CONFIGURATIONS = 99
"""StartClusterHealthCheck's `DeepHealthCheckConfigurations`: 1 to 99."""
CHECK_FAILURES = {
    HealthCheck.INSTANCE_STRESS.value: "GPU stress test failed",
    HealthCheck.INSTANCE_CONNECTIVITY.value: "NCCL all-reduce bus bandwidth below threshold; "
    "EFA loopback failed",
    HealthCheck.MULTI_NODE_TRAINING_VALIDATION.value: "training validation failed",
}
"""The failure message a failed check leaves (the node's status message and its event)."""
BATCH_OPERATIONS = ("BatchReplaceClusterNodes", "BatchRebootClusterNodes")


@dataclass
class FakeNode:
    instance_id: str
    instance_group: str
    logical_id: str
    status: str = NodeStatus.RUNNING.value
    instance_type: str = "ml.p5.48xlarge"
    health_check_passes: bool = True
    message: str | None = None
    pending: str | None = None
    """"health_check", "replacement" or "reboot" while one runs."""
    polls_left: int = 0
    done_at: datetime | None = None
    """When what is pending is over, where the fake keeps time (`takes`) instead of looks."""
    reboot_returns: bool = True
    """False: a reboot leaves the node Pending for good."""
    reboots: int = 0
    hostname: str | None = None
    """`PrivateDnsHostname` (kept by a replacement, as HyperPod keeps a Slurm node's name)."""
    failing_checks: tuple[str, ...] = ()
    """Deep health checks the node fails (`fail_check`), whatever `health_check_passes` says."""
    checks: tuple[str, ...] = ()
    """The checks of the deep health check running (or last run) on it."""


@dataclass
class FakeCluster:
    name: str
    arn: str
    node_recovery: str
    instance_groups: list[str]
    nodes: dict[str, FakeNode] = field(default_factory=dict)
    status: str = "InService"
    eks_cluster_arn: str | None = None
    """`Orchestrator.Eks.ClusterArn` (None: not EKS)."""
    slurm: bool = False
    """`Orchestrator.Slurm` present (a cluster with neither names no orchestrator)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """`ClusterEventDetail`s, oldest first (a summary is the detail less `EventDetails`)."""
    events_supported: bool = True
    """False: ListClusterEvents answers ValidationException (no continuous node provisioning)."""


@dataclass(frozen=True, slots=True)
class ActionTimes:
    """How long HyperPod takes, in seconds of the fake's `now()`, where a run keeps time."""

    health_check: float
    replacement: float
    reboot: float


@dataclass(frozen=True)
class FakeCall:
    operation: str
    params: dict[str, Any]


class FakeHyperPod:
    def __init__(
        self,
        *,
        health_check_polls: int = 1,
        replacement_polls: int = 2,
        reboot_polls: int = 1,
        region: str = "us-west-2",
        account: str = "111122223333",
        now: Callable[[], datetime] | None = None,
        takes: ActionTimes | None = None,
    ) -> None:
        self.takes = takes
        """Set: a health check, replacement or reboot ends once its time has passed on `now()`,
        however often the node is looked at (the fleet what-if's virtual clock)."""
        self.health_check_polls = health_check_polls
        self.replacement_polls = replacement_polls
        self.reboot_polls = reboot_polls
        self.region = region
        self.account = account
        self.now: Callable[[], datetime] = now or (lambda: datetime.now(UTC))
        """When an event happens (the tests point it at their clock)."""
        self.clusters: dict[str, FakeCluster] = {}
        self.calls: list[FakeCall] = []
        self.observers: list[Callable[[str, dict[str, Any]], None]] = []
        """Told of every call (operation, parameters), as botocore's events tell of SDK calls."""
        self.check_watchers: list[Callable[[str, FakeNode, bool], None]] = []
        """Told (cluster name, node, running) when a deep health check starts on a node and
        when it ends: what HyperPod does to the orchestrator meanwhile (the EKS node's
        Unschedulable label, a Slurm maintenance reservation) is theirs to play."""
        self.replaced_by: dict[str, str] = {}
        """Old instance id → the new one, once a replacement finished."""
        self._ids = itertools.count(1)
        self._event_ids = itertools.count(1)
        self._requests = itertools.count(1)
        self._batch_failures: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        self._failures: dict[str, list[Exception]] = {}

    # -- arranging ------------------------------------------------------------------------

    def add_cluster(
        self,
        name: str,
        *,
        node_recovery: str = NodeRecovery.NONE.value,
        instance_groups: Sequence[str] = ("workers",),
        eks_cluster: str | None = None,
        slurm: bool = False,
    ) -> FakeCluster:
        """`eks_cluster`: the name of the EKS cluster that orchestrates it; `slurm`: orchestrated
        by Slurm (neither: DescribeCluster names no orchestrator)."""
        if slurm and eks_cluster:
            raise ValueError("a cluster has one orchestrator: EKS or Slurm")
        cluster = FakeCluster(
            name=name,
            arn=f"arn:aws:sagemaker:{self.region}:{self.account}:cluster/{name}",
            node_recovery=node_recovery,
            instance_groups=list(instance_groups),
            eks_cluster_arn=(
                f"arn:aws:eks:{self.region}:{self.account}:cluster/{eks_cluster}"
                if eks_cluster
                else None
            ),
            slurm=slurm,
        )
        self.clusters[name] = cluster
        return cluster

    def add_node(
        self,
        cluster_name: str,
        instance_group: str = "workers",
        instance_id: str | None = None,
        *,
        status: str = NodeStatus.RUNNING.value,
        health_check_passes: bool = True,
        hostname: str | None = None,
    ) -> str:
        """`hostname`: its PrivateDnsHostname (`ip-10-1-69-242.us-west-2.compute.internal`)."""
        cluster = self._cluster(cluster_name)
        if instance_group not in cluster.instance_groups:
            cluster.instance_groups.append(instance_group)
        node_id = instance_id or self._new_instance_id()
        cluster.nodes[node_id] = FakeNode(
            instance_id=node_id,
            instance_group=instance_group,
            logical_id=f"{instance_group}-{next(self._ids):04d}",
            status=status,
            health_check_passes=health_check_passes,
            hostname=hostname,
        )
        return node_id

    def set_health_check_result(self, cluster_name: str, instance_id: str, *, passes: bool) -> None:
        self._node(cluster_name, instance_id, "arrange").health_check_passes = passes

    def fail_check(self, cluster_name: str, instance_id: str, check: HealthCheck) -> None:
        """The node fails `check` whenever a deep health check runs it (the others pass)."""
        node = self._node(cluster_name, instance_id, "arrange")
        node.failing_checks = (*node.failing_checks, check.value)

    def inject_replace_failure(
        self, instance_id: str, code: str, message: str | None = None, *, times: int = 1
    ) -> None:
        """The next `times` BatchReplaceClusterNodes answers list the node in Failed[]."""
        self.inject_batch_failure("BatchReplaceClusterNodes", instance_id, code, message, times)

    def inject_batch_failure(
        self,
        operation: str,
        instance_id: str,
        code: str,
        message: str | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` answers of `operation` (BatchReplaceClusterNodes or
        BatchRebootClusterNodes) list the node in Failed[] with `code`."""
        BatchErrorCode(code)  # only the documented codes
        if operation not in BATCH_OPERATIONS:
            raise ValueError(f"{operation} is not one of {BATCH_OPERATIONS}")
        failures = self._batch_failures.setdefault((operation, instance_id), [])
        failures.extend([(code, message)] * times)

    def set_reboot_returns(self, cluster_name: str, instance_id: str, *, returns: bool) -> None:
        self._node(cluster_name, instance_id, "arrange").reboot_returns = returns

    def add_event(
        self,
        cluster_name: str,
        instance_id: str,
        description: str,
        *,
        level: str = EventLevel.INFO.value,
        at: datetime | None = None,
        failure: str | None = None,
    ) -> str:
        """An event of HyperPod's about a node (its id); `failure`: the failure message
        DescribeClusterEvent gives."""
        cluster = self._cluster(cluster_name)
        node = cluster.nodes.get(instance_id)
        event_id = f"evt-{next(self._event_ids):012x}"
        detail: dict[str, Any] = {
            "EventId": event_id,
            "ClusterArn": cluster.arn,
            "ClusterName": cluster.name,
            "InstanceGroupName": node.instance_group if node else cluster.instance_groups[0],
            "InstanceId": instance_id,
            "ResourceType": "Instance",
            "EventTime": at or self.now(),
            "Description": description,
            "EventLevel": level,
        }
        if failure or node:
            instance: dict[str, Any] = {}
            if node:
                instance["NodeLogicalId"] = node.logical_id
            if failure:
                instance["FailureMessage"] = failure
            detail["EventDetails"] = {"EventMetadata": {"Instance": instance}}
        cluster.events.append(detail)
        return event_id

    def list_cluster_events_answer(self, **params: Any) -> dict[str, Any]:
        """ListClusterEvents' answer, in the API's shape (`NodeId`, `EventTimeAfter`,
        `EventTimeBefore`, `SortOrder`, `MaxResults` and `NextToken` honoured)."""
        self._call("ListClusterEvents", **params)
        cluster = self._cluster(params["ClusterName"])
        if not cluster.events_supported:
            raise self._validation(
                "ListClusterEvents is only supported when NodeProvisioningMode is Continuous"
            )
        chosen = [
            {k: v for k, v in e.items() if k != "EventDetails"}
            for e in cluster.events
            if params.get("NodeId") in (None, e.get("InstanceId"))
            and (params.get("EventTimeAfter") is None or e["EventTime"] > params["EventTimeAfter"])
            and (
                params.get("EventTimeBefore") is None or e["EventTime"] < params["EventTimeBefore"]
            )
        ]
        chosen.sort(key=lambda e: e["EventTime"], reverse=params.get("SortOrder") == "Descending")
        start = int(params.get("NextToken") or 0)
        size = int(params.get("MaxResults") or 100)
        answer: dict[str, Any] = {"Events": chosen[start : start + size]}
        if start + size < len(chosen):
            answer["NextToken"] = str(start + size)
        return answer

    def describe_cluster_event_answer(self, **params: Any) -> dict[str, Any]:
        """DescribeClusterEvent's answer, in the API's shape."""
        self._call("DescribeClusterEvent", **params)
        cluster = self._cluster(params["ClusterName"])
        found = next((e for e in cluster.events if e["EventId"] == params["EventId"]), None)
        if found is None:
            raise ClusterNotFound(
                f"event {params['EventId']} not found",
                operation="DescribeClusterEvent",
                code="ResourceNotFound",
                request_id=self._request_id(),
            )
        return {"EventDetails": dict(found)}

    def fail_next(self, operation: str, error: Exception, *, times: int = 1) -> None:
        """The next `times` calls of `operation` (AWS name) raise `error`."""
        self._failures.setdefault(operation, []).extend([error] * times)

    # -- observing ------------------------------------------------------------------------

    def node(self, cluster_name: str, instance_id: str) -> FakeNode | None:
        return self._cluster(cluster_name).nodes.get(instance_id)

    def calls_to(self, operation: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.operation == operation]

    def advance(self, looks: int = 1) -> None:
        """Let every running health check and replacement progress `looks` polls."""
        for _ in range(looks):
            for cluster in self.clusters.values():
                for node in list(cluster.nodes.values()):
                    self._progress(cluster, node)

    # -- the HyperPod port ----------------------------------------------------------------

    def describe_cluster(self, cluster_name: str) -> ClusterInfo:
        self._call("DescribeCluster", ClusterName=cluster_name)
        cluster = self._cluster(cluster_name)
        return ClusterInfo(
            name=cluster.name,
            arn=cluster.arn,
            status=cluster.status,
            node_recovery=NodeRecovery(cluster.node_recovery),
            instance_groups=tuple(cluster.instance_groups),
            request_id=self._request_id(),
            node_count=len(cluster.nodes) or None,
            eks_cluster_arn=cluster.eks_cluster_arn,
            orchestrator=(
                Orchestrator.EKS
                if cluster.eks_cluster_arn
                else Orchestrator.SLURM
                if cluster.slurm
                else None
            ),
        )

    def describe_node(self, cluster_name: str, instance_id: str) -> NodeInfo:
        self._call("DescribeClusterNode", ClusterName=cluster_name, NodeId=instance_id)
        cluster = self._cluster(cluster_name)
        node = self._node(cluster_name, instance_id, "DescribeClusterNode")
        self._progress(cluster, node)
        return self._info(cluster, self._node(cluster_name, instance_id, "DescribeClusterNode"))

    def instance_with_host(self, cluster_name: str, host: str) -> str | None:
        self._call("ListClusterNodes", ClusterName=cluster_name)
        cluster = self._cluster(cluster_name)
        return next(
            (
                n.instance_id
                for n in cluster.nodes.values()
                if n.hostname and slurm_node_name(n.hostname) == host
            ),
            None,
        )

    def describe_node_by_logical_id(self, cluster_name: str, logical_id: str) -> NodeInfo:
        self._call("DescribeClusterNode", ClusterName=cluster_name, NodeLogicalId=logical_id)
        cluster = self._cluster(cluster_name)
        node = next((n for n in cluster.nodes.values() if n.logical_id == logical_id), None)
        if node is None:
            raise self._not_found(cluster_name, logical_id)
        self._progress(cluster, node)
        current = next(n for n in cluster.nodes.values() if n.logical_id == logical_id)
        return self._info(cluster, current)

    def start_health_check(
        self,
        cluster_name: str,
        instance_group: str,
        instance_ids: Sequence[str],
        checks: Sequence[str],
    ) -> str | None:
        return self.start_health_checks(cluster_name, {instance_group: instance_ids}, checks)

    def start_health_checks(
        self,
        cluster_name: str,
        groups: Mapping[str, Sequence[str]],
        checks: Sequence[str],
    ) -> str | None:
        """One StartClusterHealthCheck, one configuration per group: every node must be
        Running and in its group, or nothing starts (ValidationException)."""
        self._call(
            "StartClusterHealthCheck",
            ClusterName=cluster_name,
            DeepHealthCheckConfigurations=[
                {
                    "InstanceGroupName": group,
                    "InstanceIds": list(instance_ids),
                    "DeepHealthChecks": list(checks),
                }
                for group, instance_ids in sorted(groups.items())
            ],
        )
        cluster = self._cluster(cluster_name)
        if not 1 <= len(groups) <= MAX_CONFIGURATIONS:
            raise self._validation(f"DeepHealthCheckConfigurations takes 1 to {MAX_CONFIGURATIONS}")
        unknown = [c for c in checks if c not in {h.value for h in HealthCheck}]
        if not checks or unknown:
            raise self._validation(f"bad DeepHealthChecks {list(checks)}")
        nodes: list[FakeNode] = []
        for instance_group, instance_ids in groups.items():
            if instance_group not in cluster.instance_groups:
                raise self._validation(f"no instance group {instance_group} in {cluster_name}")
            for node in [
                self._node(cluster_name, i, "StartClusterHealthCheck") for i in instance_ids
            ]:
                if node.instance_group != instance_group:
                    raise self._validation(f"{node.instance_id} is not in group {instance_group}")
                if node.status != NodeStatus.RUNNING:
                    raise self._validation(f"{node.instance_id} is {node.status}, not Running")
                nodes.append(node)
        for node in nodes:
            node.status = NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS.value
            node.pending = "health_check"
            node.checks = tuple(checks)
            node.polls_left = self.health_check_polls
            self._until(node, self.takes.health_check if self.takes else None)
            self.add_event(
                cluster_name,
                node.instance_id,
                f"Deep health check started: {', '.join(checks)}",
            )
            self._tell_check(cluster, node, running=True)
        return self._request_id()

    def list_nodes(self, cluster_name: str) -> list[NodeInfo]:
        """ListClusterNodes: every node as it is now (a list is no look: nothing progresses)."""
        self._call("ListClusterNodes", ClusterName=cluster_name)
        cluster = self._cluster(cluster_name)
        return [self._info(cluster, node) for node in cluster.nodes.values()]

    def replace_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        return self._batch("BatchReplaceClusterNodes", cluster_name, instance_ids)

    def reboot_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        return self._batch("BatchRebootClusterNodes", cluster_name, instance_ids)

    def cluster_events(
        self, cluster_name: str, instance_id: str, after: datetime, before: datetime
    ) -> EventPage:
        """The page the adapter makes, of the answers above."""

        def describe(event_id: str) -> Mapping[str, Any] | None:
            answer = self.describe_cluster_event_answer(ClusterName=cluster_name, EventId=event_id)
            return dict(answer["EventDetails"])

        return collect_events(
            cluster_name, instance_id, after, before, self.list_cluster_events_answer, describe
        )

    # -- internals ------------------------------------------------------------------------

    def _batch(self, operation: str, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        """One answer per node, as both batch operations give it."""
        self._call(operation, ClusterName=cluster_name, NodeIds=list(instance_ids))
        cluster = self._cluster(cluster_name)
        if not 1 <= len(instance_ids) <= MAX_BATCH_NODES:
            raise self._validation(f"NodeIds takes 1 to {MAX_BATCH_NODES} ids")
        successful: list[str] = []
        failed: list[BatchFailure] = []
        for node_id in instance_ids:
            injected = self._batch_failures.get((operation, node_id))
            node = cluster.nodes.get(node_id)
            if injected:
                code, message = injected.pop(0)
                failed.append(BatchFailure(node_id, code, message or f"injected {code}"))
            elif node is None:
                failed.append(
                    BatchFailure(node_id, BatchErrorCode.INSTANCE_ID_NOT_FOUND, "no such node")
                )
            elif node.pending in ("replacement", "reboot"):
                failed.append(
                    BatchFailure(
                        node_id, BatchErrorCode.INSTANCE_ID_IN_USE, f"{node.pending} in progress"
                    )
                )
            elif node.status not in (NodeStatus.RUNNING, NodeStatus.FAILURE):
                failed.append(
                    BatchFailure(
                        node_id, BatchErrorCode.INVALID_INSTANCE_STATUS, f"node is {node.status}"
                    )
                )
            elif operation == "BatchRebootClusterNodes":
                self._begin_reboot(node)
                self.add_event(cluster_name, node_id, "Node reboot requested")
                successful.append(node_id)
            else:
                self._begin_replacement(node)
                self.add_event(cluster_name, node_id, "Node replacement requested")
                successful.append(node_id)
        return BatchResult(tuple(successful), tuple(failed), self._request_id())

    def _begin_reboot(self, node: FakeNode) -> None:
        node.status = NodeStatus.PENDING.value
        node.pending = "reboot"
        node.polls_left = self.reboot_polls
        node.reboots += 1
        self._until(node, self.takes.reboot if self.takes else None)

    def _begin_replacement(self, node: FakeNode) -> None:
        node.status = NodeStatus.SHUTTING_DOWN.value
        node.pending = "replacement"
        node.polls_left = self.replacement_polls
        self._until(node, self.takes.replacement if self.takes else None)

    def _until(self, node: FakeNode, seconds: float | None) -> None:
        node.done_at = None if seconds is None else self.now() + timedelta(seconds=seconds)

    def _progress(self, cluster: FakeCluster, node: FakeNode) -> None:
        if node.pending is None:
            return
        if node.done_at is not None:
            if self.now() < node.done_at:
                return
            node.done_at, node.polls_left = None, 0
        if node.polls_left > 0:
            node.polls_left -= 1
            return
        if node.pending == "reboot":
            if node.reboot_returns:
                node.pending = None
                node.status = NodeStatus.RUNNING.value
                node.message = None
                self.add_event(cluster.name, node.instance_id, "Node rebooted; it is Running")
            return
        if node.pending == "health_check":
            node.pending = None
            self._tell_check(cluster, node, running=False)
            failed = [c for c in node.checks if c in node.failing_checks]
            if node.health_check_passes and not failed:
                node.status = NodeStatus.RUNNING.value
                node.message = None
                self.add_event(cluster.name, node.instance_id, "Deep health check passed")
                return
            check = failed[0] if failed else HealthCheck.INSTANCE_STRESS.value
            failure = f"{check}: {CHECK_FAILURES[check]}"
            self.add_event(
                cluster.name,
                node.instance_id,
                "Deep health check failed",
                level=EventLevel.ERROR.value,
                failure=failure,
            )
            if cluster.node_recovery == NodeRecovery.AUTOMATIC:
                node.message = f"Deep health check failed ({failure}); HyperPod replaces the node"
                self._begin_replacement(node)
                self.add_event(
                    cluster.name,
                    node.instance_id,
                    "Node replacement started by HyperPod (NodeRecovery Automatic)",
                    level=EventLevel.WARN.value,
                )
            else:
                node.status = NodeStatus.FAILURE.value
                node.message = f"Deep health check failed: {failure}"
            return
        new_id = self._new_instance_id()
        self.add_event(cluster.name, node.instance_id, f"Node replaced by {new_id}")
        del cluster.nodes[node.instance_id]
        cluster.nodes[new_id] = FakeNode(
            instance_id=new_id,
            instance_group=node.instance_group,
            logical_id=node.logical_id,
            instance_type=node.instance_type,
            hostname=node.hostname,
        )
        self.replaced_by[node.instance_id] = new_id

    def _tell_check(self, cluster: FakeCluster, node: FakeNode, *, running: bool) -> None:
        for watch in self.check_watchers:
            watch(cluster.name, node, running)

    def _info(self, cluster: FakeCluster, node: FakeNode) -> NodeInfo:
        return NodeInfo(
            cluster_name=cluster.name,
            instance_id=node.instance_id,
            instance_group=node.instance_group,
            status=NodeStatus(node.status),
            message=node.message,
            logical_id=node.logical_id,
            instance_type=node.instance_type,
            request_id=self._request_id(),
            hostname=node.hostname,
        )

    def _call(self, operation: str, **params: Any) -> None:
        self.calls.append(FakeCall(operation, params))
        for observe in self.observers:
            observe(operation, params)
        queued = self._failures.get(operation)
        if queued:
            raise queued.pop(0)

    def _cluster(self, name: str) -> FakeCluster:
        cluster = self.clusters.get(name)
        if cluster is None:
            raise ClusterNotFound(
                f"cluster {name} not found",
                operation="DescribeCluster",
                code="ResourceNotFound",
                request_id=self._request_id(),
            )
        return cluster

    def _node(self, cluster_name: str, node_id: str, operation: str) -> FakeNode:
        node = self._cluster(cluster_name).nodes.get(node_id)
        if node is None:
            raise self._not_found(cluster_name, node_id, operation)
        return node

    def _not_found(
        self, cluster_name: str, node_id: str, operation: str = "DescribeClusterNode"
    ) -> NodeNotFound:
        return NodeNotFound(
            f"node {node_id} not found in cluster {cluster_name}",
            operation=operation,
            code="ResourceNotFound",
            request_id=self._request_id(),
        )

    def _validation(self, message: str) -> DependencyFailed:
        return DependencyFailed(message, code="ValidationException", request_id=self._request_id())

    def _request_id(self) -> str:
        return f"fake-{next(self._requests):06d}"

    def _new_instance_id(self) -> str:
        return f"i-0f{next(self._ids):015x}"


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import HyperPod

    _port: HyperPod = FakeHyperPod()
