"""Idle sweeps (`sdc:idleSweep`): one EventBridge Scheduler schedule per swept cluster, invoking
the `sweep_idle` function with that cluster's sweep request (sdc_remediation.lambdas.logic.sweep).

Off unless `sdc:idleSweep` names clusters: then the function exists, with HyperPod grants on
exactly the swept clusters, and each cluster gets its schedule. The value, with its defaults:

    "sdc:idleSweep": {"clusters": ["ml-cluster-1"], "everyMinutes": 360, "batchSize": 4,
                      "checks": ["InstanceConnectivity"], "maxSharePercent": 25,
                      "minIdleNodes": 2}

docs/operate.md, "Idle sweeps", gives the reasons for each default.
The schedules themselves are `idle_sweep_schedules.IdleSweeps` (this module knows no CDK:
the settings, and what reads them without the stack, import it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sdc_remediation.infra.stack.context_values import integer, json_if_string
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.hyperpod import HealthCheck
from sdc_remediation.lambdas.models.setting_declarations import key_of
from sdc_remediation.lambdas.models.sweep import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_SHARE_PERCENT,
    DEFAULT_MIN_IDLE_NODES,
    DEFAULT_SWEEP_CHECKS,
    MAX_BATCH_SIZE,
    SWEEP_CHECKS,
    SweepRequest,
)

KEY: Final = key_of("idle_sweep")
DEFAULT_EVERY_MINUTES: Final = 360
"""Four runs a day: at the default batch a cluster of a hundred idle nodes has each checked
about every week, and a failing link is found between jobs, not hours into the next one."""
EVERY_MINUTES_RANGE: Final = (15, 10_080)
"""A quarter of an hour (InstanceConnectivity takes minutes; a run reads the last run's results)
to a week."""
FIELDS: Final = {
    "clusters": "clusters",
    "everyMinutes": "every_minutes",
    "batchSize": "batch_size",
    "checks": "checks",
    "maxSharePercent": "max_share_percent",
    "minIdleNodes": "min_idle_nodes",
}


@dataclass(frozen=True)
class IdleSweep:
    """The typed `sdc:idleSweep`."""

    clusters: tuple[str, ...] = ()
    every_minutes: int = DEFAULT_EVERY_MINUTES
    batch_size: int = DEFAULT_BATCH_SIZE
    checks: tuple[str, ...] = field(default_factory=lambda: tuple(map(str, DEFAULT_SWEEP_CHECKS)))
    max_share_percent: int = DEFAULT_MAX_SHARE_PERCENT
    min_idle_nodes: int = DEFAULT_MIN_IDLE_NODES

    def request(self, cluster_name: str) -> SweepRequest:
        """What the cluster's schedule asks its sweep to do."""
        return SweepRequest(
            cluster_name,
            tuple(HealthCheck(c) for c in self.checks),
            self.batch_size,
            self.max_share_percent,
            self.min_idle_nodes,
        )


def parse_idle_sweep(key: str, value: Any) -> IdleSweep:
    """`sdc:idleSweep` (an object, or its JSON on the command line); SettingsError naming what
    is wrong."""
    expected = "an object of " + ", ".join(FIELDS) + " (clusters: a non-empty list)"
    value = json_if_string(key, value, expected)
    if not isinstance(value, Mapping):
        raise SettingsError(f"{key}: expected {expected}, got {value!r}")
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise SettingsError(f"{key}: unknown keys {unknown}; expected {expected}")
    clusters = value.get("clusters")
    if (
        not isinstance(clusters, list)
        or not clusters
        or not all(isinstance(c, str) and c for c in clusters)
        or len(set(clusters)) != len(clusters)
    ):
        raise SettingsError(f"{key}.clusters: a non-empty list of distinct cluster names")
    checks = value.get("checks", list(map(str, DEFAULT_SWEEP_CHECKS)))
    allowed = [str(c) for c in SWEEP_CHECKS]
    if (
        not isinstance(checks, list)
        or not checks
        or any(c not in allowed for c in checks)
        or len(set(checks)) != len(checks)
    ):
        raise SettingsError(f"{key}.checks: a non-empty list of distinct checks of {allowed}")
    return IdleSweep(
        clusters=tuple(sorted(clusters)),
        every_minutes=_integer(
            key, value, "everyMinutes", DEFAULT_EVERY_MINUTES, EVERY_MINUTES_RANGE
        ),
        batch_size=_integer(key, value, "batchSize", DEFAULT_BATCH_SIZE, (1, MAX_BATCH_SIZE)),
        checks=tuple(checks),
        max_share_percent=_integer(
            key, value, "maxSharePercent", DEFAULT_MAX_SHARE_PERCENT, (1, 100)
        ),
        min_idle_nodes=_integer(key, value, "minIdleNodes", DEFAULT_MIN_IDLE_NODES, (0, 10_000)),
    )


def _integer(
    key: str, value: Mapping[str, Any], name: str, default: int, bounds: tuple[int, int]
) -> int:
    return integer(*bounds)(f"{key}.{name}", value.get(name, default))


def check_idle_sweep(
    sweep: IdleSweep | None, cluster_names: Collection[str], reached: Collection[str]
) -> None:
    """A swept cluster is one this deployment acts on (`cluster_names`), whose orchestrator the
    pipeline reaches to tell idle nodes from busy ones (`reached`: the clusters of
    `sdc:slurmControllers` and `sdc:nodeIsolation`)."""
    if sweep is None:
        return
    unknown = [c for c in sweep.clusters if c not in cluster_names]
    if unknown:
        raise SettingsError(
            f"{KEY} names {', '.join(unknown)}, not in {key_of('clusters')}: a sweep checks only "
            "clusters this deployment acts on"
        )
    blind = [c for c in sweep.clusters if c not in reached]
    if blind:
        raise SettingsError(
            f"{KEY} names {', '.join(blind)}, in neither {key_of('slurm_controllers')} nor "
            f"{key_of('node_isolation')}: a sweep must tell idle nodes from busy ones, through the "
            "cluster's Slurm controller or its EKS cluster's Kubernetes API"
        )
