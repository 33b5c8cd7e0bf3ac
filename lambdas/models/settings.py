"""The functions' environment (docs/pipeline.md, "Environment"), read once into one typed value.

`Settings.from_env()` checks every variable at once and raises `SettingsError` naming all that
are missing or bad, before any work is done.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sdc_remediation.lambdas.models.deadline import DEFAULT_TIME_ZONE, TIME_ZONE_RE
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.hyperpod import HealthCheck
from sdc_remediation.lambdas.models.kubernetes import LABEL_KEY_RE
from sdc_remediation.lambdas.models.setting_declarations import (
    BY_ATTR,
    DECLARED,
    SETTINGS,
    Form,
    integer_range,
    with_declared_defaults,
)
from trainer_emitter.contract import INSTANCE_ID_RE, NAMESPACE

REQUIRED = (EnvVar.INCIDENTS_TABLE, EnvVar.AUDIT_TABLE, EnvVar.TOPIC_ARN)
DEFAULT_HEALTH_CHECKS: Final = BY_ATTR["health_checks"].typed_default
_POSITIVE: Final = {
    # variable: (attribute, lowest, highest), for every integer setting the functions read
    setting.env: (setting.attr, *integer_range(setting.attr))
    for setting in SETTINGS
    if setting.env is not None and setting.form is Form.INTEGER
}
APPROVER_PATTERN_RE = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::[0-9*?]{1,12}:[!-~]{1,200}$")
"""An `APPROVERS` entry: an IAM user/role or STS assumed-role ARN, `*` and `?` as wildcards."""
HUMAN_SESSION_ROLE_RE = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[!-~]{1,200}$")
"""A `HUMAN_SESSION_ROLES` entry: an IAM role ARN of a named account (`*`, `?` in the name)."""


EKS_CLUSTER_NAME_RE = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
WORKSPACE_ID_RE = re.compile(r"^[0-9A-Za-z][-.0-9A-Za-z_]{0,63}$")
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
"""A Prometheus label name."""


RECOVERY_API: Final = "api"
RECOVERY_NODE_LABEL: Final = "node_label"
RECOVERY_PATHS: Final = (RECOVERY_API, RECOVERY_NODE_LABEL)
"""How an approved reboot or replacement is carried out (`IsolationConfig.recovery`)."""


@dataclass(frozen=True, slots=True)
class IsolationConfig:
    """Node isolation for one HyperPod cluster (`NODE_ISOLATION`): whether to cordon and taint
    the suspect node while the incident is open, and the EKS cluster whose API to use (None:
    the one HyperPod's DescribeCluster names as its orchestrator)."""

    isolate: bool
    eks_cluster: str | None = None
    recovery: str = RECOVERY_API
    """How an approved reboot or replacement is carried out: "api" (BatchRebootClusterNodes /
    BatchReplaceClusterNodes) or "node_label" (HyperPod's node health label, acted on by HyperPod
    itself when the cluster's NodeRecovery is Automatic)."""
    job_pods: str | None = None
    """A pod label key naming the job (such as the training operator's job-name label): a
    report's instances are checked against the nodes the pods labelled with its job name run
    on (None: not checked)."""
    slurm_controller: str | None = None
    """On a cluster orchestrated by Slurm: the instance id of its controller node, where the
    drain and its release run (SSM Run Command)."""


ISOLATION_OFF = IsolationConfig(isolate=False)


def node_isolation_env(configs: Mapping[str, IsolationConfig]) -> str:
    """`NODE_ISOLATION` as `Settings.from_env` reads it back (the stack sets it with this): per
    cluster, "isolate", then only what differs from the defaults."""
    return json.dumps(
        {
            cluster: {
                "isolate": config.isolate,
                **({"eks_cluster": config.eks_cluster} if config.eks_cluster else {}),
                **({"recovery": config.recovery} if config.recovery != RECOVERY_API else {}),
                **({"job_pods": config.job_pods} if config.job_pods else {}),
                **(
                    {"slurm_controller": config.slurm_controller} if config.slurm_controller else {}
                ),
            }
            for cluster, config in configs.items()
        },
        sort_keys=True,
    )


@dataclass(frozen=True, slots=True)
class TelemetryWorkspace:
    """Hardware telemetry for one HyperPod cluster (`TELEMETRY`): the Amazon Managed Service for
    Prometheus workspace its observability add-on writes dcgm-exporter's series to."""

    workspace_id: str
    query_url: str
    """`https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>`; the Prometheus HTTP API
    is under it (`/api/v1/query_range`)."""
    region: str
    """The workspace's region: the SigV4 scope of the signed query."""
    dashboard: str | None = None
    """A Grafana dashboard URL for people (the card links it)."""
    node_label: str | None = None
    """The label that names the node in the series; None: dcgm-exporter's own, `Hostname`
    (before 4.8.3) or `hostname` (since)."""


@dataclass(frozen=True, slots=True)
@with_declared_defaults
class Settings:
    """The functions' side of the settings (`from_env`); each attribute that is a declared
    setting (`sdc_remediation.lambdas.models.setting_declarations`) takes its declared default unless it sets
    its own here."""

    incidents_table: str
    audit_table: str
    topic_arn: str
    allowed_clusters: frozenset[str] = field(default_factory=frozenset)
    """Clusters this deployment may act on; empty = none."""
    health_checks: tuple[str, ...] = DECLARED
    namespace: str = DECLARED
    dry_run: bool = DECLARED
    state_machine_arn: str | None = None
    """The remediation state machine; only open_incident needs it."""
    approval_state_machine_arn: str | None = None
    """For the console link and the paste-able input in approval notifications."""
    guard_max_open_nodes: int = DECLARED
    guard_max_open_percent: int = DECLARED
    storm_threshold: int = DECLARED
    storm_window_seconds: int = DECLARED
    report_openings_per_minute: int = DECLARED
    job_openings_per_minute: int = DECLARED
    repeat_offender_incidents: int = DECLARED
    repeat_offender_window_days: int = DECLARED
    pause_parameter: str | None = None
    """The SSM parameter of the pause switch; None = no switch (never paused)."""
    event_bus_name: str | None = None
    """Where incident lifecycle events go (`EVENT_BUS_NAME`); None = nowhere."""
    approval_timeout_seconds: int | None = None
    """The approval task's timeout: a decision arriving later is refused (None: not checked
    here; Step Functions still refuses the expired token)."""
    approver_time_zone: str = DECLARED
    node_isolation: Mapping[str, IsolationConfig] = field(default_factory=dict)
    """Per HyperPod cluster name; a cluster not listed is not isolated."""
    telemetry: Mapping[str, TelemetryWorkspace] = field(default_factory=dict)
    """Per HyperPod cluster name; a cluster not listed has no hardware telemetry."""
    approvals_required: int = DECLARED
    approvers: tuple[str, ...] = DECLARED
    human_session_roles: tuple[str, ...] = DECLARED
    require_identity_proof: bool = DECLARED
    audit_anchor_log_group: str | None = None
    """The CloudWatch Logs group every audit entry's hash is appended to; None: not anchored."""

    @property
    def needs_identity_proof(self) -> bool:
        """Whether a decision must carry an identity proof: asked for, or implied by a rule
        that needs to know who decided (approver patterns, more than one approval)."""
        return self.require_identity_proof or bool(self.approvers) or self.approvals_required > 1

    def isolation_for(self, cluster_name: str) -> IsolationConfig:
        return self.node_isolation.get(cluster_name, ISOLATION_OFF)

    def telemetry_for(self, cluster_name: str) -> TelemetryWorkspace | None:
        return self.telemetry.get(cluster_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        problems = [f"{name} is not set" for name in REQUIRED if not env.get(name, "").strip()]

        checks = _split(env.get(EnvVar.HEALTH_CHECKS, "")) or DEFAULT_HEALTH_CHECKS
        known = {c.value for c in HealthCheck}
        unknown = [c for c in checks if c not in known]
        if unknown:
            problems.append(
                f"{EnvVar.HEALTH_CHECKS} has unknown checks {unknown} (known: {sorted(known)})"
            )

        raw_dry_run = env.get(EnvVar.DRY_RUN, "").strip().lower()
        if raw_dry_run not in ("", "true", "false"):
            problems.append(
                f"{EnvVar.DRY_RUN} must be 'true' or 'false', got {env[EnvVar.DRY_RUN]!r}"
            )

        numbers: dict[str, int] = {}
        for name, (attr, low, high) in _POSITIVE.items():
            raw = env.get(name, "").strip()
            if not raw:
                continue
            if not raw.isdigit() or not low <= int(raw) <= high:
                problems.append(f"{name} must be an integer in {low}..{high}, got {raw!r}")
            else:
                numbers[attr] = int(raw)

        raw_proof = env.get(EnvVar.REQUIRE_IDENTITY_PROOF, "").strip().lower()
        if raw_proof not in ("", "true", "false"):
            problems.append(
                f"{EnvVar.REQUIRE_IDENTITY_PROOF} must be 'true' or 'false', "
                f"got {env[EnvVar.REQUIRE_IDENTITY_PROOF]!r}"
            )
        approvers = _split(env.get(EnvVar.APPROVERS, ""))
        bad_approvers = [a for a in approvers if not APPROVER_PATTERN_RE.match(a)]
        if bad_approvers:
            problems.append(
                f"{EnvVar.APPROVERS} must be IAM or STS ARN patterns (comma-separated), got {bad_approvers}"
            )
        human_roles = _split(env.get(EnvVar.HUMAN_SESSION_ROLES, ""))
        bad_roles = [r for r in human_roles if not HUMAN_SESSION_ROLE_RE.match(r)]
        if bad_roles:
            problems.append(
                f"{EnvVar.HUMAN_SESSION_ROLES} must be IAM role ARN patterns of named accounts "
                f"(comma-separated), got {bad_roles}"
            )

        time_zone = env.get(EnvVar.APPROVER_TIME_ZONE, "").strip() or DEFAULT_TIME_ZONE
        if not TIME_ZONE_RE.match(time_zone):
            problems.append(
                f"{EnvVar.APPROVER_TIME_ZONE} must be an IANA time zone name such as "
                f"Europe/Berlin or UTC, got {time_zone!r}"
            )
        isolation = _node_isolation(env.get(EnvVar.NODE_ISOLATION, ""), problems)
        telemetry = _telemetry(env.get(EnvVar.TELEMETRY, ""), problems)

        if problems:
            raise SettingsError("bad function environment: " + "; ".join(problems))
        return cls(
            incidents_table=env[EnvVar.INCIDENTS_TABLE].strip(),
            audit_table=env[EnvVar.AUDIT_TABLE].strip(),
            topic_arn=env[EnvVar.TOPIC_ARN].strip(),
            allowed_clusters=frozenset(_split(env.get(EnvVar.ALLOWED_CLUSTERS, ""))),
            health_checks=checks,
            namespace=env.get(EnvVar.NAMESPACE, "").strip() or NAMESPACE,
            dry_run=raw_dry_run == "true",
            state_machine_arn=env.get(EnvVar.STATE_MACHINE_ARN, "").strip() or None,
            approval_state_machine_arn=env.get(EnvVar.APPROVAL_STATE_MACHINE_ARN, "").strip()
            or None,
            pause_parameter=env.get(EnvVar.PAUSE_PARAMETER, "").strip() or None,
            event_bus_name=env.get(EnvVar.EVENT_BUS_NAME, "").strip() or None,
            approver_time_zone=time_zone,
            node_isolation=isolation,
            telemetry=telemetry,
            approvers=approvers,
            human_session_roles=human_roles,
            require_identity_proof=raw_proof == "true",
            audit_anchor_log_group=env.get(EnvVar.AUDIT_ANCHOR_LOG_GROUP, "").strip() or None,
            **numbers,
        )

    def require_state_machine_arn(self) -> str:
        if not self.state_machine_arn:
            raise SettingsError(
                f"{EnvVar.STATE_MACHINE_ARN} is not set: open_incident cannot start work"
            )
        return self.state_machine_arn


def env_text(value: bool | int | str | tuple[str, ...]) -> str:
    """A setting's value as its variable carries it and `from_env` reads it back."""
    if isinstance(value, bool):
        return flag_env(value)
    if isinstance(value, tuple):
        return list_env(value)
    return str(value)


def flag_env(value: bool) -> str:
    """A true/false variable (`DRY_RUN`, `REQUIRE_IDENTITY_PROOF`) as `from_env` reads it."""
    return "true" if value else "false"


def list_env(values: Iterable[str]) -> str:
    """A comma-separated variable (`ALLOWED_CLUSTERS`, `HEALTH_CHECKS`, `APPROVERS`) as
    `from_env` reads it."""
    return ",".join(values)


def _split(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _json_object(raw: str, expected: str, problems: list[str]) -> dict[str, Any] | None:
    """`raw` as a JSON object, or None with the problem noted (`expected` says the shape)."""
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError as err:
        problems.append(f"{expected}; not JSON: {err}")
        return None
    if not isinstance(parsed, dict):
        problems.append(f"{expected}; got {type(parsed).__name__}")
        return None
    return parsed


def _node_isolation(raw: str, problems: list[str]) -> dict[str, IsolationConfig]:
    """`NODE_ISOLATION`: a JSON object, HyperPod cluster name → {"isolate": bool,
    "eks_cluster": "<EKS cluster name>" (optional), "recovery": "api" | "node_label" (optional,
    default api), "job_pods": "<pod label key naming the job>" (optional), "slurm_controller":
    "<controller instance id>" (optional, Slurm clusters)}; empty = no cluster isolated."""
    if not raw.strip():
        return {}
    expected = (
        f"{EnvVar.NODE_ISOLATION} must be a JSON object "
        '{"<HyperPod cluster>": {"isolate": true|false, '
        '"eks_cluster": "<EKS cluster name>"}}'
    )
    parsed = _json_object(raw, expected, problems)
    if parsed is None:
        return {}
    configs: dict[str, IsolationConfig] = {}
    for cluster, value in parsed.items():
        if not isinstance(value, dict) or not isinstance(value.get("isolate"), bool):
            problems.append(f'{expected}; {cluster!r} needs "isolate": true or false')
            continue
        unknown = sorted(
            set(value) - {"isolate", "eks_cluster", "recovery", "job_pods", "slurm_controller"}
        )
        controller = value.get("slurm_controller")
        eks = value.get("eks_cluster")
        recovery = value.get("recovery", RECOVERY_API)
        job_pods = value.get("job_pods")
        if unknown:
            problems.append(f"{expected}; {cluster!r} has unknown keys {unknown}")
        elif eks is not None and (not isinstance(eks, str) or not EKS_CLUSTER_NAME_RE.match(eks)):
            problems.append(f"{expected}; {cluster!r} has a bad eks_cluster {eks!r}")
        elif recovery not in RECOVERY_PATHS:
            problems.append(
                f"{expected}; {cluster!r} has recovery {recovery!r}, not one of {RECOVERY_PATHS}"
            )
        elif job_pods is not None and (
            not isinstance(job_pods, str) or not LABEL_KEY_RE.match(job_pods)
        ):
            problems.append(f"{expected}; {cluster!r} has a bad job_pods label key {job_pods!r}")
        elif controller is not None and (
            not isinstance(controller, str) or not INSTANCE_ID_RE.match(controller)
        ):
            problems.append(
                f"{expected}; {cluster!r} has a bad slurm_controller {controller!r} "
                "(an EC2 instance id, i-...)"
            )
        elif controller is not None and eks is not None:
            problems.append(
                f"{expected}; {cluster!r} names both an EKS cluster and a Slurm controller"
            )
        else:
            configs[cluster] = IsolationConfig(
                value["isolate"], eks, recovery, job_pods, controller
            )
    return configs


def _telemetry(raw: str, problems: list[str]) -> dict[str, TelemetryWorkspace]:
    """`TELEMETRY`: a JSON object, HyperPod cluster name → {"workspace_id", "query_url",
    "region", "dashboard" (optional), "node_label" (optional)}; empty = no telemetry."""
    if not raw.strip():
        return {}
    expected = (
        f"{EnvVar.TELEMETRY} must be a JSON object "
        '{"<HyperPod cluster>": {"workspace_id": "ws-...", '
        '"query_url": "https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-...", '
        '"region": "<region>", "dashboard": "<https URL>" | null, "node_label": "<label>" | null}}'
    )
    parsed = _json_object(raw, expected, problems)
    if parsed is None:
        return {}
    known = {"workspace_id", "query_url", "region", "dashboard", "node_label"}
    workspaces: dict[str, TelemetryWorkspace] = {}
    for cluster, value in parsed.items():
        if not isinstance(value, dict):
            problems.append(f"{expected}; {cluster!r} is not an object")
            continue
        found = [f"{cluster!r} {problem}" for problem in _telemetry_problems(value, known)]
        if found:
            problems.extend(f"{expected}; {problem}" for problem in found)
            continue
        workspaces[cluster] = TelemetryWorkspace(
            workspace_id=value["workspace_id"],
            query_url=value["query_url"].rstrip("/"),
            region=value["region"],
            dashboard=value.get("dashboard"),
            node_label=value.get("node_label"),
        )
    return workspaces


def _telemetry_problems(value: dict[str, Any], known: set[str]) -> list[str]:
    problems = []
    unknown = sorted(set(value) - known)
    if unknown:
        problems.append(f"has unknown keys {unknown}")
    workspace = value.get("workspace_id")
    if not isinstance(workspace, str) or not WORKSPACE_ID_RE.match(workspace):
        problems.append(f"has a bad workspace_id {workspace!r}")
    if not _is_https_url(value.get("query_url")):
        problems.append(f"has a query_url that is not an https URL: {value.get('query_url')!r}")
    region = value.get("region")
    if not isinstance(region, str) or not REGION_RE.match(region):
        problems.append(f"has a bad region {region!r}")
    dashboard = value.get("dashboard")
    if dashboard is not None and not _is_https_url(dashboard):
        problems.append(f"has a dashboard that is not an https URL: {dashboard!r}")
    label = value.get("node_label")
    if label is not None and (
        not isinstance(label, str) or not LABEL_NAME_RE.match(label) or label.startswith("__")
    ):
        problems.append(f"has a node_label that is not a Prometheus label name: {label!r}")
    return problems


def _is_https_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    parts = urllib.parse.urlsplit(value)
    return parts.scheme == "https" and bool(parts.hostname)
