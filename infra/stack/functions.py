"""The Lambda functions of docs/pipeline.md: one per handler module, each with its own role, log
group and least-privilege grants.

The permission matrix lives in `SPECS` below, one line per function, so that a reviewer reads
who may do what in one place (and docs/deploy.md repeats it as a table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Final

from aws_cdk import AssetHashType, Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sdc_remediation.infra.stack import asset as asset_build
from sdc_remediation.infra.stack.audit_anchor import AuditAnchorLog
from sdc_remediation.infra.stack.dependencies import depend_on_role_policy_only
from sdc_remediation.infra.stack.log_groups import retained_log_group
from sdc_remediation.infra.stack.nag import (
    SQS_MANAGED_ENCRYPTION,
    acknowledge,
    acknowledge_checkov,
    acknowledge_iam_lint,
)
from sdc_remediation.infra.stack.notifications import Notifications
from sdc_remediation.infra.stack.pause import PauseSwitch
from sdc_remediation.infra.stack.settings import (
    Cluster,
    DeploymentSettings,
    TelemetrySource,
    settings_env,
)
from sdc_remediation.infra.stack.storage import Storage
from sdc_remediation.infra.stack.workflow import executions_arn, remediation_name
from sdc_remediation.lambdas.adapters._aws import (
    CONNECT_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    worst_call_seconds,
)
from sdc_remediation.lambdas.adapters.kubernetes import (
    TIMEOUT_SECONDS as KUBERNETES_TIMEOUT_SECONDS,
)
from sdc_remediation.lambdas.adapters.prometheus import TIMEOUT_SECONDS as TELEMETRY_TIMEOUT_SECONDS
from sdc_remediation.lambdas.adapters.slurm import WAIT_SECONDS as SLURM_WAIT_SECONDS
from sdc_remediation.lambdas.logic.core.steps import NOTICE_RETRY_WINDOW_SECONDS
from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE, SERVICE_NAME
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.lifecycle_event import LIFECYCLE_SOURCE
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace, list_env
from sdc_remediation.lambdas.models.slurm import RUN_SHELL_SCRIPT

RUNTIME: Final = {
    "3.12": lambda_.Runtime.PYTHON_3_12,
    "3.13": lambda_.Runtime.PYTHON_3_13,
}[asset_build.PYTHON_VERSION]
"""The runtime the asset's binary wheels are built for (asset.PYTHON_VERSION)."""

HYPERPOD_READ: Final = (
    "sagemaker:DescribeCluster",
    "sagemaker:DescribeClusterNode",
    "sagemaker:ListClusterNodes",
)
HYPERPOD_EVENTS: Final = ("sagemaker:ListClusterEvents", "sagemaker:DescribeClusterEvent")
"""HyperPod's own events about a node, for the approval card."""
START_HEALTH_CHECK: Final = "sagemaker:StartClusterHealthCheck"
REPLACE_NODES: Final = "sagemaker:BatchReplaceClusterNodes"
REBOOT_NODES: Final = "sagemaker:BatchRebootClusterNodes"
TASK_RESPONSE: Final = ("states:SendTaskSuccess", "states:SendTaskFailure")
QUERY_TELEMETRY: Final = "aps:QueryMetrics"
PUT_EVENTS: Final = "events:PutEvents"
LIFECYCLE_BUS: Final = "default"
"""Where every function puts the incident lifecycle events (source `sdc.remediation`): the
account's default bus, where a team's own rules already live."""
EVENT_SUBJECTS: Final = "event#"
"""Audit subjects of events tied to no incident: only the intake functions write them."""
DECISION_SUBJECTS: Final = "decision#"
"""Audit subjects of decisions naming no incident: only decide writes them."""

ACTIONS_NEWER_THAN_IAM_LINT: Final = (
    START_HEALTH_CHECK,
    REPLACE_NODES,
    REBOOT_NODES,
    *HYPERPOD_EVENTS,
)
"""HyperPod actions the IAM linter's database does not know yet (acknowledged where granted)."""

CHECKOV_FUNCTION_ACKNOWLEDGEMENTS: Final = {
    "CKV_AWS_116": "No dead-letter queue setting, by design: the two functions EventBridge invokes "
    "asynchronously send a failed event to an on-failure destination queue (EventInvokeConfig), "
    "which keeps the event and the error, more than a DLQ does; the state machines invoke the "
    "others synchronously, where a DLQ never applies and the execution catches the error.",
    "CKV_AWS_117": "Not in a VPC, by design: the functions reach only AWS APIs and, for node "
    "isolation, the EKS cluster's public API endpoint; they hold no network-reachable resource. "
    "A VPC would need a NAT gateway or eight interface endpoints for no gain in isolation "
    "(docs/deploy.md says what a private-only EKS endpoint needs).",
    "CKV_AWS_173": "The environment holds only table, topic and state machine names and ARNs and "
    "numeric settings, no secret; Lambda encrypts it at rest with an AWS managed key. A customer "
    "managed key would add a standing cost and a key policy to keep for nothing secret.",
}
"""checkov's Lambda checks that every function acknowledges, with the reason."""

NO_CONCURRENCY_CAP: Final = (
    "No reserved concurrency, by design, on the functions that neither take events in nor act "
    "on a node: they only read, poll or record a human's decision, and run in the account's "
    "unreserved concurrency, which the caps keep a flood of events from taking. The six "
    "functions that change a node get the sdc:nodeActionConcurrency cap, the two intake "
    "functions (store_report, open_incident) the sdc:intakeConcurrency cap."
)

ASYNC_RETRY_ATTEMPTS: Final = 2
ASYNC_MAX_EVENT_AGE: Final = Duration.hours(6)


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda function: its handler module and exactly what it may do besides the tables."""

    module: str
    description: str
    hyperpod: tuple[str, ...] = ()
    publishes: bool = False
    starts_remediation: bool = False
    answers_approval: bool = False
    reads_pause_switch: bool = False
    """Acts on a cluster (opens incidents, starts health checks, replaces nodes): reads the pause
    switch first."""
    kubernetes: bool = False
    """Cordons or uncordons nodes through the EKS clusters of `sdc:nodeIsolation`: gets
    eks:DescribeCluster on them, `NODE_ISOLATION`, and an access entry (node_isolation.py)."""
    checks_claims: bool = False
    """Checks the node names a report claims against the Kubernetes API of the clusters of
    `sdc:nodeIsolation`, read only (lambdas/logic/opening/claims.py): gets eks:DescribeCluster on them,
    `NODE_ISOLATION`, and an access entry in the read-only group (node_isolation.py)."""
    asynchronous: bool = False
    """Invoked by EventBridge (asynchronously): failures after retries go to the failure queue."""
    recovers: bool = False
    """Carries out an approved reboot or replacement: with `sdc:recoveryThroughNodeLabel` it
    sets HyperPod's node health label, so it gets the Kubernetes access `kubernetes` gives."""
    reads_nodes: bool = False
    """Reads the suspect node's HyperPod labels where node isolation is on (get and list nodes
    only): gets `NODE_ISOLATION`, eks:DescribeCluster and a read-only access entry."""
    queries_telemetry: bool = False
    """Reads the suspect GPU's hardware counters from the clusters' Prometheus workspaces
    (`sdc:telemetry`): gets aps:QueryMetrics on exactly those and `TELEMETRY`."""
    intake: bool = False
    """Takes events in (reports, alarms): its concurrency is capped at `sdc:intakeConcurrency`,
    so a flood of events waits in Lambda's asynchronous queue instead of starving the functions
    a person waits on (decide, request_approval, check_health)."""
    reports: bool = False
    """Takes SDC reports in: its failed events go to a queue and alarm of their own
    (FailedReportsQueue), apart from the alarm path's, so a junk report keeps no alarm red that
    a lost contributor alarm should raise."""
    acts_on_nodes: bool = False
    """Changes a node (cordon, deep health check, replacement, release): its concurrency is
    capped at `sdc:nodeActionConcurrency`, a limit beyond the guard's."""
    reconciles: bool = False
    """Settles stuck incidents (scheduled): reads the remediation executions' status
    (states:DescribeExecution on them)."""
    verifies_audit: bool = False
    """The scheduled audit check: scans the audit table and reads the audit anchor."""
    timeout_seconds: int = 60

    @property
    def handler(self) -> str:
        return f"sdc_remediation.lambdas.handlers.{self.module}.handler"

    @property
    def logical_id(self) -> str:
        """`open_incident` → `OpenIncidentFunction`: stable, so tests and the local run can map
        the state machine definitions' references to handlers."""
        return "".join(part.title() for part in self.module.split("_")) + "Function"


SPECS: Final = (
    FunctionSpec(
        "open_incident",
        "Opens an incident for a contributor ALARM and starts the remediation execution",
        hyperpod=HYPERPOD_READ,
        publishes=True,
        # The training watch's evidence alone: its node's telemetry decides the row's course.
        queries_telemetry=True,
        starts_remediation=True,
        reads_pause_switch=True,
        checks_claims=True,
        asynchronous=True,
        intake=True,
        timeout_seconds=90,
    ),
    FunctionSpec(
        "store_report",
        "Stores an SDC Report event as evidence; opens the incidents it names",
        hyperpod=HYPERPOD_READ,
        publishes=True,
        # The training watch's evidence alone: its node's telemetry decides the row's course.
        queries_telemetry=True,
        starts_remediation=True,
        reads_pause_switch=True,
        checks_claims=True,
        asynchronous=True,
        intake=True,
        reports=True,
        timeout_seconds=90,
    ),
    FunctionSpec(
        "isolate_node",
        "Isolates the suspect node: a cordon and taint through the EKS cluster's Kubernetes "
        "API, or a drain on the Slurm controller",
        # DescribeClusterNode: a Slurm node's name is its host name (PrivateDnsHostname).
        hyperpod=("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode"),
        reads_pause_switch=True,
        kubernetes=True,
        timeout_seconds=90,
        acts_on_nodes=True,
    ),
    FunctionSpec(
        "start_health_check",
        "Starts the HyperPod deep health check on the suspect node",
        hyperpod=(*HYPERPOD_READ, START_HEALTH_CHECK),
        reads_pause_switch=True,
        timeout_seconds=60,
        acts_on_nodes=True,
    ),
    FunctionSpec(
        "check_health",
        "Polls the deep health check; its last poll holds the incident if the cluster is held",
        hyperpod=HYPERPOD_READ,
        reads_pause_switch=True,
    ),
    FunctionSpec(
        "request_approval",
        "Stores the task token and asks a human to approve the replacement",
        hyperpod=HYPERPOD_EVENTS,
        publishes=True,
        reads_nodes=True,
        queries_telemetry=True,
        timeout_seconds=90,
    ),
    FunctionSpec(
        "replace_node",
        "Re-checks the node and requests its replacement",
        hyperpod=(*HYPERPOD_READ, REPLACE_NODES),
        reads_pause_switch=True,
        timeout_seconds=90,
        acts_on_nodes=True,
        recovers=True,
    ),
    FunctionSpec("check_replacement", "Polls the node replacement", hyperpod=HYPERPOD_READ),
    FunctionSpec(
        "reboot_node",
        "Re-checks the node and requests its reboot (an approver chose reboot)",
        hyperpod=(*HYPERPOD_READ, REBOOT_NODES),
        reads_pause_switch=True,
        timeout_seconds=90,
        acts_on_nodes=True,
        recovers=True,
    ),
    FunctionSpec(
        "check_reboot", "Polls the rebooted node until it is Running again", hyperpod=HYPERPOD_READ
    ),
    FunctionSpec(
        "close_incident",
        "Closes the incident with its outcome, lifts the node's isolation and notifies",
        publishes=True,
        kubernetes=True,
        # The notice's retries and, on a Slurm cluster, the wait for the resume command's
        # result on the controller (below the state machine task's own timeout).
        timeout_seconds=110,
        acts_on_nodes=True,
    ),
    FunctionSpec(
        "decide",
        "Validates an approval decision and completes the waiting remediation task",
        # `proceed` re-checks a held job's nodes (HyperPod, Kubernetes), reads the pause switch
        # and starts the remediation of the job-level incident it opens.
        hyperpod=("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode"),
        publishes=True,
        starts_remediation=True,
        answers_approval=True,
        reads_pause_switch=True,
        checks_claims=True,
        timeout_seconds=90,
    ),
    FunctionSpec(
        "reconcile",
        "Settles stuck incidents from HyperPod's and Step Functions' state (scheduled)",
        hyperpod=(*HYPERPOD_READ, START_HEALTH_CHECK),
        publishes=True,
        starts_remediation=True,
        # A claim the rate bound held is taken again down the intake's path (`rate_held`).
        reads_pause_switch=True,
        queries_telemetry=True,
        kubernetes=True,
        reconciles=True,
        acts_on_nodes=True,
        timeout_seconds=300,
    ),
    FunctionSpec(
        "verify_audit",
        "Checks every audit chain against the audit anchor on a schedule",
        verifies_audit=True,
        timeout_seconds=300,
    ),
)

PAGE: Final = FunctionSpec(
    "incidents_page",
    "Renders the open incidents as the dashboard's custom widget (reads the by_state index only)",
)
"""The dashboard's page (`Functions.page`): outside `SPECS`, because it holds none of the
grants every pipeline function has (tables, audit, events, anchor): one `dynamodb:Query` on the
incidents table's `by_state` index. The console invokes it with the viewer's credentials."""

SWEEP: Final = FunctionSpec(
    "sweep_idle",
    "Health-checks idle nodes of one cluster on its schedule (sdc:idleSweep); a failed check "
    "opens an incident through the intake",
    hyperpod=(*HYPERPOD_READ, START_HEALTH_CHECK),
    publishes=True,
    starts_remediation=True,
    reads_pause_switch=True,
    checks_claims=True,
    asynchronous=True,
    acts_on_nodes=True,
    timeout_seconds=300,
)
"""The idle sweep (`Functions.sweep`): outside `SPECS`, because it exists only with
`sdc:idleSweep`, and its HyperPod grants name the swept clusters only. It reads the Kubernetes
API (nodes, pods) of the swept EKS clusters and the Slurm controllers' node list (Run Command);
one run at a time (reserved concurrency 1): two runs of a cluster at once would each take the
share."""

ALL_FUNCTIONS: Final = (*SPECS, PAGE)
"""Every function the stack deploys: the pipeline's and the page (and, with `sdc:idleSweep`,
`SWEEP`)."""


RECORD_CALLS: Final = 3
"""The AWS calls that record a failed step (read the incident, save it, append the audit entry),
each given one attempt's connect and read timeouts."""
KUBERNETES_REQUESTS: Final = 3
"""The Kubernetes API requests one node's cordon or release makes (find, read, patch)."""
ROOM_SECONDS: Final = 5
"""What is left over for the function's own work and the runtime."""


def time_budget_seconds(spec: FunctionSpec) -> float:
    """The longest an invocation of `spec` can need when one call hangs: that AWS call with all
    its attempts (`sdc_remediation.lambdas.adapters._aws.worst_call_seconds`), the calls that record its
    failure, the Kubernetes requests (each bounded by its timeout), the telemetry query, a
    notice with its retries, and `ROOM_SECONDS`. Every function's timeout is at least this
    (tests/infra/test_functions.py), so a hung call ends as a recorded, retryable error rather
    than a killed function."""
    per_attempt = CONNECT_TIMEOUT_SECONDS + READ_TIMEOUT_SECONDS
    budget = worst_call_seconds() + RECORD_CALLS * per_attempt + ROOM_SECONDS
    if spec.kubernetes or spec.recovers:
        # One incident is on one cluster: its Kubernetes requests, or its Slurm command (the
        # wait for its result and the two Run Command calls), never both.
        slurm = SLURM_WAIT_SECONDS + 2 * per_attempt if spec.kubernetes else 0
        budget += max(KUBERNETES_REQUESTS * KUBERNETES_TIMEOUT_SECONDS, slurm)
    if spec.queries_telemetry:
        budget += TELEMETRY_TIMEOUT_SECONDS
    if spec.publishes:
        budget += NOTICE_RETRY_WINDOW_SECONDS + worst_call_seconds()
    return budget


def cluster_arn(scope: Construct, cluster: Cluster) -> str:
    """The configured ARN, or `arn:<partition>:sagemaker:<region>:<account>:cluster/<id>` for
    the stack's own account and region when the context gave the cluster id."""
    return cluster.arn or Stack.of(scope).format_arn(
        service="sagemaker", resource="cluster", resource_name=cluster.cluster_id
    )


def eks_cluster_arn(scope: Construct, name: str) -> str:
    """`arn:<partition>:eks:<region>:<account>:cluster/<name>` in the stack's account and region."""
    return Stack.of(scope).format_arn(service="eks", resource="cluster", resource_name=name)


def controller_instance_arn(scope: Construct, instance_id: str) -> str:
    """`arn:<partition>:ec2:<region>:<account>:instance/<id>`: a Slurm controller of
    `sdc:slurmControllers`, the only instances Run Command may target."""
    return Stack.of(scope).format_arn(service="ec2", resource="instance", resource_name=instance_id)


def run_shell_document_arn(scope: Construct) -> str:
    """AWS's own `AWS-RunShellScript` document: `arn:<partition>:ssm:<region>::document/...`
    (an AWS-owned document has no account in its ARN)."""
    return Stack.of(scope).format_arn(
        service="ssm", resource="document", resource_name=RUN_SHELL_SCRIPT, account=""
    )


def workspace_arn(scope: Construct, source: TelemetrySource) -> str:
    """The configured ARN, or `arn:<partition>:aps:<region>:<account>:workspace/<id>` for the
    stack's own account and region when the context gave the workspace id."""
    return source.arn or Stack.of(scope).format_arn(
        service="aps", resource="workspace", resource_name=source.workspace_id
    )


def telemetry_env(scope: Construct, sources: Sequence[TelemetrySource]) -> str:
    """`TELEMETRY` for the functions: cluster → its workspace's id, query URL (the Prometheus
    HTTP API is under it), signing region, dashboard and node label (the lambdas' format)."""
    stack = Stack.of(scope)
    config = {}
    for source in sources:
        region = source.region or stack.region
        suffix = source.url_suffix or stack.url_suffix
        config[source.cluster] = asdict(
            TelemetryWorkspace(
                workspace_id=source.workspace_id,
                query_url=f"https://aps-workspaces.{region}.{suffix}/workspaces/{source.workspace_id}",
                region=region,
                dashboard=source.dashboard,
                node_label=source.node_label,
            )
        )
    return stack.to_json_string(config)


def _default_policy(fn: lambda_.Function) -> iam.Policy:
    """The function role's default policy, where `add_to_role_policy` puts statements."""
    assert fn.role is not None
    policy = fn.role.node.try_find_child("DefaultPolicy")
    if not isinstance(policy, iam.Policy):
        raise TypeError(f"{fn.node.path}: the role has no default policy yet")
    return policy


@dataclass(frozen=True)
class FunctionsProps:
    """What the functions are given: the resources they are granted, the values of their
    environment, and the ARNs their grants name."""

    code_asset: asset_build.LambdaAsset
    storage: Storage
    """The tables every function reads and writes (its grants, item-level and append-only)."""
    audit_anchor: AuditAnchorLog
    notifications: Notifications
    pause_switch: PauseSwitch
    remediation_arn: str
    """The remediation state machine: the intake functions start it, decide answers its tasks."""
    remediation_name: str
    """Its name: reconcile reads its executions, whose ARNs start with it."""
    environment: Mapping[EnvVar, str]
    """Every variable's value (`shared_environment`); each function gets its own subset
    (`environment_names`). `NODE_ISOLATION` and `TELEMETRY` only when configured."""
    cluster_arns: Sequence[str]
    """The HyperPod clusters of `sdc:clusters`: the only ones a function may read or act on."""
    eks_cluster_arns: Sequence[str]
    """The EKS clusters of `sdc:nodeIsolation`: the functions that reach Kubernetes describe them."""
    workspace_arns: Sequence[str]
    """The Prometheus workspaces of `sdc:telemetry`: request_approval queries them, and so do
    the intake functions for the training watch's evidence alone (the corroboration a
    straggler's decision table row asks for)."""
    controller_arns: Sequence[str]
    """The Slurm controllers of `sdc:slurmControllers` (instance ARNs): the functions that drain
    and release nodes send them commands."""
    run_shell_document_arn: str
    recovery_through_label: bool
    """`sdc:recoveryThroughNodeLabel` names a cluster: replace_node and reboot_node patch nodes."""
    log_retention_days: int
    node_action_concurrency: int
    """The reserved concurrency of each function that changes a node."""
    intake_concurrency: int
    """The reserved concurrency of each intake function (store_report, open_incident)."""
    swept_cluster_arns: Sequence[str] = ()
    """The clusters of `sdc:idleSweep` (a subset of `cluster_arns`): the sweep function exists
    only with some, and may read and health-check only those."""
    swept_controller_arns: Sequence[str] = ()
    """The Slurm controllers of the swept clusters: the sweep reads their node lists."""

    @classmethod
    def from_settings(
        cls,
        scope: Construct,
        settings: DeploymentSettings,
        *,
        code_asset: asset_build.LambdaAsset,
        storage: Storage,
        audit_anchor: AuditAnchorLog,
        notifications: Notifications,
        pause_switch: PauseSwitch,
        remediation_arn: str,
        approval_arn: str,
    ) -> FunctionsProps:
        """`remediation_arn` / `approval_arn` are the state machines' ARNs, known before the
        state machines exist because their names are fixed (see workflow.py); ARNs given as ids
        are completed in `scope`'s stack."""
        return cls(
            code_asset=code_asset,
            storage=storage,
            audit_anchor=audit_anchor,
            notifications=notifications,
            pause_switch=pause_switch,
            remediation_arn=remediation_arn,
            remediation_name=remediation_name(settings.stack_name),
            environment=shared_environment(
                scope,
                settings,
                storage=storage,
                audit_anchor=audit_anchor,
                notifications=notifications,
                pause_switch=pause_switch,
                remediation_arn=remediation_arn,
                approval_arn=approval_arn,
            ),
            cluster_arns=tuple(cluster_arn(scope, cluster) for cluster in settings.clusters),
            eks_cluster_arns=tuple(eks_cluster_arn(scope, name) for name in settings.eks_clusters),
            workspace_arns=tuple(
                sorted({workspace_arn(scope, source) for source in settings.telemetry})
            ),
            controller_arns=tuple(
                controller_instance_arn(scope, instance_id)
                for _, instance_id in settings.slurm_controllers
            ),
            run_shell_document_arn=run_shell_document_arn(scope),
            recovery_through_label=bool(settings.recovery_label_clusters),
            log_retention_days=settings.log_retention_days,
            node_action_concurrency=settings.node_action_concurrency,
            intake_concurrency=settings.intake_concurrency,
            swept_cluster_arns=tuple(
                cluster_arn(scope, cluster)
                for cluster in settings.clusters
                if settings.idle_sweep and cluster.name in settings.idle_sweep.clusters
            ),
            swept_controller_arns=tuple(
                controller_instance_arn(scope, instance_id)
                for name, instance_id in settings.slurm_controllers
                if settings.idle_sweep and name in settings.idle_sweep.clusters
            ),
        )


def shared_environment(
    scope: Construct,
    settings: DeploymentSettings,
    *,
    storage: Storage,
    audit_anchor: AuditAnchorLog,
    notifications: Notifications,
    pause_switch: PauseSwitch,
    remediation_arn: str,
    approval_arn: str,
) -> dict[EnvVar, str]:
    """The value of every environment variable (docs/pipeline.md, "Environment"); `NODE_ISOLATION`
    and `TELEMETRY` only when their settings are given."""
    values: dict[EnvVar, str] = {
        EnvVar.INCIDENTS_TABLE: storage.incidents.table_name,
        EnvVar.AUDIT_TABLE: storage.audit.table_name,
        EnvVar.TOPIC_ARN: notifications.topic.topic_arn,
        EnvVar.STATE_MACHINE_ARN: remediation_arn,
        EnvVar.ALLOWED_CLUSTERS: list_env(settings.cluster_names),
        EnvVar.EVENT_BUS_NAME: LIFECYCLE_BUS,
        EnvVar.APPROVAL_STATE_MACHINE_ARN: approval_arn,
        EnvVar.PAUSE_PARAMETER: pause_switch.name,
        **settings_env(settings),
        EnvVar.AUDIT_ANCHOR_LOG_GROUP: audit_anchor.name,
        EnvVar.POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        EnvVar.POWERTOOLS_METRICS_NAMESPACE: PIPELINE_NAMESPACE,
    }
    if settings.node_isolation or settings.slurm_controllers:
        values[EnvVar.NODE_ISOLATION] = settings.node_isolation_env()
    if settings.telemetry:
        values[EnvVar.TELEMETRY] = telemetry_env(scope, settings.telemetry)
    return values


def patches_nodes(spec: FunctionSpec, props: FunctionsProps) -> bool:
    """Whether the function changes nodes through the Kubernetes API: it cordons or releases
    them, or sets HyperPod's node health label for a recovery (`sdc:recoveryThroughNodeLabel`)."""
    return spec.kubernetes or (spec.recovers and props.recovery_through_label)


def reads_kubernetes(spec: FunctionSpec, props: FunctionsProps) -> bool:
    """Whether the function only reads the Kubernetes API (report claims, node labels)."""
    return (spec.checks_claims or spec.reads_nodes) and not patches_nodes(spec, props)


def environment_names(spec: FunctionSpec, props: FunctionsProps) -> tuple[EnvVar, ...]:
    """The environment variables the function of `spec` gets, in `EnvVar` order:
    docs/pipeline.md, "Environment", shows them function by function."""
    kubernetes = patches_nodes(spec, props) or reads_kubernetes(spec, props)
    some = {
        EnvVar.STATE_MACHINE_ARN: spec.starts_remediation,
        EnvVar.PAUSE_PARAMETER: spec.reads_pause_switch,
        EnvVar.NODE_ISOLATION: kubernetes and EnvVar.NODE_ISOLATION in props.environment,
        EnvVar.TELEMETRY: spec.queries_telemetry and EnvVar.TELEMETRY in props.environment,
    }
    return tuple(name for name in EnvVar if some.get(name, True))


class Functions(Construct):
    """All functions, one per `SPECS` entry, each granted what its spec says."""

    def __init__(self, scope: Construct, construct_id: str, *, props: FunctionsProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.failure_queue = self._failure_queue(
            "FailedInvocationsQueue", "open_incident (contributor alarms)"
        )
        self.report_failure_queue = self._failure_queue(
            "FailedReportsQueue", "store_report (SDC reports)"
        )
        code = lambda_.Code.from_asset(
            str(props.code_asset.path),
            asset_hash=props.code_asset.key,
            asset_hash_type=AssetHashType.CUSTOM,
        )
        self.by_module: dict[str, lambda_.Function] = {}
        self.kubernetes_roles: list[iam.IRole] = []
        self.recovery_roles: list[iam.IRole] = []
        self.kubernetes_readers: list[iam.IRole] = []
        for spec in SPECS:
            self._pipeline_function(spec, code)
        self.page = self._page_function(code)
        self.by_module[PAGE.module] = self.page
        self.sweep = self._sweep_function(code) if props.swept_cluster_arns else None

    def _pipeline_function(
        self,
        spec: FunctionSpec,
        code: lambda_.Code,
        clusters: Sequence[str] | None = None,
        controllers: Sequence[str] = (),
    ) -> lambda_.Function:
        """A function with the pipeline's grants: its tables, audit and events, HyperPod on
        `clusters` (None: every configured one), the Slurm `controllers` given beyond those its
        spec reaches, its state machines."""
        env = {
            name.value: self.props.environment[name] for name in environment_names(spec, self.props)
        }
        fn = self._function(spec, code, env)
        self._grant_pipeline_resources(spec, fn)
        self._grant_clusters(spec, fn, clusters)
        if controllers:
            self._grant_slurm_controllers(fn, controllers)
        self._grant_state_machines(spec, fn)
        self._acknowledge_newer_actions(spec, fn)
        assert fn.role is not None
        depend_on_role_policy_only(fn, fn.role)
        self.by_module[spec.module] = fn
        return fn

    def _sweep_function(self, code: lambda_.Code) -> lambda_.Function:
        """The idle sweep: the pipeline's grants, HyperPod on the swept clusters only, the
        Slurm controllers' node list, one run at a time."""
        fn = self._pipeline_function(
            SWEEP, code, self.props.swept_cluster_arns, self.props.swept_controller_arns
        )
        cfn = fn.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.reserved_concurrent_executions = 1
        return fn

    def _page_function(self, code: lambda_.Code) -> lambda_.Function:
        """The dashboard's page: the settings every function reads (who may approve, the
        approval timeout and state machine), and a read of the `by_state` index only."""
        env = {
            name.value: self.props.environment[name] for name in environment_names(PAGE, self.props)
        }
        fn = self._function(PAGE, code, env)
        self.props.storage.grant_open_incidents_read(fn)
        assert fn.role is not None
        depend_on_role_policy_only(fn, fn.role)
        return fn

    def _failure_queue(self, construct_id: str, what: str) -> sqs.Queue:
        """Where the failed events of `what` (asynchronously invoked) go after their retries."""
        queue = sqs.Queue(
            self,
            construct_id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter target: the on-failure "
            f"destination of an asynchronously invoked function, {what}. cdk-nag only recognises SQS redrive policies and Lambda "
            "DeadLetterConfig as DLQ use; a DLQ of a DLQ would only move the problem.",
        )
        acknowledge_checkov(queue, "CKV_AWS_27", SQS_MANAGED_ENCRYPTION)
        return queue

    def _grant_pipeline_resources(self, spec: FunctionSpec, fn: lambda_.Function) -> None:
        """The pause switch, the tables, the lifecycle events, the audit anchor and the topic."""
        props = self.props
        if spec.reads_pause_switch:
            props.pause_switch.grant_read(fn)
        props.storage.grant_incidents(fn)
        props.storage.grant_audit_append(fn)
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="IncidentLifecycleEvents",
                actions=[PUT_EVENTS],
                resources=[
                    f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}"
                    f":event-bus/{LIFECYCLE_BUS}"
                ],
                conditions={"StringEquals": {"events:source": LIFECYCLE_SOURCE}},
            )
        )
        props.storage.deny_audit_subjects(
            fn,
            [
                *([] if spec.asynchronous else [EVENT_SUBJECTS]),
                *([] if spec.answers_approval else [DECISION_SUBJECTS]),
            ],
        )
        props.audit_anchor.grant_append(fn)
        if spec.verifies_audit:
            props.storage.grant_audit_scan(fn)
            props.audit_anchor.grant_read(fn)
        if spec.publishes:
            props.notifications.grant_publish(fn)

    def _grant_clusters(
        self, spec: FunctionSpec, fn: lambda_.Function, clusters: Sequence[str] | None = None
    ) -> None:
        """HyperPod on the configured clusters (`clusters`, where given: the swept ones), EKS
        on the isolation clusters (and the role into `kubernetes_roles`, `recovery_roles` or
        `kubernetes_readers` for its access entry), the telemetry workspaces."""
        props = self.props
        cluster_arns = props.cluster_arns if clusters is None else clusters
        if spec.hyperpod and cluster_arns:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="HyperPodConfiguredClusters",
                    actions=list(spec.hyperpod),
                    resources=list(cluster_arns),
                )
            )
        kubernetes = patches_nodes(spec, props)
        if (kubernetes or reads_kubernetes(spec, props)) and props.eks_cluster_arns:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="EksIsolationClusters",
                    actions=["eks:DescribeCluster"],
                    resources=list(props.eks_cluster_arns),
                )
            )
            assert fn.role is not None
            if spec.kubernetes:
                self.kubernetes_roles.append(fn.role)
            elif kubernetes:  # sets the node health label only
                self.recovery_roles.append(fn.role)
            else:
                self.kubernetes_readers.append(fn.role)
        if spec.kubernetes and props.controller_arns:
            self._grant_slurm_controllers(fn)
        if spec.queries_telemetry and props.workspace_arns:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="QueryHardwareTelemetry",
                    actions=[QUERY_TELEMETRY],
                    resources=list(props.workspace_arns),
                )
            )

    def _grant_slurm_controllers(
        self, fn: lambda_.Function, controllers: Sequence[str] | None = None
    ) -> None:
        """Run Command of AWS-RunShellScript to the controllers of `sdc:slurmControllers` only
        (`controllers`, where given: the swept clusters'), and reading those commands' results
        back."""
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="SlurmControllersRunCommand",
                actions=["ssm:SendCommand"],
                resources=[
                    self.props.run_shell_document_arn,
                    *(self.props.controller_arns if controllers is None else controllers),
                ],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="SlurmCommandResults",
                actions=["ssm:GetCommandInvocation"],
                resources=["*"],
            )
        )

    def _grant_state_machines(self, spec: FunctionSpec, fn: lambda_.Function) -> None:
        """Start a remediation, read its executions (reconcile), answer its approval task."""
        props = self.props
        if spec.starts_remediation:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="StartRemediation",
                    actions=["states:StartExecution"],
                    resources=[props.remediation_arn],
                )
            )
        if spec.reconciles:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="ReadRemediationExecutions",
                    actions=["states:DescribeExecution"],
                    resources=[executions_arn(self, props.remediation_name)],
                )
            )
            assert fn.role is not None
            acknowledge(
                fn.role,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
                f"<AWS::AccountId>:execution:{props.remediation_name}:*]",
                "Reconciliation reads the status of the remediation execution of any stuck "
                "incident; execution names are the incident ids, known only at run time, so "
                "the resource is every execution of the remediation state machine (one "
                "machine, read only: states:DescribeExecution).",
            )
            acknowledge_iam_lint(
                _default_policy(fn),
                "RESOURCE_MISMATCH",
                ["states:DescribeExecution"],
                "DescribeExecution takes a Standard execution's ARN "
                "(arn:...:execution:<machine>:<name>, the resource type the service "
                "authorization reference lists first); the linter matches it only against "
                "the Express form. The remediation state machine is Standard.",
            )
        if spec.answers_approval:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="AnswerApprovalTask",
                    actions=list(TASK_RESPONSE),
                    resources=[props.remediation_arn],
                )
            )
            acknowledge_iam_lint(
                _default_policy(fn),
                "RESOURCE_MISMATCH",
                list(TASK_RESPONSE),
                "The service authorization reference lists no resource type for "
                "SendTaskSuccess/SendTaskFailure, but IAM evaluates them against the state "
                "machine whose task token is answered (AccessDenied for them names that "
                "state machine's ARN; CDK's grantTaskResponse scopes them the same way). "
                "Scoping to the remediation machine keeps decide from answering any other "
                "workflow's tokens; '*' would allow every task token in the account.",
            )

    def _acknowledge_newer_actions(self, spec: FunctionSpec, fn: lambda_.Function) -> None:
        """The HyperPod actions the IAM linter does not know yet, where they are granted."""
        for action in spec.hyperpod:
            if action in ACTIONS_NEWER_THAN_IAM_LINT and self.props.cluster_arns:
                acknowledge_iam_lint(
                    _default_policy(fn),
                    "UNKNOWN_ACTION",
                    [action],
                    f"{action} is a SageMaker HyperPod API operation (in botocore's "
                    "sagemaker model, which tests/infra/test_validators.py checks) newer "
                    "than the IAM linter's action database; IAM names actions after the "
                    "operations, with the cluster as their resource type.",
                )

    def _function(
        self,
        spec: FunctionSpec,
        code: lambda_.Code,
        env: dict[str, str],
    ) -> lambda_.Function:
        name = spec.logical_id.removesuffix("Function")
        log_group = retained_log_group(self, f"{name}Logs", self.props.log_retention_days)
        role = iam.Role(
            self,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{spec.module}: {spec.description}"[:1000],
        )
        log_group.grant_write(role)
        fn = lambda_.Function(
            self,
            name,
            runtime=RUNTIME,
            handler=spec.handler,
            code=code,
            description=spec.description,
            role=role,
            environment=env,
            timeout=Duration.seconds(spec.timeout_seconds),
            memory_size=256,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            # Asynchronous invocations (EventBridge): retry, then keep the failed event.
            on_failure=(
                destinations.SqsDestination(
                    self.report_failure_queue if spec.reports else self.failure_queue
                )
                if spec.asynchronous
                else None
            ),
            retry_attempts=ASYNC_RETRY_ATTEMPTS if spec.asynchronous else None,
            max_event_age=ASYNC_MAX_EVENT_AGE if spec.asynchronous else None,
            reserved_concurrent_executions=(
                self.props.node_action_concurrency
                if spec.acts_on_nodes
                else self.props.intake_concurrency
                if spec.intake
                else None
            ),
        )
        cfn = fn.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.override_logical_id(spec.logical_id)

        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray tracing (Tracing.ACTIVE) adds xray:PutTraceSegments and "
            "xray:PutTelemetryRecords, which support no resource-level permissions, so "
            "their resource must be '*'; so does ssm:GetCommandInvocation (with "
            "sdc:slurmControllers: it reads back the result of a command this role sent, "
            "which SendCommand scopes to the controllers). Every other statement names its "
            "resources.",
        )
        acknowledge(
            fn,
            "AwsSolutions-L1",
            f"Pinned to python{asset_build.PYTHON_VERSION} on purpose: the asset "
            "ships binary wheels (wrapt, via the Powertools tracer) built by pip for "
            "exactly this CPython. Moving to a newer runtime is a one-line change of "
            "PYTHON_VERSION in infra/stack/asset.py (the wheels follow it).",
        )
        for check_id, reason in CHECKOV_FUNCTION_ACKNOWLEDGEMENTS.items():
            acknowledge_checkov(fn, check_id, reason)
        if not (spec.acts_on_nodes or spec.intake):
            acknowledge_checkov(fn, "CKV_AWS_115", NO_CONCURRENCY_CAP)
        return fn

    @property
    def open_incident(self) -> lambda_.Function:
        return self.by_module["open_incident"]

    @property
    def store_report(self) -> lambda_.Function:
        return self.by_module["store_report"]

    @property
    def decide(self) -> lambda_.Function:
        return self.by_module["decide"]

    @property
    def verify_audit(self) -> lambda_.Function:
        return self.by_module["verify_audit"]
