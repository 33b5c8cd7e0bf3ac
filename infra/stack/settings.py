"""Deployment settings: the `sdc:*` context keys of `cdk.json`, parsed once and checked early.

Every key has a documented default, so `cdk synth` works on a fresh clone. Override a key in
`cdk.json` or on the command line (`-c` values arrive as strings; lists and objects as JSON):

    npx cdk deploy -c 'sdc:clusters={"ml-cluster-1": "ab12cd34ef56"}' -c sdc:approvalTimeoutSeconds=7200

The keys, their types, defaults and meaning: docs/deploy.md, "Settings: the `sdc:*` context keys"
(tests/docs/test_tables_drift.py keeps that table to `_PARSERS` and `Settings` below).

Unknown `sdc:*` keys are an error (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from infra.stack.alert_rules import CRITICAL_XIDS_KEY, THRESHOLD_KEYS, Thresholds
from infra.stack.idle_sweep import IdleSweep, check_idle_sweep, parse_idle_sweep
from lambdas.logic.evidence.xids import CATALOG
from lambdas.models.deadline import DEFAULT_TIME_ZONE, TIME_ZONE_RE, zone
from lambdas.models.errors import SettingsError
from lambdas.models.hyperpod import HealthCheck
from lambdas.models.kubernetes import LABEL_KEY_RE
from lambdas.models.recovery import MAX_REBOOTS
from lambdas.models.settings import (
    APPROVER_PATTERN_RE,
    DEFAULT_APPROVALS_REQUIRED,
    DEFAULT_GUARD_MAX_OPEN_NODES,
    DEFAULT_GUARD_MAX_OPEN_PERCENT,
    DEFAULT_HEALTH_CHECKS,
    DEFAULT_JOB_OPENINGS_PER_MINUTE,
    DEFAULT_REPORT_OPENINGS_PER_MINUTE,
    DEFAULT_STORM_THRESHOLD,
    DEFAULT_STORM_WINDOW_SECONDS,
    EKS_CLUSTER_NAME_RE,
    GUARD_MAX_OPEN_NODES_RANGE,
    HUMAN_SESSION_ROLE_RE,
    LABEL_NAME_RE,
    MAX_APPROVAL_TIMEOUT_SECONDS,
    MAX_APPROVALS_REQUIRED,
    OPENINGS_PER_MINUTE_RANGE,
    RECOVERY_API,
    RECOVERY_NODE_LABEL,
    REGION_RE,
    STORM_THRESHOLD_RANGE,
    IsolationConfig,
    node_isolation_env,
)
from trainer_emitter.contract import INSTANCE_ID_RE, NAMESPACE

PREFIX: Final = "sdc:"

HEALTH_CHECK_TYPES: Final = tuple(check.value for check in HealthCheck)
"""`DeepHealthCheckType` of the SageMaker API (botocore 1.44)."""

LOG_RETENTION_DAYS: Final = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
    2922, 3288, 3653,
)  # fmt: skip

CLUSTER_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
CLUSTER_ARN_RE: Final = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$"
)
CLUSTER_ID_RE: Final = re.compile(r"^[a-z0-9]{12}$")
STACK_NAME_RE: Final = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,59}$")
SSM_PARAMETER_RE: Final = re.compile(r"^/?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")
ALARM_PREFIX_RE: Final = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,62}[A-Za-z0-9]|[A-Za-z0-9])?$")
EMAIL_RE: Final = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
WORKSPACE_ID_RE: Final = re.compile(r"^ws-[0-9A-Za-z-]{1,61}$")
WORKSPACE_ARN_RE: Final = re.compile(
    r"^arn:(?P<partition>aws|aws-cn|aws-us-gov):aps:(?P<region>"
    + REGION_RE.pattern.removeprefix("^").removesuffix("$")
    + r"):"
    r"[0-9]{12}:workspace/(?P<id>ws-[0-9A-Za-z-]{1,61})$"
)
"""An Amazon Managed Service for Prometheus workspace ARN (its id starts with `ws-`)."""
URL_SUFFIX: Final = {
    "aws": "amazonaws.com",
    "aws-cn": "amazonaws.com.cn",
    "aws-us-gov": "amazonaws.com",
}

MAX_LOOP_ITERATIONS: Final = 1500
"""Each poll iteration writes about 12 history events; a Standard execution holds 25,000."""


@dataclass(frozen=True)
class Cluster:
    """A HyperPod cluster the deployment may act on."""

    name: str
    arn_or_id: str

    @property
    def arn(self) -> str | None:
        """The full ARN when the context gave one; None when it gave the id only."""
        return self.arn_or_id if self.arn_or_id.startswith("arn:") else None

    @property
    def cluster_id(self) -> str:
        return self.arn_or_id.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class TelemetrySource:
    """A cluster's hardware telemetry: its Amazon Managed Service for Prometheus workspace."""

    cluster: str
    workspace: str
    """The workspace id (`ws-…`, in the stack's own account and region) or its ARN."""
    dashboard: str | None = None
    node_label: str | None = None

    @property
    def workspace_id(self) -> str:
        return self.workspace.rsplit("/", 1)[-1]

    @property
    def arn(self) -> str | None:
        """The full ARN when the context gave one; None when it gave the id only."""
        return self.workspace if self.workspace.startswith("arn:") else None

    @property
    def region(self) -> str | None:
        """The workspace's region when its ARN names it (None: the stack's own)."""
        match = WORKSPACE_ARN_RE.match(self.workspace)
        return match.group("region") if match else None

    @property
    def url_suffix(self) -> str | None:
        """The DNS suffix of its partition when its ARN names it (None: the stack's own)."""
        match = WORKSPACE_ARN_RE.match(self.workspace)
        return URL_SUFFIX[match.group("partition")] if match else None


@dataclass(frozen=True)
class Settings:
    """The typed form of the `sdc:*` context keys (docs/deploy.md has the table)."""

    stack_name: str = "SdcRemediation"
    clusters: tuple[Cluster, ...] = ()
    approval_timeout_seconds: int = 86_400
    approver_time_zone: str = DEFAULT_TIME_ZONE
    notification_email: str | None = None
    namespace: str = NAMESPACE
    alarm_name_prefix: str = ""
    health_checks: tuple[str, ...] = DEFAULT_HEALTH_CHECKS
    health_check_poll_seconds: int = 300
    health_check_max_polls: int = 48
    replacement_poll_seconds: int = 120
    replacement_max_polls: int = 60
    replace_retry_seconds: int = 300
    replace_max_retries: int = 6
    reboot_poll_seconds: int = 60
    reboot_max_polls: int = 30
    dry_run: bool = False
    log_retention_days: int = 90
    guard_max_open_nodes: int = DEFAULT_GUARD_MAX_OPEN_NODES
    guard_max_open_percent: int = DEFAULT_GUARD_MAX_OPEN_PERCENT
    storm_threshold: int = DEFAULT_STORM_THRESHOLD
    storm_window_seconds: int = DEFAULT_STORM_WINDOW_SECONDS
    report_openings_per_minute: int = DEFAULT_REPORT_OPENINGS_PER_MINUTE
    job_openings_per_minute: int = DEFAULT_JOB_OPENINGS_PER_MINUTE
    pause_parameter: str | None = None
    """None: `/<stack name>/paused` (see `pause_parameter_name`)."""
    node_isolation: tuple[tuple[str, str], ...] = ()
    """(HyperPod cluster name, EKS cluster name) pairs whose suspect nodes are isolated."""
    node_isolation_access: str = "group"
    slurm_controllers: tuple[tuple[str, str], ...] = ()
    """(HyperPod cluster name, controller instance id) pairs: clusters orchestrated by Slurm
    whose suspect nodes are drained on that controller (SSM Run Command)."""
    node_action_concurrency: int = 5
    intake_concurrency: int = 10
    """Reserved concurrency of each intake function (store_report, open_incident): a flood of
    events waits in Lambda's asynchronous queue instead of taking the account's unreserved
    concurrency from decide, request_approval and check_health. With the node-action cap it
    takes 6 * 5 + 2 * 10 = 50 of the account's quota, which deploys wherever the quota is at
    least 150 (Lambda keeps 100 unreserved; the default quota is 1000)."""
    recovery_label_clusters: tuple[str, ...] = ()
    """HyperPod clusters whose approved recoveries go through the node health label."""
    job_pods: tuple[tuple[str, str], ...] = ()
    """(HyperPod cluster name, pod label key naming the job) pairs whose reports are checked
    against the nodes the job's pods run on."""
    telemetry: tuple[TelemetrySource, ...] = ()
    """Clusters whose approval card shows the suspect GPU's hardware counters, and whose
    workspace gets the hardware alerting rules."""
    hardware_alerts: Thresholds = field(default_factory=Thresholds)
    """The hardware alerting rules' thresholds and windows (`infra.stack.alert_rules`)."""
    approvals_required: int = DEFAULT_APPROVALS_REQUIRED
    approvers: tuple[str, ...] = ()
    """ARN patterns of who may decide; empty: whoever may start the approval state machine."""
    human_session_roles: tuple[str, ...] = ()
    """IAM role ARN patterns whose sessions are named after the human (see lambdas' Settings)."""
    require_identity_proof: bool = False
    acknowledge_no_clusters: bool = False
    """Deploy with no cluster knowingly (`refuses_to_deploy`)."""
    idle_sweep: IdleSweep | None = None
    """The clusters whose idle nodes are health-checked on a schedule (None: no sweep)."""

    @property
    def refuses_to_deploy(self) -> bool:
        """An empty `sdc:clusters` outside dry run, unacknowledged: such a stack would act on no
        cluster, so its deployment is refused (`infra.stack.no_clusters`)."""
        return not self.clusters and not self.dry_run and not self.acknowledge_no_clusters

    @property
    def eks_clusters(self) -> tuple[str, ...]:
        """The EKS clusters whose Kubernetes API the functions use (sorted, distinct)."""
        return tuple(sorted({eks for _, eks in self.node_isolation}))

    def node_isolation_env(self) -> str:
        """`NODE_ISOLATION` for the functions: the lambdas' settings format."""
        labels = dict(self.job_pods)
        return node_isolation_env(
            {
                name: IsolationConfig(
                    isolate=True,
                    eks_cluster=eks,
                    recovery=(
                        RECOVERY_NODE_LABEL
                        if name in self.recovery_label_clusters
                        else RECOVERY_API
                    ),
                    job_pods=labels.get(name),
                )
                for name, eks in self.node_isolation
            }
            | {
                name: IsolationConfig(isolate=True, slurm_controller=controller)
                for name, controller in self.slurm_controllers
            }
        )

    @property
    def cluster_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters)

    @property
    def pause_parameter_name(self) -> str:
        """The pause switch's SSM parameter name (always starting with `/`)."""
        name = self.pause_parameter or f"/{self.stack_name}/paused"
        return name if name.startswith("/") else f"/{name}"

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> Settings:
        """Parse the whole context (other keys, e.g. CDK feature flags, are ignored)."""
        own = {k: v for k, v in context.items() if k.startswith(PREFIX)}
        renamed = [f"{old} is now {new}" for old, new in RENAMED.items() if old in own]
        if renamed:
            raise SettingsError(f"renamed context key(s): {'; '.join(renamed)}")
        unknown = sorted(set(own) - set(_PARSERS))
        if unknown:
            raise SettingsError(
                f"unknown context key(s) {', '.join(unknown)}; known keys: "
                + ", ".join(sorted(_PARSERS))
            )
        values: dict[str, Any] = {}
        for key, (attr, parse) in _PARSERS.items():
            if own.get(key) is not None:
                values[attr] = parse(key, own[key])
        settings = cls(**values)
        settings._check_totals()
        return settings

    def _check_totals(self) -> None:
        isolated = {name for name, _ in self.node_isolation}
        unlabelled = [name for name in self.recovery_label_clusters if name not in isolated]
        if unlabelled:
            raise SettingsError(
                f"sdc:recoveryThroughNodeLabel names {', '.join(unlabelled)}, not in "
                "sdc:nodeIsolation: the node health label is set through the EKS cluster that "
                "isolation uses"
            )
        unlisted = [name for name, _ in self.job_pods if name not in isolated]
        if unlisted:
            raise SettingsError(
                f"sdc:jobPods names {', '.join(unlisted)}, not in sdc:nodeIsolation: the job's "
                "pods are listed through the EKS cluster that isolation uses"
            )
        unknown = [name for name, _ in self.node_isolation if name not in self.cluster_names]
        if unknown:
            raise SettingsError(
                f"sdc:nodeIsolation names {', '.join(unknown)}, not in sdc:clusters: isolation is "
                "only for clusters this deployment acts on"
            )
        unknown = [name for name, _ in self.slurm_controllers if name not in self.cluster_names]
        if unknown:
            raise SettingsError(
                f"sdc:slurmControllers names {', '.join(unknown)}, not in sdc:clusters: isolation "
                "is only for clusters this deployment acts on"
            )
        both = sorted(isolated & {name for name, _ in self.slurm_controllers})
        if both:
            raise SettingsError(
                f"sdc:slurmControllers and sdc:nodeIsolation both name {', '.join(both)}: a "
                "cluster has one orchestrator (EKS or Slurm)"
            )
        unknown = [t.cluster for t in self.telemetry if t.cluster not in self.cluster_names]
        if unknown:
            raise SettingsError(
                f"sdc:telemetry names {', '.join(unknown)}, not in sdc:clusters: telemetry is "
                "only for clusters this deployment acts on"
            )
        check_idle_sweep(
            self.idle_sweep,
            self.cluster_names,
            {name for name, _ in (*self.slurm_controllers, *self.node_isolation)},
        )
        # The longest path: a health check, a reboot, the health check again, a second
        # approval, the replacement.
        checks = 1 + MAX_REBOOTS
        loops = (
            self.health_check_max_polls * checks
            + self.reboot_max_polls * MAX_REBOOTS
            + self.replacement_max_polls
            + self.replace_max_retries * (1 + MAX_REBOOTS)
        )
        if loops > MAX_LOOP_ITERATIONS:
            raise SettingsError(
                f"{checks} x sdc:healthCheckMaxPolls + sdc:rebootMaxPolls + "
                f"sdc:replacementMaxPolls + {checks} x sdc:replaceMaxRetries = "
                f"{loops} exceeds {MAX_LOOP_ITERATIONS}: the execution history (25,000 events) "
                "would overflow"
            )
        worst = (
            self.health_check_poll_seconds * self.health_check_max_polls * checks
            + self.approval_timeout_seconds * checks
            + self.reboot_poll_seconds * self.reboot_max_polls * MAX_REBOOTS
            + self.replacement_poll_seconds * self.replacement_max_polls
            + self.replace_retry_seconds * self.replace_max_retries * checks
        )
        if worst > MAX_APPROVAL_TIMEOUT_SECONDS:
            raise SettingsError(
                f"the worst-case execution takes {worst} s, longer than a Standard execution's "
                f"one year ({MAX_APPROVAL_TIMEOUT_SECONDS} s): lower the poll counts, intervals or the "
                "approval timeout"
            )


# --- parsers: each takes (key, raw value) and returns the typed value or raises SettingsError ---


def _fail(key: str, value: Any, expected: str) -> SettingsError:
    return SettingsError(f"context key {key}={value!r}: expected {expected}")


def _json_if_string(key: str, value: Any, expected: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise _fail(key, value, expected + " (as JSON)") from err
    return value


def _string(pattern: re.Pattern[str], expected: str) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise _fail(key, value, expected)
        return value

    return parse


def _integer(low: int, high: int) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        parsed: int
        if isinstance(value, bool):
            raise _fail(key, value, f"an integer in {low}..{high}")
        if isinstance(value, int):
            parsed = value
        elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            parsed = int(value)
        else:
            raise _fail(key, value, f"an integer in {low}..{high}")
        if not low <= parsed <= high:
            raise _fail(key, value, f"an integer in {low}..{high}")
        return parsed

    return parse


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _fail(key, value, "true or false")


def _namespace(key: str, value: Any) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 255
        or value.startswith(":")
        or value.startswith("AWS/")
        or '"' in value
        or not value.isprintable()
    ):
        raise _fail(key, value, 'a CloudWatch namespace (1-255 characters, not "AWS/...")')
    return value


def _email(key: str, value: Any) -> str | None:
    if value in ("", "null", "none"):
        return None
    if not isinstance(value, str) or not EMAIL_RE.match(value):
        raise _fail(key, value, "an e-mail address or null")
    return value


def _health_checks(key: str, value: Any) -> tuple[str, ...]:
    expected = "a non-empty list of " + ", ".join(HEALTH_CHECK_TYPES)
    if isinstance(value, str) and not value.strip().startswith("["):
        value = [part.strip() for part in value.split(",") if part.strip()]
    value = _json_if_string(key, value, expected)
    if (
        not isinstance(value, list)
        or not value
        or any(v not in HEALTH_CHECK_TYPES for v in value)
        or len(set(value)) != len(value)
    ):
        raise _fail(key, value, expected + " (no duplicates)")
    return tuple(value)


def _clusters(key: str, value: Any) -> tuple[Cluster, ...]:
    expected = (
        'an object {"<cluster name>": "<cluster ARN or 12-character cluster id>"}; HyperPod '
        "cluster ARNs end in the cluster id (DescribeCluster shows it), which IAM needs"
    )
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    clusters = []
    for name, target in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise _fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(target, str) or not (
            CLUSTER_ARN_RE.match(target) or CLUSTER_ID_RE.match(target)
        ):
            raise _fail(key, value, f"{expected}; {target!r} for {name!r} is neither")
        clusters.append(Cluster(name=name, arn_or_id=target))
    return tuple(sorted(clusters, key=lambda c: c.name))


def _node_isolation(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    expected = 'an object {"<HyperPod cluster name>": "<EKS cluster name>"}'
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    pairs = []
    for name, eks in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise _fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(eks, str) or not EKS_CLUSTER_NAME_RE.match(eks):
            raise _fail(key, value, f"{expected}; {eks!r} for {name!r} is not an EKS cluster name")
        pairs.append((name, eks))
    return tuple(sorted(pairs))


def _slurm_controllers(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    expected = 'an object {"<HyperPod cluster name>": "<Slurm controller instance id, i-...>"}'
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    pairs = []
    for name, controller in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise _fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(controller, str) or not INSTANCE_ID_RE.match(controller):
            raise _fail(
                key, value, f"{expected}; {controller!r} for {name!r} is not an instance id"
            )
        pairs.append((name, controller))
    return tuple(sorted(pairs))


def _job_pods(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    expected = 'an object {"<HyperPod cluster name>": "<pod label key naming the job>"}'
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    pairs = []
    for name, label in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise _fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(label, str) or not LABEL_KEY_RE.match(label):
            raise _fail(key, value, f"{expected}; {label!r} for {name!r} is not a label key")
        pairs.append((name, label))
    return tuple(sorted(pairs))


def _cluster_names(key: str, value: Any) -> tuple[str, ...]:
    expected = "a list of HyperPod cluster names"
    value = _json_if_string(key, value, expected)
    if not isinstance(value, list) or any(
        not isinstance(v, str) or not CLUSTER_NAME_RE.match(v) for v in value
    ):
        raise _fail(key, value, expected)
    return tuple(sorted(set(value)))


def _telemetry(key: str, value: Any) -> tuple[TelemetrySource, ...]:
    expected = (
        'an object {"<HyperPod cluster name>": {"workspace": "<AMP workspace id ws-... or '
        'workspace ARN>", "dashboard": "<https URL>" or null, "nodeLabel": "<label>" '
        "(optional)}}"
    )
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    sources = []
    for name, config in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise _fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(config, Mapping):
            raise _fail(key, value, f"{expected}; {name!r} needs an object")
        unknown = sorted(set(config) - {"workspace", "dashboard", "nodeLabel"})
        if unknown:
            raise _fail(key, value, f"{expected}; {name!r} has unknown keys {unknown}")
        workspace = config.get("workspace")
        if not isinstance(workspace, str) or not (
            WORKSPACE_ID_RE.match(workspace) or WORKSPACE_ARN_RE.match(workspace)
        ):
            raise _fail(
                key,
                value,
                f"{expected}; {name!r} has workspace {workspace!r}, neither a workspace id "
                "(ws-...) nor a workspace ARN (arn:aws:aps:<region>:<account>:workspace/ws-...)",
            )
        dashboard = config.get("dashboard")
        if dashboard is not None and not _https_url(dashboard):
            raise _fail(
                key, value, f"{expected}; {name!r} has dashboard {dashboard!r}, not an https URL"
            )
        label = config.get("nodeLabel")
        if label is not None and (
            not isinstance(label, str) or not LABEL_NAME_RE.match(label) or label.startswith("__")
        ):
            raise _fail(
                key,
                value,
                f"{expected}; {name!r} has nodeLabel {label!r}, not a Prometheus label name",
            )
        sources.append(TelemetrySource(name, workspace, dashboard, label))
    return tuple(sorted(sources, key=lambda t: t.cluster))


def _hardware_alerts(key: str, value: Any) -> Thresholds:
    known = [*THRESHOLD_KEYS, CRITICAL_XIDS_KEY]
    expected = (
        "an object of any of "
        + ", ".join(known)
        + " (integers; criticalXids a list of XIDs the card knows)"
    )
    value = _json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise _fail(key, value, expected)
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise _fail(key, value, f"{expected}; unknown keys {unknown}")
    changes: dict[str, Any] = {}
    for name, spec in THRESHOLD_KEYS.items():
        if name in value:
            changes[spec.attr] = _integer(spec.low, spec.high)(f"{key}.{name}", value[name])
    if CRITICAL_XIDS_KEY in value:
        xids = value[CRITICAL_XIDS_KEY]
        if (
            not isinstance(xids, list)
            or not xids
            or any(isinstance(x, bool) or x not in CATALOG for x in xids)
            or len(set(xids)) != len(xids)
        ):
            raise _fail(
                f"{key}.{CRITICAL_XIDS_KEY}",
                xids,
                "a non-empty list of distinct XIDs from the card's catalog ("
                + ", ".join(map(str, sorted(CATALOG)))
                + "): an alert must say what its XID means",
            )
        changes["critical_xids"] = tuple(sorted(xids))
    thresholds = replace(Thresholds(), **changes)
    if thresholds.link_downtime_seconds >= thresholds.link_window_minutes * 60:
        raise _fail(
            key,
            value,
            "linkDowntimeSeconds shorter than the window (linkWindowMinutes x 60): a port cannot "
            "be down longer than the window it is judged over",
        )
    return thresholds


def _https_url(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 2048 or any(c.isspace() for c in value):
        return False
    parts = urllib.parse.urlsplit(value)
    return parts.scheme == "https" and bool(parts.hostname)


def _parameter_name(key: str, value: Any) -> str | None:
    if value in ("", "null", "none"):
        return None
    if (
        not isinstance(value, str)
        or len(value) > 1011
        or not SSM_PARAMETER_RE.match(value)
        or value.lower().lstrip("/").startswith(("aws", "ssm"))
    ):
        raise _fail(
            key,
            value,
            "an SSM parameter name (letters, digits, '_', '.', '-', '/'; not starting with "
            "aws or ssm) or null",
        )
    return value


def _human_session_roles(key: str, value: Any) -> tuple[str, ...]:
    expected = 'a list of IAM role ARN patterns, e.g. ["arn:aws:iam::123456789012:role/Oncall"]'
    parsed = _json_if_string(key, value, expected)
    if not isinstance(parsed, list) or not all(
        isinstance(p, str) and HUMAN_SESSION_ROLE_RE.match(p) and "," not in p for p in parsed
    ):
        raise _fail(key, value, expected)
    return tuple(parsed)


def _approvers(key: str, value: Any) -> tuple[str, ...]:
    expected = (
        'a list of IAM or STS ARN patterns, e.g. ["arn:aws:iam::123456789012:role/Approver*"]'
    )
    parsed = _json_if_string(key, value, expected)
    if not isinstance(parsed, list) or not all(
        isinstance(p, str) and APPROVER_PATTERN_RE.match(p) and "," not in p for p in parsed
    ):
        raise _fail(key, value, expected)
    return tuple(parsed)


def _time_zone(key: str, value: Any) -> str:
    if not isinstance(value, str) or not TIME_ZONE_RE.match(value) or zone(value) is None:
        raise _fail(key, value, "an IANA time zone name such as Europe/Berlin or UTC")
    return value


def _retention(key: str, value: Any) -> int:
    days = _integer(1, 3653)(key, value)
    if days not in LOG_RETENTION_DAYS:
        raise _fail(key, value, "one of " + ", ".join(map(str, LOG_RETENTION_DAYS)))
    return days


_PARSERS: Final[dict[str, tuple[str, Callable[[str, Any], Any]]]] = {
    "sdc:stackName": (
        "stack_name",
        _string(STACK_NAME_RE, "a stack name: a letter, then letters, digits or '-' (<= 60)"),
    ),
    "sdc:clusters": ("clusters", _clusters),
    "sdc:approvalTimeoutSeconds": (
        "approval_timeout_seconds",
        _integer(1, MAX_APPROVAL_TIMEOUT_SECONDS),
    ),
    "sdc:approverTimeZone": ("approver_time_zone", _time_zone),
    "sdc:notificationEmail": ("notification_email", _email),
    "sdc:namespace": ("namespace", _namespace),
    "sdc:alarmNamePrefix": (
        "alarm_name_prefix",
        _string(ALARM_PREFIX_RE, "letters, digits, '_', '.', '-' (not at either end), or empty"),
    ),
    "sdc:healthChecks": ("health_checks", _health_checks),
    "sdc:healthCheckPollSeconds": ("health_check_poll_seconds", _integer(1, 86_400)),
    "sdc:healthCheckMaxPolls": ("health_check_max_polls", _integer(1, 1000)),
    "sdc:replacementPollSeconds": ("replacement_poll_seconds", _integer(1, 86_400)),
    "sdc:replacementMaxPolls": ("replacement_max_polls", _integer(1, 1000)),
    "sdc:replaceRetrySeconds": ("replace_retry_seconds", _integer(1, 86_400)),
    "sdc:replaceMaxRetries": ("replace_max_retries", _integer(0, 100)),
    "sdc:rebootPollSeconds": ("reboot_poll_seconds", _integer(1, 86_400)),
    "sdc:rebootMaxPolls": ("reboot_max_polls", _integer(1, 1000)),
    "sdc:dryRun": ("dry_run", _boolean),
    "sdc:logRetentionDays": ("log_retention_days", _retention),
    "sdc:guardMaxOpenNodes": ("guard_max_open_nodes", _integer(*GUARD_MAX_OPEN_NODES_RANGE)),
    "sdc:guardMaxOpenPercent": ("guard_max_open_percent", _integer(1, 100)),
    "sdc:stormThreshold": ("storm_threshold", _integer(*STORM_THRESHOLD_RANGE)),
    "sdc:stormWindowSeconds": ("storm_window_seconds", _integer(60, 86_400)),
    "sdc:reportOpeningsPerMinute": (
        "report_openings_per_minute",
        _integer(*OPENINGS_PER_MINUTE_RANGE),
    ),
    "sdc:jobOpeningsPerMinute": ("job_openings_per_minute", _integer(*OPENINGS_PER_MINUTE_RANGE)),
    "sdc:pauseParameterName": ("pause_parameter", _parameter_name),
    "sdc:nodeActionConcurrency": ("node_action_concurrency", _integer(1, 100)),
    "sdc:intakeConcurrency": ("intake_concurrency", _integer(1, 100)),
    "sdc:recoveryThroughNodeLabel": ("recovery_label_clusters", _cluster_names),
    "sdc:nodeIsolation": ("node_isolation", _node_isolation),
    "sdc:jobPods": ("job_pods", _job_pods),
    "sdc:slurmControllers": ("slurm_controllers", _slurm_controllers),
    "sdc:nodeIsolationAccess": (
        "node_isolation_access",
        _string(re.compile(r"^(group|clusterAdminPolicy)$"), "group or clusterAdminPolicy"),
    ),
    "sdc:telemetry": ("telemetry", _telemetry),
    "sdc:hardwareAlerts": ("hardware_alerts", _hardware_alerts),
    "sdc:approvalsRequired": ("approvals_required", _integer(1, MAX_APPROVALS_REQUIRED)),
    "sdc:approvers": ("approvers", _approvers),
    "sdc:humanSessionRoles": ("human_session_roles", _human_session_roles),
    "sdc:requireIdentityProof": ("require_identity_proof", _boolean),
    "sdc:acknowledgeNoClusters": ("acknowledge_no_clusters", _boolean),
    "sdc:idleSweep": ("idle_sweep", parse_idle_sweep),
}

CONTEXT_KEYS: Final = tuple(_PARSERS)

CONTEXT_ATTRIBUTES: Final = {key: attr for key, (attr, _) in _PARSERS.items()}
"""`sdc:*` key → the `Settings` attribute it sets (and the `SdcRemediationProps` field)."""

RENAMED: Final = {"sdc:guardMaxOpenIncidents": "sdc:guardMaxOpenNodes"}
"""Keys of earlier releases, named in the error so that an upgrade says what to change (the guard
has always counted nodes, never incidents)."""
