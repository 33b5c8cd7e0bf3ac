"""Every deployment setting, declared once: its `cdk.json` context key, the attribute that holds it
(on the typed settings of both sides and as the construct's prop), its form, range, default, the
function environment variable that carries it (if any), and what it does.

Everything else is derived from `SETTINGS`: the context parser and the typed deployment settings
(`sdc_remediation.infra.stack.settings`), the construct's props (`sdc_remediation.infra.stack.stack.SdcRemediationProps`), the
function environment the stack writes and the functions read (`sdc_remediation.infra.stack.functions`,
`sdc_remediation.lambdas.models.settings`), and the settings table of docs/settings.md (`python -m
sdc_remediation.infra.stack.settings_table --write`; tests/docs/test_tables_drift.py holds it to this). To add a
setting: one `Setting` here, a field of its attribute on `DeploymentSettings` (and on the
functions' `Settings` where it has an `env`), then regenerate the table; tests/infra/
test_settings_declared.py says what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

from sdc_remediation.lambdas.models.deadline import DEFAULT_TIME_ZONE
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.hyperpod import HealthCheck
from trainer_emitter.contract import NAMESPACE

MAX_APPROVAL_TIMEOUT_SECONDS: Final = 31_536_000
"""One year: a Standard execution's maximum duration, so the longest a task may wait."""
MAX_APPROVALS_REQUIRED: Final = 10


class Form(StrEnum):
    """How a setting's value is written and checked: the parser of each form is
    `sdc_remediation.infra.stack.settings`' (`INTEGER` and `BOOLEAN` need nothing more than the declaration)."""

    INTEGER = "integer"
    BOOLEAN = "boolean"
    STACK_NAME = "stack name"
    CLUSTERS = "clusters"
    TIME_ZONE = "time zone"
    EMAIL = "e-mail address"
    NAMESPACE = "namespace"
    ALARM_NAME_PREFIX = "alarm name prefix"
    HEALTH_CHECKS = "health checks"
    LOG_RETENTION = "log retention"
    NODE_ISOLATION = "node isolation"
    SLURM_CONTROLLERS = "Slurm controllers"
    ISOLATION_ACCESS = "isolation access"
    JOB_PODS = "job pods"
    CLUSTER_NAMES = "cluster names"
    PARAMETER_NAME = "SSM parameter name"
    TELEMETRY = "telemetry"
    HARDWARE_ALERTS = "hardware alerts"
    APPROVERS = "approvers"
    HUMAN_SESSION_ROLES = "human session roles"
    IDLE_SWEEP = "idle sweep"


@dataclass(frozen=True)
class Setting:
    """One deployment setting."""

    key: str
    """The `cdk.json` context key (`sdc:…`)."""
    attr: str
    """The attribute of the typed settings (both sides) and the `SdcRemediationProps` field."""
    form: Form
    low: int | None = None
    """The lowest value an `INTEGER` setting takes."""
    high: int | None = None
    type_text: str | None = None
    """The type as the docs say it; None: derived from the form (`INTEGER`, `BOOLEAN`)."""
    default: Any = None
    """The default as the context key takes it (JSON's shapes); None: unset."""
    default_text: str | None = None
    """The default as the docs show it, where it is derived from another setting."""
    env: EnvVar | None = None
    """The function environment variable that carries it (several settings may share one)."""
    env_built: bool = False
    """The stack builds the variable's value from this setting (with others, or completed);
    False: the variable carries the value as it is (`sdc_remediation.lambdas.models.settings.env_text`)."""
    doc: str = ""
    """What it does (Markdown, one paragraph: the docs table's last column)."""
    renamed_from: tuple[str, ...] = ()
    """Context keys of earlier releases: refused with this key's name."""

    @property
    def type_shown(self) -> str:
        """The type column of the docs table."""
        if self.form is Form.INTEGER:
            return f"integer, {self.low} .. {self.high}"
        if self.form is Form.BOOLEAN:
            return "boolean"
        return self.type_text or str(self.form)

    @property
    def default_shown(self) -> str:
        """The default column of the docs table: the JSON value, or its derivation."""
        return self.default_text or json.dumps(self.default)

    @property
    def typed_default(self) -> Any:
        """The default as the typed settings hold it: lists and objects become tuples (an
        object's entries sorted), everything else as declared."""
        if isinstance(self.default, list):
            return tuple(self.default)
        if isinstance(self.default, Mapping):
            return tuple(sorted(self.default.items()))
        return self.default


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        "sdc:stackName",
        "stack_name",
        Form.STACK_NAME,
        type_text="string",
        default="SdcRemediation",
        doc=(
            "CloudFormation stack name; also prefixes the two state machine names "
            "(`<stack>-remediation`, `<stack>-approval`)"
        ),
    ),
    Setting(
        "sdc:clusters",
        "clusters",
        Form.CLUSTERS,
        type_text="object: cluster name → cluster ARN or 12-character cluster id",
        default={},
        env=EnvVar.ALLOWED_CLUSTERS,
        env_built=True,
        doc=(
            "HyperPod clusters this deployment may act on ([why an ARN or "
            "id](deploy.md#why-clusters-need-an-arn-or-id-not-just-a-name)). Empty: the "
            "functions act on no cluster and get no SageMaker permission at all, so such a "
            "stack is refused at deploy time unless `sdc:dryRun` or `sdc:acknowledgeNoClusters`"
            " is set (`cdk synth` still works, with a warning)"
        ),
    ),
    Setting(
        "sdc:acknowledgeNoClusters",
        "acknowledge_no_clusters",
        Form.BOOLEAN,
        default=False,
        doc=(
            "deploy with `sdc:clusters` empty, knowingly (a stack that acts on no cluster, e.g."
            " to try the pipeline's other parts). Without it, an empty `sdc:clusters` outside "
            "dry run adds the parameter `AcknowledgeNoClusters` (default `no`) and a "
            "CloudFormation rule that refuses the deployment before any resource is touched, "
            "with a message naming these ways out; `cdk deploy --parameters "
            "AcknowledgeNoClusters=yes` acknowledges at deploy time instead"
        ),
    ),
    Setting(
        "sdc:approvalTimeoutSeconds",
        "approval_timeout_seconds",
        Form.INTEGER,
        low=1,
        high=MAX_APPROVAL_TIMEOUT_SECONDS,
        default=86_400,
        env=EnvVar.APPROVAL_TIMEOUT_SECONDS,
        doc=(
            "how long `RequestApproval` waits before the incident closes as `expired`; a "
            "timeout never approves"
        ),
    ),
    Setting(
        "sdc:approverTimeZone",
        "approver_time_zone",
        Form.TIME_ZONE,
        type_text="IANA time zone name (`Europe/Berlin`, `America/New_York`, `UTC`)",
        default=DEFAULT_TIME_ZONE,
        env=EnvVar.APPROVER_TIME_ZONE,
        doc=(
            "the time zone the approvers read the approval deadline in: the card, the chat "
            "notice, `sdc status` and `sdc show` give the deadline in it and in UTC; a name the"
            " synthesizing machine's time zone database does not know is refused"
        ),
    ),
    Setting(
        "sdc:notificationEmail",
        "notification_email",
        Form.EMAIL,
        type_text="string or null",
        default=None,
        doc=(
            "optional e-mail address subscribed to the notification topic (AWS sends a "
            "confirmation mail first)"
        ),
    ),
    Setting(
        "sdc:namespace",
        "namespace",
        Form.NAMESPACE,
        type_text="string",
        default=NAMESPACE,
        env=EnvVar.NAMESPACE,
        doc=("CloudWatch namespace of the SDC metrics; the trainers' emitter must use the same"),
    ),
    Setting(
        "sdc:alarmNamePrefix",
        "alarm_name_prefix",
        Form.ALARM_NAME_PREFIX,
        type_text="string or empty",
        default="",
        doc=(
            "prefix of the three alarm names (`prod` → `prod-sdc-replay-mismatch`), for several"
            " deployments in one account and region"
        ),
    ),
    Setting(
        "sdc:healthChecks",
        "health_checks",
        Form.HEALTH_CHECKS,
        type_text=(
            "list of `InstanceStress`, `InstanceConnectivity`, `MultiNodeTrainingValidation`"
        ),
        default=[
            check.value
            for check in (HealthCheck.INSTANCE_STRESS, HealthCheck.INSTANCE_CONNECTIVITY)
        ],
        env=EnvVar.HEALTH_CHECKS,
        doc="HyperPod deep health checks to run",
    ),
    Setting(
        "sdc:healthCheckPollSeconds",
        "health_check_poll_seconds",
        Form.INTEGER,
        low=1,
        high=86_400,
        default=300,
        doc="wait between two health-check polls",
    ),
    Setting(
        "sdc:healthCheckMaxPolls",
        "health_check_max_polls",
        Form.INTEGER,
        low=1,
        high=1000,
        default=48,
        doc="polls before asking for approval anyway (4 h at the default interval)",
    ),
    Setting(
        "sdc:replacementPollSeconds",
        "replacement_poll_seconds",
        Form.INTEGER,
        low=1,
        high=86_400,
        default=120,
        doc="wait between two replacement polls",
    ),
    Setting(
        "sdc:replacementMaxPolls",
        "replacement_max_polls",
        Form.INTEGER,
        low=1,
        high=1000,
        default=60,
        doc="polls before the incident closes as `failed` (2 h at the default interval)",
    ),
    Setting(
        "sdc:replaceRetrySeconds",
        "replace_retry_seconds",
        Form.INTEGER,
        low=1,
        high=86_400,
        default=300,
        doc=(
            "wait before asking again after `BatchReplaceClusterNodes` said `InvalidInstanceStatus`"
        ),
    ),
    Setting(
        "sdc:replaceMaxRetries",
        "replace_max_retries",
        Form.INTEGER,
        low=0,
        high=100,
        default=6,
        doc="such retries before the incident closes as `failed`",
    ),
    Setting(
        "sdc:rebootPollSeconds",
        "reboot_poll_seconds",
        Form.INTEGER,
        low=1,
        high=86_400,
        default=60,
        doc=(
            "wait between two polls of a node an approver chose to reboot (the first poll one "
            "wait after the request)"
        ),
    ),
    Setting(
        "sdc:rebootMaxPolls",
        "reboot_max_polls",
        Form.INTEGER,
        low=1,
        high=1000,
        default=30,
        doc=(
            "polls before a node that does not come back `Running` after its reboot closes the "
            "incident as `failed` (30 min at the default). `BatchRebootClusterNodes` answers "
            "with the replacement's codes and is retried with the same two settings above"
        ),
    ),
    Setting(
        "sdc:dryRun",
        "dry_run",
        Form.BOOLEAN,
        default=False,
        env=EnvVar.DRY_RUN,
        doc=(
            'everything runs, a replacement or reboot is only recorded as "would replace" / '
            '"would reboot"'
        ),
    ),
    Setting(
        "sdc:logRetentionDays",
        "log_retention_days",
        Form.LOG_RETENTION,
        type_text=(
            "a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
            "545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)"
        ),
        default=90,
        doc="retention of the function and state machine log groups",
    ),
    Setting(
        "sdc:guardMaxOpenNodes",
        "guard_max_open_nodes",
        Form.INTEGER,
        low=1,
        high=10_000,
        default=3,
        env=EnvVar.GUARD_MAX_OPEN_NODES,
        renamed_from=("sdc:guardMaxOpenIncidents",),
        doc=(
            "blast-radius guard: at most this many nodes per cluster in open incidents (a "
            "job-level incident counts every node it would health-check); beyond the limit a "
            "new incident is recorded as `held` and notified, nothing acts on it. Called "
            "`sdc:guardMaxOpenIncidents` before: that key is refused with its new name"
        ),
    ),
    Setting(
        "sdc:guardMaxOpenPercent",
        "guard_max_open_percent",
        Form.INTEGER,
        low=1,
        high=100,
        default=10,
        env=EnvVar.GUARD_MAX_OPEN_PERCENT,
        doc=(
            "blast-radius guard: at most this share of the cluster's nodes. The limit is "
            "`max(1, min(guardMaxOpenNodes, ceil(nodes x percent / 100), nodes - 1))`: rounding"
            " up still allows one on a 3-node cluster, `nodes - 1` keeps a node of a small "
            "cluster out of remediation"
        ),
    ),
    Setting(
        "sdc:reportOpeningsPerMinute",
        "report_openings_per_minute",
        Form.INTEGER,
        low=1,
        high=10_000,
        default=10,
        env=EnvVar.REPORT_OPENINGS_PER_MINUTE,
        doc=(
            "rate bound: at most this many incidents opened from reports and hardware alerts "
            "per cluster per minute of the pipeline's receive time; beyond it an incident is "
            "recorded `held` (kind `rate`) after its checks (nothing unconfirmed spends the "
            "bound), each audited, one held notice per cluster and minute says so, and "
            "reconciliation takes it again once the minute is over. Above the storm rule's default, so that genuine reports about real nodes"
            " meet the storm hold first; it caps what the storm rule does not count (instances "
            "that are no nodes, a raised threshold). Contributor alarms are not counted"
        ),
    ),
    Setting(
        "sdc:jobOpeningsPerMinute",
        "job_openings_per_minute",
        Form.INTEGER,
        low=1,
        high=10_000,
        default=5,
        env=EnvVar.JOB_OPENINGS_PER_MINUTE,
        doc=(
            "rate bound per job: at most this many of them for the reports naming one job; an "
            "opening this bound refuses takes nothing of the cluster's, so one job's flood "
            "leaves the others room"
        ),
    ),
    Setting(
        "sdc:repeatOffenderIncidents",
        "repeat_offender_incidents",
        Form.INTEGER,
        low=2,
        high=100,
        default=3,
        env=EnvVar.REPEAT_OFFENDER_INCIDENTS,
        doc=(
            "repeat offenders: a node (its instance id) or a GPU (its UUID) in this many "
            "incidents within the window, the one judged among them, is recommended for "
            "replacement whatever the last incident's evidence, and the card says so; skipped "
            "and held incidents (nothing checked them), storm holds, notices, incidents an "
            "approver rejected and incidents left to expire that proposed no recovery do not "
            "count. A third strike in a month is a pattern no single "
            "passing health check clears; two is the least that makes a repeat, more than a "
            "hundred would never escalate anything"
        ),
    ),
    Setting(
        "sdc:repeatOffenderWindowDays",
        "repeat_offender_window_days",
        Form.INTEGER,
        low=1,
        high=365,
        default=30,
        env=EnvVar.REPEAT_OFFENDER_WINDOW_DAYS,
        doc="repeat offenders: the window, in days back from the incident judged",
    ),
    Setting(
        "sdc:stormThreshold",
        "storm_threshold",
        Form.INTEGER,
        low=2,
        high=10_000,
        default=4,
        env=EnvVar.STORM_THRESHOLD,
        doc=(
            "storm hold: this many distinct instances of one cluster flagged within the window "
            "mean a software or recipe problem: the whole cluster is held, one notification "
            "says why. At most `guardMaxOpenNodes + 1` makes a storm hold before the guard "
            "holds incidents one by one"
        ),
    ),
    Setting(
        "sdc:stormWindowSeconds",
        "storm_window_seconds",
        Form.INTEGER,
        low=60,
        high=86_400,
        default=900,
        env=EnvVar.STORM_WINDOW_SECONDS,
        doc="storm hold: the window",
    ),
    Setting(
        "sdc:nodeIsolation",
        "node_isolation",
        Form.NODE_ISOLATION,
        type_text="object: HyperPod cluster name (one of `sdc:clusters`) → EKS cluster name",
        default={},
        env=EnvVar.NODE_ISOLATION,
        env_built=True,
        doc=(
            "clusters whose suspect node is cordoned and tainted while the incident is open; "
            "see [Node isolation](deploy.md#node-isolation). Not listed: no isolation, and the "
            "approval card warns that the node is not isolated"
        ),
    ),
    Setting(
        "sdc:slurmControllers",
        "slurm_controllers",
        Form.SLURM_CONTROLLERS,
        type_text=(
            "object: HyperPod cluster name (one of `sdc:clusters`, not one of "
            "`sdc:nodeIsolation`) → the instance id of its Slurm controller node"
        ),
        default={},
        env=EnvVar.NODE_ISOLATION,
        env_built=True,
        doc=(
            "clusters orchestrated by Slurm whose suspect node is drained on that controller "
            "while the incident is open; see [Slurm "
            "clusters](deploy.md#slurm-clusters-drain-instead-of-cordon)"
        ),
    ),
    Setting(
        "sdc:nodeIsolationAccess",
        "node_isolation_access",
        Form.ISOLATION_ACCESS,
        type_text="`group` or `clusterAdminPolicy`",
        default="group",
        doc=(
            "what the stack's EKS access entries grant: the Kubernetes group `sdc-remediation` "
            "(apply the RBAC manifest of [Node isolation](deploy.md#node-isolation)), or the "
            "managed `AmazonEKSClusterAdminPolicy` (opt-in: full cluster admin for the "
            "node-patching function roles: three, five with `sdc:recoveryThroughNodeLabel`)"
        ),
    ),
    Setting(
        "sdc:jobPods",
        "job_pods",
        Form.JOB_PODS,
        type_text=(
            "object: HyperPod cluster name (one of `sdc:nodeIsolation`) → pod label key naming "
            "the job (such as `training.kubeflow.org/job-name`)"
        ),
        default={},
        env=EnvVar.NODE_ISOLATION,
        env_built=True,
        doc=(
            "clusters whose reports are checked against the job's pods: the pods labelled "
            "`<key>=<the report's job name>` are listed (any namespace) and an instance whose "
            "node runs none of them is acted on for nothing, named in the card under `CLAIMS "
            "NOT CONFIRMED`. `open_incident` and `store_report` then also need `get`/`list` on "
            "pods (the reader RBAC of [Node isolation](deploy.md#node-isolation))"
        ),
    ),
    Setting(
        "sdc:recoveryThroughNodeLabel",
        "recovery_label_clusters",
        Form.CLUSTER_NAMES,
        type_text="list of HyperPod cluster names, each one of `sdc:nodeIsolation`",
        default=[],
        env=EnvVar.NODE_ISOLATION,
        env_built=True,
        doc=(
            "clusters whose approved reboot or replacement is handed to HyperPod's own recovery"
            " through the node's `sagemaker.amazonaws.com/node-health-status` label (see "
            "[Recovery through the node health "
            "label](deploy.md#recovery-through-hyperpods-node-health-label)) instead of the API"
            " calls"
        ),
    ),
    Setting(
        "sdc:intakeConcurrency",
        "intake_concurrency",
        Form.INTEGER,
        low=1,
        high=100,
        default=10,
        doc=(
            "reserved concurrency of each intake function (`store_report`, `open_incident`): a "
            "flood of reports or alarms waits in Lambda's asynchronous queue (retried for up to"
            " 6 hours, then kept in its failure queue) instead of taking the account's "
            "unreserved concurrency from `decide`, `request_approval` and `check_health`, which"
            " a person waits on. Lambda keeps 100 of the account's concurrency unreserved: with"
            " the defaults the stack reserves 6 x 5 + 2 x 10 = 50, so it deploys wherever the "
            "account's concurrency quota is at least 150 (the default quota is 1000; a new "
            "account's may be lower: raise it, or lower these values)"
        ),
    ),
    Setting(
        "sdc:nodeActionConcurrency",
        "node_action_concurrency",
        Form.INTEGER,
        low=1,
        high=100,
        default=5,
        doc=(
            "reserved concurrency of each of the six functions that act on a node (isolate, "
            "start the health check, replace, reboot, close and release the isolation, and "
            "`reconcile`, which settles stuck incidents): at most this many of each run at "
            "once, whatever the guard lets through. It is taken out of the account's Lambda "
            "concurrency, and Lambda keeps 100 unreserved: an account whose quota is under 100 "
            "+ 6 x this value + 2 x `sdc:intakeConcurrency` cannot deploy it (raise the quota, "
            "or lower the value). A throttled invocation is retried by the state machine "
            "(`Lambda.TooManyRequestsException`)"
        ),
    ),
    Setting(
        "sdc:pauseParameterName",
        "pause_parameter",
        Form.PARAMETER_NAME,
        type_text="SSM parameter name or null",
        default=None,
        default_text="/<sdc:stackName>/paused",
        env=EnvVar.PAUSE_PARAMETER,
        env_built=True,
        doc=(
            "the pause switch, created by the stack with value `false`; see "
            "[Pausing](deploy.md#pausing-storm-holds-the-blast-radius-guard)"
        ),
    ),
    Setting(
        "sdc:telemetry",
        "telemetry",
        Form.TELEMETRY,
        type_text=(
            'object: HyperPod cluster name (one of `sdc:clusters`) → `{"workspace": "<AMP '
            'workspace id ws-… or workspace ARN>", "dashboard": "<https URL>" or null, '
            '"nodeLabel": "<label>" (optional)}`'
        ),
        default={},
        env=EnvVar.TELEMETRY,
        env_built=True,
        doc=(
            "the Amazon Managed Service for Prometheus workspace the cluster's HyperPod "
            "observability add-on writes to: the approval card then shows the suspect GPU's "
            "hardware counters and links the dashboard (`aps:QueryMetrics` for "
            "`request_approval`, `open_incident` and `store_report` on exactly these "
            "workspaces; the intake functions read it for the training watch's evidence alone, "
            "the corroboration a straggler needs); see [Hardware "
            "telemetry](deploy.md#hardware-telemetry). Not listed: the card says telemetry is "
            "not configured"
        ),
    ),
    Setting(
        "sdc:hardwareAlerts",
        "hardware_alerts",
        Form.HARDWARE_ALERTS,
        type_text=(
            "object: any of the keys of [Hardware alerts](deploy.md#hardware-alerts) (integers;"
            " `criticalXids` a list)"
        ),
        default={},
        doc=(
            "thresholds and windows of the alerting rules the stack puts in each "
            "`sdc:telemetry` workspace; a key left out keeps its default (see [Hardware "
            "alerts](deploy.md#hardware-alerts))"
        ),
    ),
    Setting(
        "sdc:idleSweep",
        "idle_sweep",
        Form.IDLE_SWEEP,
        type_text=(
            "object: `clusters` (a non-empty list, each one of `sdc:slurmControllers` or "
            "`sdc:nodeIsolation`), `everyMinutes`, `batchSize`, `checks`, `maxSharePercent`, "
            "`minIdleNodes` (see [Idle sweeps](operate.md#idle-sweeps)) or null"
        ),
        default=None,
        doc=(
            "health-check idle nodes on a schedule: one EventBridge Scheduler schedule per "
            "listed cluster runs `sweep_idle`, which checks a bounded share of the idle nodes "
            "(never below a floor of idle capacity) with HyperPod's deep health checks; a failed "
            "check opens an incident like any other trigger. Null: no sweep"
        ),
    ),
    Setting(
        "sdc:approvalsRequired",
        "approvals_required",
        Form.INTEGER,
        low=1,
        high=MAX_APPROVALS_REQUIRED,
        default=1,
        env=EnvVar.APPROVALS_REQUIRED,
        doc=(
            "distinct humans whose `approve`, `reboot`, `reset` or `proceed` it takes (a "
            "`reject` by any one approver ends an approval); above 1 every decision must carry "
            "an identity proof and, except a `reject`, name a human; see [Who "
            "decided](approve.md#who-decided)"
        ),
    ),
    Setting(
        "sdc:approvers",
        "approvers",
        Form.APPROVERS,
        type_text="list of IAM or STS ARN patterns (`*`, `?`)",
        default=[],
        env=EnvVar.APPROVERS,
        doc=(
            "who may decide, enforced by `decide` on the verified principal and by the "
            "`ApproverPolicy` the stack creates (`aws:PrincipalArn` condition); set: every "
            "decision must carry an identity proof. Empty or not, approvers belong to the "
            "deployment's own account: a principal of another account is accepted only when a "
            "pattern names that account by number"
        ),
    ),
    Setting(
        "sdc:humanSessionRoles",
        "human_session_roles",
        Form.HUMAN_SESSION_ROLES,
        type_text="list of IAM role ARNs of named accounts (`*`, `?` in the role name)",
        default=[],
        env=EnvVar.HUMAN_SESSION_ROLES,
        doc=(
            "roles whose session names are the humans who assumed them: their trust policies "
            "must make it so (e.g. require `sts:SourceIdentity` and a `sts:RoleSessionName` "
            "equal to it); a session of such a role counts as that human. IAM Identity Center's"
            " `AWSReservedSSO_*` roles need no listing; see [Who "
            "decided](approve.md#who-decided)"
        ),
    ),
    Setting(
        "sdc:requireIdentityProof",
        "require_identity_proof",
        Form.BOOLEAN,
        default=False,
        env=EnvVar.REQUIRE_IDENTITY_PROOF,
        doc=(
            "refuse decisions without an identity proof, i.e. console approvals; implied by the"
            " two keys above"
        ),
    ),
)

BY_KEY: Final[Mapping[str, Setting]] = {setting.key: setting for setting in SETTINGS}
BY_ATTR: Final[Mapping[str, Setting]] = {setting.attr: setting for setting in SETTINGS}
RENAMED: Final[Mapping[str, str]] = {
    old: setting.key for setting in SETTINGS for old in setting.renamed_from
}
"""Keys of earlier releases → the key that replaced them (named in the error, so that an
upgrade says what to change)."""


def key_of(attr: str) -> str:
    """The context key of the setting held in `attr` (for messages that name it)."""
    return BY_ATTR[attr].key


def integer_range(attr: str) -> tuple[int, int]:
    """The lowest and highest value of an `INTEGER` setting."""
    setting = BY_ATTR[attr]
    if setting.low is None or setting.high is None:
        raise ValueError(f"{setting.key} is not an integer setting")
    return setting.low, setting.high


class _Declared:
    """The marker of an attribute whose default is the declared one."""

    def __repr__(self) -> str:
        return "DECLARED"


DECLARED: Final[Any] = _Declared()
"""`attr: T = DECLARED` on a typed settings class: the default is the declaration's
(`with_declared_defaults` fills it in), never written a second time."""

C = TypeVar("C", bound=type)


def with_declared_defaults(cls: C) -> C:
    """Replace each `DECLARED` default of `cls` with the declared one (`Setting.typed_default`),
    before `dataclass` reads the class; an attribute marked so that is no declared setting is an
    error at import."""
    for attr, value in list(cls.__dict__.items()):
        if value is DECLARED:
            if attr not in BY_ATTR:
                raise TypeError(f"{cls.__name__}.{attr} is marked DECLARED but no setting holds it")
            setattr(cls, attr, BY_ATTR[attr].typed_default)
    return cls
