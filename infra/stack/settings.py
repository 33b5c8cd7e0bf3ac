"""Deployment settings: the `sdc:*` context keys of `cdk.json`, parsed once and checked early.

Every key has a documented default, so `cdk synth` works on a fresh clone. Override a key in
`cdk.json` or on the command line (`-c` values arrive as strings; lists and objects as JSON):

    npx cdk deploy -c 'sdc:clusters={"ml-cluster-1": "ab12cd34ef56"}' -c sdc:approvalTimeoutSeconds=7200

Each key is declared once, with its type, range, default and meaning, in
`sdc_remediation.lambdas.models.setting_declarations`; the parsers here are derived from it, and so is the table of
docs/settings.md (tests/docs/test_tables_drift.py holds it to the declaration).

Unknown `sdc:*` keys are an error (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sdc_remediation.infra.stack.alert_rules import CRITICAL_XIDS_KEY, THRESHOLD_KEYS, Thresholds
from sdc_remediation.infra.stack.context_values import fail, integer, json_if_string
from sdc_remediation.infra.stack.idle_sweep import IdleSweep, check_idle_sweep, parse_idle_sweep
from sdc_remediation.lambdas.logic.evidence.xids import CATALOG
from sdc_remediation.lambdas.models.deadline import TIME_ZONE_RE, zone
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.hyperpod import HealthCheck
from sdc_remediation.lambdas.models.kubernetes import LABEL_KEY_RE
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS
from sdc_remediation.lambdas.models.setting_declarations import (
    BY_KEY,
    DECLARED,
    MAX_APPROVAL_TIMEOUT_SECONDS,
    RENAMED,
    SETTINGS,
    Form,
    Setting,
    key_of,
    with_declared_defaults,
)
from sdc_remediation.lambdas.models.settings import (
    APPROVER_PATTERN_RE,
    EKS_CLUSTER_NAME_RE,
    HUMAN_SESSION_ROLE_RE,
    LABEL_NAME_RE,
    RECOVERY_API,
    RECOVERY_NODE_LABEL,
    REGION_RE,
    IsolationConfig,
    env_text,
    node_isolation_env,
)
from trainer_emitter.contract import INSTANCE_ID_RE

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
@with_declared_defaults
class DeploymentSettings:
    """The typed form of the `sdc:*` context keys: one attribute per declared setting
    (`sdc_remediation.lambdas.models.setting_declarations`, which holds each one's default and meaning; the
    table is docs/settings.md)."""

    stack_name: str = DECLARED
    clusters: tuple[Cluster, ...] = DECLARED
    approval_timeout_seconds: int = DECLARED
    approver_time_zone: str = DECLARED
    notification_email: str | None = DECLARED
    namespace: str = DECLARED
    alarm_name_prefix: str = DECLARED
    health_checks: tuple[str, ...] = DECLARED
    health_check_poll_seconds: int = DECLARED
    health_check_max_polls: int = DECLARED
    replacement_poll_seconds: int = DECLARED
    replacement_max_polls: int = DECLARED
    replace_retry_seconds: int = DECLARED
    replace_max_retries: int = DECLARED
    reboot_poll_seconds: int = DECLARED
    reboot_max_polls: int = DECLARED
    dry_run: bool = DECLARED
    log_retention_days: int = DECLARED
    guard_max_open_nodes: int = DECLARED
    guard_max_open_percent: int = DECLARED
    storm_threshold: int = DECLARED
    storm_window_seconds: int = DECLARED
    report_openings_per_minute: int = DECLARED
    job_openings_per_minute: int = DECLARED
    repeat_offender_incidents: int = DECLARED
    repeat_offender_window_days: int = DECLARED
    pause_parameter: str | None = DECLARED
    """None: `/<stack name>/paused` (see `pause_parameter_name`)."""
    node_isolation: tuple[tuple[str, str], ...] = DECLARED
    """(HyperPod cluster name, EKS cluster name) pairs whose suspect nodes are isolated."""
    node_isolation_access: str = DECLARED
    slurm_controllers: tuple[tuple[str, str], ...] = DECLARED
    """(HyperPod cluster name, controller instance id) pairs."""
    node_action_concurrency: int = DECLARED
    intake_concurrency: int = DECLARED
    recovery_label_clusters: tuple[str, ...] = DECLARED
    job_pods: tuple[tuple[str, str], ...] = DECLARED
    """(HyperPod cluster name, pod label key naming the job) pairs."""
    telemetry: tuple[TelemetrySource, ...] = DECLARED
    hardware_alerts: Thresholds = field(default_factory=Thresholds)
    """The declared default (no key given: every threshold at its own default) as its type."""
    approvals_required: int = DECLARED
    approvers: tuple[str, ...] = DECLARED
    human_session_roles: tuple[str, ...] = DECLARED
    require_identity_proof: bool = DECLARED
    acknowledge_no_clusters: bool = DECLARED
    idle_sweep: IdleSweep | None = DECLARED
    """The clusters whose idle nodes are health-checked on a schedule (None: no sweep)."""

    @property
    def refuses_to_deploy(self) -> bool:
        """An empty `sdc:clusters` outside dry run, unacknowledged: such a stack would act on no
        cluster, so its deployment is refused (`sdc_remediation.infra.stack.no_clusters`)."""
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
    def from_context(cls, context: Mapping[str, Any]) -> DeploymentSettings:
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
        eks = "the EKS cluster that isolation uses"
        _only_within(
            "recovery_label_clusters",
            self.recovery_label_clusters,
            "node_isolation",
            isolated,
            f"the node health label is set through {eks}",
        )
        _only_within(
            "job_pods",
            [name for name, _ in self.job_pods],
            "node_isolation",
            isolated,
            f"the job's pods are listed through {eks}",
        )
        acts_on = "only for clusters this deployment acts on"
        for attr, names, what in (
            ("node_isolation", [name for name, _ in self.node_isolation], "isolation"),
            ("slurm_controllers", [name for name, _ in self.slurm_controllers], "isolation"),
            ("telemetry", [t.cluster for t in self.telemetry], "telemetry"),
        ):
            _only_within(attr, names, "clusters", self.cluster_names, f"{what} is {acts_on}")
        both = sorted(isolated & {name for name, _ in self.slurm_controllers})
        if both:
            raise SettingsError(
                f"{key_of('slurm_controllers')} and {key_of('node_isolation')} both name {', '.join(both)}: a "
                "cluster has one orchestrator (EKS or Slurm)"
            )
        unknown = [t.cluster for t in self.telemetry if t.cluster not in self.cluster_names]
        if unknown:
            raise SettingsError(
                f"{key_of('telemetry')} names {', '.join(unknown)}, not in {key_of('clusters')}: telemetry is "
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
                f"{checks} x {key_of('health_check_max_polls')} + {key_of('reboot_max_polls')} + "
                f"{key_of('replacement_max_polls')} + {checks} x {key_of('replace_max_retries')} = "
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


def _only_within(
    attr: str, names: Iterable[str], within_attr: str, within: Collection[str], why: str
) -> None:
    """Raise SettingsError naming each of `names` (setting `attr`) not in `within` (setting
    `within_attr`), and `why` it must be."""
    outside = [name for name in names if name not in within]
    if outside:
        raise SettingsError(
            f"{key_of(attr)} names {', '.join(outside)}, not in {key_of(within_attr)}: {why}"
        )


# --- parsers: each takes (key, raw value) and returns the typed value or raises SettingsError ---


def _string(pattern: re.Pattern[str], expected: str) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise fail(key, value, expected)
        return value

    return parse


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise fail(key, value, "true or false")


def _namespace(key: str, value: Any) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 255
        or value.startswith(":")
        or value.startswith("AWS/")
        or '"' in value
        or not value.isprintable()
    ):
        raise fail(key, value, 'a CloudWatch namespace (1-255 characters, not "AWS/...")')
    return value


def _email(key: str, value: Any) -> str | None:
    if value in ("", "null", "none"):
        return None
    if not isinstance(value, str) or not EMAIL_RE.match(value):
        raise fail(key, value, "an e-mail address or null")
    return value


def _health_checks(key: str, value: Any) -> tuple[str, ...]:
    expected = "a non-empty list of " + ", ".join(HEALTH_CHECK_TYPES)
    if isinstance(value, str) and not value.strip().startswith("["):
        value = [part.strip() for part in value.split(",") if part.strip()]
    value = json_if_string(key, value, expected)
    if (
        not isinstance(value, list)
        or not value
        or any(v not in HEALTH_CHECK_TYPES for v in value)
        or len(set(value)) != len(value)
    ):
        raise fail(key, value, expected + " (no duplicates)")
    return tuple(value)


def _clusters(key: str, value: Any) -> tuple[Cluster, ...]:
    expected = (
        'an object {"<cluster name>": "<cluster ARN or 12-character cluster id>"}; HyperPod '
        "cluster ARNs end in the cluster id (DescribeCluster shows it), which IAM needs"
    )
    value = json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise fail(key, value, expected)
    clusters = []
    for name, target in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(target, str) or not (
            CLUSTER_ARN_RE.match(target) or CLUSTER_ID_RE.match(target)
        ):
            raise fail(key, value, f"{expected}; {target!r} for {name!r} is neither")
        clusters.append(Cluster(name=name, arn_or_id=target))
    return tuple(sorted(clusters, key=lambda c: c.name))


def _cluster_map(
    expected: str, pattern: re.Pattern[str], what: str
) -> Callable[[str, Any], tuple[tuple[str, str], ...]]:
    """A parser of an object {HyperPod cluster name: a string `pattern` matches (`what`)} into
    sorted (name, string) pairs."""

    def parse(key: str, value: Any) -> tuple[tuple[str, str], ...]:
        value = json_if_string(key, value, expected)
        if not isinstance(value, Mapping):
            raise fail(key, value, expected)
        pairs = []
        for name, target in value.items():
            if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
                raise fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
            if not isinstance(target, str) or not pattern.match(target):
                raise fail(key, value, f"{expected}; {target!r} for {name!r} is not {what}")
            pairs.append((name, target))
        return tuple(sorted(pairs))

    return parse


_node_isolation: Final = _cluster_map(
    'an object {"<HyperPod cluster name>": "<EKS cluster name>"}',
    EKS_CLUSTER_NAME_RE,
    "an EKS cluster name",
)
_slurm_controllers: Final = _cluster_map(
    'an object {"<HyperPod cluster name>": "<Slurm controller instance id, i-...>"}',
    INSTANCE_ID_RE,
    "an instance id",
)
_job_pods: Final = _cluster_map(
    'an object {"<HyperPod cluster name>": "<pod label key naming the job>"}',
    LABEL_KEY_RE,
    "a label key",
)


def _cluster_names(key: str, value: Any) -> tuple[str, ...]:
    expected = "a list of HyperPod cluster names"
    value = json_if_string(key, value, expected)
    if not isinstance(value, list) or any(
        not isinstance(v, str) or not CLUSTER_NAME_RE.match(v) for v in value
    ):
        raise fail(key, value, expected)
    return tuple(sorted(set(value)))


def _telemetry(key: str, value: Any) -> tuple[TelemetrySource, ...]:
    expected = (
        'an object {"<HyperPod cluster name>": {"workspace": "<AMP workspace id ws-... or '
        'workspace ARN>", "dashboard": "<https URL>" or null, "nodeLabel": "<label>" '
        "(optional)}}"
    )
    value = json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise fail(key, value, expected)
    sources = []
    for name, config in value.items():
        if not isinstance(name, str) or not CLUSTER_NAME_RE.match(name):
            raise fail(key, value, f"{expected}; {name!r} is not a HyperPod cluster name")
        if not isinstance(config, Mapping):
            raise fail(key, value, f"{expected}; {name!r} needs an object")
        unknown = sorted(set(config) - {"workspace", "dashboard", "nodeLabel"})
        if unknown:
            raise fail(key, value, f"{expected}; {name!r} has unknown keys {unknown}")
        workspace = config.get("workspace")
        if not isinstance(workspace, str) or not (
            WORKSPACE_ID_RE.match(workspace) or WORKSPACE_ARN_RE.match(workspace)
        ):
            raise fail(
                key,
                value,
                f"{expected}; {name!r} has workspace {workspace!r}, neither a workspace id "
                "(ws-...) nor a workspace ARN (arn:aws:aps:<region>:<account>:workspace/ws-...)",
            )
        dashboard = config.get("dashboard")
        if dashboard is not None and not _https_url(dashboard):
            raise fail(
                key, value, f"{expected}; {name!r} has dashboard {dashboard!r}, not an https URL"
            )
        label = config.get("nodeLabel")
        if label is not None and (
            not isinstance(label, str) or not LABEL_NAME_RE.match(label) or label.startswith("__")
        ):
            raise fail(
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
    value = json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise fail(key, value, expected)
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise fail(key, value, f"{expected}; unknown keys {unknown}")
    changes: dict[str, Any] = {}
    for name, spec in THRESHOLD_KEYS.items():
        if name in value:
            changes[spec.attr] = integer(spec.low, spec.high)(f"{key}.{name}", value[name])
    if CRITICAL_XIDS_KEY in value:
        xids = value[CRITICAL_XIDS_KEY]
        if (
            not isinstance(xids, list)
            or not xids
            or any(isinstance(x, bool) or x not in CATALOG for x in xids)
            or len(set(xids)) != len(xids)
        ):
            raise fail(
                f"{key}.{CRITICAL_XIDS_KEY}",
                xids,
                "a non-empty list of distinct XIDs from the card's catalog ("
                + ", ".join(map(str, sorted(CATALOG)))
                + "): an alert must say what its XID means",
            )
        changes["critical_xids"] = tuple(sorted(xids))
    thresholds = replace(Thresholds(), **changes)
    if thresholds.link_downtime_seconds >= thresholds.link_window_minutes * 60:
        raise fail(
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
        raise fail(
            key,
            value,
            "an SSM parameter name (letters, digits, '_', '.', '-', '/'; not starting with "
            "aws or ssm) or null",
        )
    return value


def _arn_patterns(pattern: re.Pattern[str], expected: str) -> Callable[[str, Any], tuple[str, ...]]:
    """A parser of a list of ARN patterns, each matching `pattern` and without a comma (the
    functions' environment joins them with commas)."""

    def parse(key: str, value: Any) -> tuple[str, ...]:
        parsed = json_if_string(key, value, expected)
        if not isinstance(parsed, list) or not all(
            isinstance(p, str) and pattern.match(p) and "," not in p for p in parsed
        ):
            raise fail(key, value, expected)
        return tuple(parsed)

    return parse


_human_session_roles: Final = _arn_patterns(
    HUMAN_SESSION_ROLE_RE,
    'a list of IAM role ARN patterns, e.g. ["arn:aws:iam::123456789012:role/Oncall"]',
)
_approvers: Final = _arn_patterns(
    APPROVER_PATTERN_RE,
    'a list of IAM or STS ARN patterns, e.g. ["arn:aws:iam::123456789012:role/Approver*"]',
)


def _time_zone(key: str, value: Any) -> str:
    if not isinstance(value, str) or not TIME_ZONE_RE.match(value) or zone(value) is None:
        raise fail(key, value, "an IANA time zone name such as Europe/Berlin or UTC")
    return value


def _retention(key: str, value: Any) -> int:
    days = integer(1, 3653)(key, value)
    if days not in LOG_RETENTION_DAYS:
        raise fail(key, value, "one of " + ", ".join(map(str, LOG_RETENTION_DAYS)))
    return days


Parser = Callable[[str, Any], Any]

_FORMS: Final[Mapping[Form, Parser]] = {
    Form.STACK_NAME: _string(
        STACK_NAME_RE, "a stack name: a letter, then letters, digits or '-' (<= 60)"
    ),
    Form.CLUSTERS: _clusters,
    Form.TIME_ZONE: _time_zone,
    Form.EMAIL: _email,
    Form.NAMESPACE: _namespace,
    Form.ALARM_NAME_PREFIX: _string(
        ALARM_PREFIX_RE, "letters, digits, '_', '.', '-' (not at either end), or empty"
    ),
    Form.HEALTH_CHECKS: _health_checks,
    Form.LOG_RETENTION: _retention,
    Form.NODE_ISOLATION: _node_isolation,
    Form.SLURM_CONTROLLERS: _slurm_controllers,
    Form.ISOLATION_ACCESS: _string(
        re.compile(r"^(group|clusterAdminPolicy)$"), "group or clusterAdminPolicy"
    ),
    Form.JOB_PODS: _job_pods,
    Form.CLUSTER_NAMES: _cluster_names,
    Form.PARAMETER_NAME: _parameter_name,
    Form.TELEMETRY: _telemetry,
    Form.HARDWARE_ALERTS: _hardware_alerts,
    Form.APPROVERS: _approvers,
    Form.HUMAN_SESSION_ROLES: _human_session_roles,
    Form.BOOLEAN: _boolean,
    Form.IDLE_SWEEP: parse_idle_sweep,
}
"""The parser of each form; an `INTEGER` setting's is its declared range's (`_parser`)."""


def _parser(setting: Setting) -> Parser:
    if setting.form is Form.INTEGER:
        if setting.low is None or setting.high is None:
            raise TypeError(f"{setting.key} is an integer setting without a range")
        return integer(setting.low, setting.high)
    return _FORMS[setting.form]


_PARSERS: Final[dict[str, tuple[str, Parser]]] = {
    setting.key: (setting.attr, _parser(setting)) for setting in SETTINGS
}
"""`sdc:*` key → (the attribute it sets, its parser): derived from the declaration."""

CONTEXT_KEYS: Final = tuple(BY_KEY)

CONTEXT_ATTRIBUTES: Final = {setting.key: setting.attr for setting in SETTINGS}
"""`sdc:*` key → the `DeploymentSettings` attribute it sets (and the `SdcRemediationProps`
field)."""


def settings_env(settings: DeploymentSettings) -> dict[EnvVar, str]:
    """The variables that carry a declared setting as it is (`Setting.env`, not `env_built`):
    derived from the declaration, never listed again."""
    return {
        setting.env: env_text(getattr(settings, setting.attr))
        for setting in SETTINGS
        if setting.env is not None and not setting.env_built
    }
