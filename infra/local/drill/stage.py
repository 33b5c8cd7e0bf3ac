"""What the drill sets up around the deployed stack for a scenario: the fake HyperPod cluster,
the cluster's Prometheus workspace with every GPU's dcgm-exporter series (hardware-evidence,
and the clock-throttle reasons the straggler scenarios read), and an alarm mute rule over the detection alarms (muted-alarm)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sdc_remediation.infra.local.drill.scenarios import (
    BUSY_NODES,
    CLUSTER,
    DECOY_XIDS,
    GPUS_PER_NODE,
    JOB_LABEL,
    MUTE_RULE,
    NODES,
    SWEEP_FAILS,
    XID,
    Scenario,
    culprit_gpu,
)


def cluster(scenario: Scenario, alarm: dict[str, Any], rank_map: Sequence[dict[str, Any]]) -> Any:
    """The fake HyperPod cluster of the job's nodes (and the scenario's spare nodes); the
    culprits' nodes fail their deep health check when the scenario says so."""
    from sdc_remediation.infra.local.run import default_cluster  # heavy: moto

    spares = tuple(f"i-0ee{n:014x}" for n in range(1, scenario.spare_nodes + 1))
    hyperpod = default_cluster(
        (*NODES, *spares), node_recovery=scenario.node_recovery, slurm=scenario.slurm
    )
    if scenario.health_check_fails:
        culprits = alarm.get("culprits", [])
        suspects = {str(d["instance_id"]) for d in rank_map if d["rank"] in culprits}
        for instance_id in suspects:
            hyperpod.set_health_check_result(CLUSTER, instance_id, passes=False)
    if scenario.sweep:
        from sdc_remediation.lambdas.models.hyperpod import HealthCheck

        hyperpod.fail_check(CLUSTER, SWEEP_FAILS, HealthCheck.INSTANCE_CONNECTIVITY)
    return hyperpod


def busy_and_watched(run: Any, note: Callable[..., None]) -> None:
    """The sweep scenarios' cluster as it runs: the job on BUSY_NODES (a pod of the job on each
    node's Kubernetes node, or a Slurm job allocated to each), and HyperPod holding each node it
    checks out of scheduling while the check runs, as it does: the node health label
    `Unschedulable` on EKS, a maintenance reservation on Slurm."""
    from sdc_remediation.infra.local.run import kube_node_names
    from sdc_remediation.lambdas.models.kubernetes import NODE_HEALTH_LABEL

    names = kube_node_names(list(run.hyperpod.clusters[CLUSTER].nodes))
    for instance_id in BUSY_NODES:
        if run.slurm is not None:
            host = slurm_host(run.hyperpod, instance_id)
            run.slurm.run_job(host)
            note("slurm", f"a job runs on {host} (sbatch): {run.slurm.node(host).state}")
        else:
            run.kube_api.add_pod(
                f"pretrain-{instance_id}", names[instance_id], {JOB_LABEL: "pretrain"}
            )
            note("kubernetes", f"a pod of job pretrain runs on {names[instance_id]}")

    def held(cluster_name: str, node: Any, running: bool) -> None:
        if run.slurm is not None:
            host = slurm_host(run.hyperpod, node.instance_id)
            if host is None:
                return
            reservation = f"hyperpod-deep-health-check-{host}"
            if running:
                run.slurm.reserve(reservation, host)
            else:
                run.slurm.release(reservation, host)
            what = "in" if running else "out of"
            note("hyperpod", f"{host} {what} maintenance reservation {reservation}")
            return
        name = names.get(node.instance_id)
        if name in run.kube_api.nodes:
            value = "Unschedulable" if running else "Schedulable"
            run.kube_api.nodes[name]["metadata"]["labels"][NODE_HEALTH_LABEL] = value
            note("hyperpod", f"{name} labelled {NODE_HEALTH_LABEL}={value}")

    run.hyperpod.check_watchers.append(held)


@contextmanager
def sweep_watching(run: Any, note: Callable[..., None]) -> Iterator[None]:
    """`busy_and_watched` for the scenario's run; the watch ends with it."""
    busy_and_watched(run, note)
    try:
        yield
    finally:
        run.hyperpod.check_watchers.clear()


@contextmanager
def slurm_controller(
    hyperpod: Any, note: Callable[..., None], *, jobs: bool = False
) -> Iterator[Any]:
    """Debian's slurmctld with every node of the fake cluster defined by its host name, playing
    the cluster's controller (`jobs`: one a job holds a node allocated on). Yields the
    LocalSlurm."""
    from sdc_remediation.infra.local.slurm import DRILL_CONTROLLER, real_slurm
    from sdc_remediation.lambdas.models.slurm import slurm_node_name

    hosts = sorted(
        slurm_node_name(str(node.hostname)) for node in hyperpod.clusters[CLUSTER].nodes.values()
    )
    with real_slurm(hosts, jobs=jobs) as slurm:
        note(
            "slurm",
            f"slurmctld (Debian's) plays controller {DRILL_CONTROLLER}: nodes {', '.join(hosts)}",
        )
        yield slurm


def slurm_rank_map(rank_map: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rank map as the emitter makes it on the Slurm nodes of the drill's cluster: each
    rank's node named by `SLURMD_NODENAME` (its host, as slurmd sets it), its instance found in
    HyperPod's resource config on the node (written here as HyperPod writes it), through the
    emitter's own `local_rank_info`."""
    import json
    import tempfile
    from pathlib import Path

    from sdc_remediation.infra.local.run import slurm_host_names
    from trainer_emitter.rankmap import local_rank_info

    instance_ids = sorted({str(entry["instance_id"]) for entry in rank_map})
    hosts = slurm_host_names(instance_ids)
    config = {
        "ClusterConfig": {"ClusterName": CLUSTER},
        "InstanceGroups": [
            {
                "Name": "gpu-workers",
                "Instances": [
                    {
                        "InstanceName": f"gpu-workers-{n}",
                        "CustomerIpAddress": hosts[i].removeprefix("ip-").replace("-", "."),
                        "InstanceId": i,
                    }
                    for n, i in enumerate(instance_ids, start=1)
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resource_config.json"
        path.write_text(json.dumps(config))
        mapped = []
        for entry in rank_map:
            info = local_rank_info(
                int(entry["rank"]),
                environ={
                    "SLURMD_NODENAME": hosts[str(entry["instance_id"])],
                    "SDC_RESOURCE_CONFIG": str(path),
                },
            )
            mapped.append(
                {
                    **dict(entry),
                    "node": info.node_name,
                    "node_name": info.node_name,
                    "instance_id": info.instance_id,
                }
            )
    return mapped


def slurm_host(hyperpod: Any, instance_id: str) -> str | None:
    """The Slurm node name of an instance of the fake cluster (None: it has left it)."""
    from sdc_remediation.lambdas.models.slurm import slurm_node_name

    node = hyperpod.clusters[CLUSTER].nodes.get(instance_id)
    return slurm_node_name(node.hostname) if node and node.hostname else None


@contextmanager
def prometheus_workspace(
    alarm: dict[str, Any], rank_map: Sequence[dict[str, Any]], note: Callable[..., None]
) -> Iterator[str]:
    """A local Prometheus with dcgm-exporter's series of every GPU of the job over the last 90
    minutes, as the HyperPod observability add-on would have written them: each series names its
    node by the Kubernetes node name (the local EKS stand-in's) in `Hostname`, carries the
    collector's own labels, and counters are stored under their `_total` names. The culprit's GPU
    logged XID 79 twenty minutes ago, a row remap failure 30 s later and PCIe replays a minute
    later; decoys: another GPU of the same node (XID 31) and a GPU of another node (XID 48).
    Yields the base URL."""
    from sdc_remediation.infra.local import prometheus
    from sdc_remediation.infra.local.run import kube_node_names

    now = int(time.time()) // 15 * 15
    start = now - 90 * 60
    culprit = culprit_gpu(alarm, rank_map)
    hosts = kube_node_names(sorted({str(e["instance_id"]) for e in rank_map}))
    same_node = next(
        e
        for e in rank_map
        if e["instance_id"] == culprit["instance_id"] and e["rank"] != culprit["rank"]
    )
    other_node = next(e for e in rank_map if e["instance_id"] != culprit["instance_id"])
    decoys = {
        str(same_node["gpu_uuid"]): DECOY_XIDS["other GPU of the suspect node"],
        str(other_node["gpu_uuid"]): DECOY_XIDS["a GPU of another node"],
    }
    node_index = {instance_id: n for n, instance_id in enumerate(sorted(hosts), start=1)}
    series = []
    for entry in rank_map:
        uuid = str(entry["gpu_uuid"])
        changes: dict[str, list[tuple[int, float]]] = {}
        if uuid == culprit["gpu_uuid"]:
            changes = {
                "DCGM_FI_DEV_XID_ERRORS": [(now - 20 * 60, XID)],
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": [(now - 20 * 60 + 30, 1)],
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": [(now - 20 * 60 + 60, 3)],
            }
        elif uuid in decoys:
            changes = {"DCGM_FI_DEV_XID_ERRORS": [(now - 40 * 60, decoys[uuid])]}
        series += prometheus.gpu_series(
            host=hosts[str(entry["instance_id"])],
            gpu=str(entry["rank"] % GPUS_PER_NODE),
            uuid=uuid,
            start=start,
            end=now,
            changes=changes,
            collector=prometheus.collector_labels(
                f"dcgm-exporter-n{node_index[str(entry['instance_id'])]}",
                f"10.1.100.{node_index[str(entry['instance_id'])]}",
            ),
        )
    what = (
        f"dcgm-exporter series of {len(rank_map)} GPUs as the observability add-on stores them "
        f"(counters under _total): XID {XID}, a row remap failure and PCIe replays on "
        f"{culprit['gpu_uuid']} ({culprit['instance_id']})"
    )
    if prometheus.binaries() is None:
        with prometheus.StandIn(series).serve() as url:
            note("prometheus", f"a stand-in (no prometheus installed) at {url} holds {what}")
            yield url
        return
    with prometheus.real_prometheus(series) as server:
        note(
            "prometheus",
            f"Prometheus {server.version} at {server.base_url} holds {what} "
            "(backfilled with promtool)",
        )
        yield server.base_url


def mute_alarms(run: Any, note: Callable[..., None]) -> None:
    """An alarm mute rule over the detection alarms, its window around now (maintenance)."""
    from datetime import UTC, datetime, timedelta

    from sdc_remediation.infra.local.evaluator import MuteRule

    now = datetime.now(UTC)
    rule = MuteRule(MUTE_RULE, now - timedelta(minutes=5), now + timedelta(hours=1))
    run.evaluator.mute(rule)
    note(
        "cloudwatch",
        f"alarm mute rule {MUTE_RULE} mutes the SDC alarms' actions for the next hour; the job "
        "publishes metrics only (no report event)",
    )


@contextmanager
def alerting_workspace(
    alarm: dict[str, Any],
    rank_map: Sequence[dict[str, Any]],
    context: dict[str, Any],
    note: Callable[..., None],
) -> Iterator[Any]:
    """The cluster's Prometheus loaded with the stack's hardware rules (as the deployment's
    `sdc:hardwareAlerts` set them, evaluated every second) over every GPU's series of the last
    30 minutes, stored as the add-on stores them: the culprit's GPU is held down by HW thermal
    slowdown (0x40, with the normal SW power cap 0x4), every other GPU only by SW power cap.
    Needs Debian's prometheus: rules are evaluated by nothing else here. Yields the server."""
    import yaml

    from sdc_remediation.infra.local import prometheus
    from sdc_remediation.infra.stack.alert_rules import rule_groups
    from sdc_remediation.infra.stack.settings import DeploymentSettings

    if prometheus.binaries() is None:
        raise prometheus.PrometheusNotInstalled(prometheus.INSTALL_HINT)
    key = "sdc:hardwareAlerts"
    thresholds = DeploymentSettings.from_context({key: context.get(key, {})}).hardware_alerts
    now = int(time.time()) // 15 * 15
    start = now - 30 * 60
    culprit = culprit_gpu(alarm, rank_map)
    series = throttle_series(
        rank_map,
        start,
        now,
        lambda entry: THROTTLED if entry["gpu_uuid"] == culprit["gpu_uuid"] else POWER_CAPPED,
        lambda n: (f"dcgm-exporter-n{n // 8}", f"10.1.100.{n}"),
    )
    content = rule_groups(CLUSTER, thresholds=thresholds)
    for group in content["groups"]:
        group["interval"] = "1s"
    rules = yaml.safe_dump(content, sort_keys=False, width=1000)
    with prometheus.real_prometheus(series, rules=rules) as server:
        note(
            "prometheus",
            f"Prometheus {server.version} at {server.base_url} evaluates the stack's hardware "
            f"rules every second over {len(rank_map)} GPUs' series; {culprit['gpu_uuid']} "
            f"({culprit['instance_id']}) has been held down by HW thermal slowdown for 30 minutes",
        )
        yield server


THROTTLED = 0x44
"""HW thermal slowdown with the SW power cap."""
HW_SLOWDOWN = 0x0C
"""HW slowdown with the SW power cap: the straggler's GPU in `straggler-corroborated`."""


@contextmanager
def throttle_workspace(
    alarm: dict[str, Any],
    rank_map: Sequence[dict[str, Any]],
    throttled: bool,
    note: Callable[..., None],
) -> Iterator[str]:
    """The cluster's Prometheus with every GPU's dcgm-exporter series of the last 30 minutes as
    the add-on stores them, clock-throttle reasons included: every GPU only by the SW power cap
    (normal under load) or, when `throttled`, the straggler's GPU held down by HW slowdown all
    along: the hardware corroboration the decision table asks of a straggler. Served by a real
    Prometheus when one is installed, else by the stand-in. Yields the base URL."""
    from sdc_remediation.infra.local import prometheus

    now = int(time.time()) // 15 * 15
    start = now - 30 * 60
    (flagged,) = alarm["straggler"]["flagged"]
    slow = next(e for e in rank_map if e["rank"] == flagged)
    series = throttle_series(
        rank_map,
        start,
        now,
        lambda entry: HW_SLOWDOWN if throttled and entry["rank"] == flagged else POWER_CAPPED,
        lambda n: (f"dcgm-exporter-n{n}", f"10.1.100.{n + 1}"),
    )
    what = f"{len(rank_map)} GPUs' dcgm-exporter series; " + (
        f"the straggler's GPU {slow['gpu_uuid']} ({slow['instance_id']}) held down by HW "
        "slowdown for 30 minutes"
        if throttled
        else "no GPU throttled by the hardware (SW power cap only)"
    )
    if prometheus.binaries() is None:
        with prometheus.StandIn(series).serve() as url:
            note("prometheus", f"a stand-in (no prometheus installed) at {url} holds {what}")
            yield url
        return
    with prometheus.real_prometheus(series) as server:
        note("prometheus", f"Prometheus {server.version} at {server.base_url} holds {what}")
        yield server.base_url


POWER_CAPPED = 0x04
"""The SW power cap alone: normal under load."""
ALERT = "GpuHardwareThrottling"


def deliver_hardware_alert(
    run: Any, server: Any, note: Callable[..., None], *, timeout: float = 180.0
) -> list[str]:
    """Wait until the throttling rule fires on the server, then deliver its alert to the claims
    intake as SNS would: the JSON message the alert manager definition's template writes (every
    value cut of quotes, backslashes and control characters), the cluster in the message
    attribute. Returns the incidents the intake opened or attached to."""
    import hashlib
    import json
    import re
    import urllib.request
    import uuid

    from sdc_remediation.lambdas.models.hardware_alert import (
        CLUSTER_ATTRIBUTE,
        MESSAGE_VERSION,
        AlertStatus,
    )

    def alerts() -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{server.base_url}/api/v1/alerts", timeout=5) as answer:
            found: list[dict[str, Any]] = json.load(answer)["data"]["alerts"]
        return [a for a in found if a["labels"].get("alertname") == ALERT]

    deadline = time.monotonic() + timeout
    pending_seen = False
    while True:
        found = alerts()
        firing = [a for a in found if a["state"] == AlertStatus.FIRING]
        if firing:
            break
        if found and not pending_seen:
            pending_seen = True
            note("prometheus", f"{ALERT} pending on {found[0]['labels'].get('node')}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ALERT} did not fire within {timeout:g} s: {found}")
        time.sleep(1)

    def cut(value: str) -> str:
        return re.sub(r'["\\\x00-\x1f\x7f]', "", value)

    entries = []
    for alert in firing:
        labels = {cut(k): cut(v) for k, v in sorted(alert["labels"].items())}
        fingerprint = hashlib.sha256(json.dumps(labels).encode()).hexdigest()[:16]
        entries.append(
            {
                "status": AlertStatus.FIRING.value,
                "labels": labels,
                "annotations": {cut(k): cut(v) for k, v in alert["annotations"].items()},
                "startsAt": alert["activeAt"][:19] + "Z",
                "fingerprint": fingerprint,
            }
        )
        note(
            "prometheus",
            f"{ALERT} firing on {labels.get('node')} GPU {labels.get('gpu')} "
            f"(rule {labels.get('rule')}, severity {labels.get('severity')})",
        )
    message_id = str(uuid.uuid4())
    event = {
        "Records": [
            {
                "EventSource": "aws:sns",
                "Sns": {
                    "MessageId": message_id,
                    "TopicArn": run.stack.topics.get("HardwareAlertTopic", ""),
                    "Subject": f"SDC hardware alert: firing ({len(entries)})",
                    "Message": json.dumps(
                        {
                            "version": MESSAGE_VERSION,
                            "status": AlertStatus.FIRING.value,
                            "alerts": entries,
                        }
                    ),
                    "MessageAttributes": {CLUSTER_ATTRIBUTE: {"Type": "String", "Value": CLUSTER}},
                },
            }
        ]
    }
    function = run.stack.function_by_handler("store_report")
    response = run.session.client("lambda").invoke(
        FunctionName=function.arn, Payload=json.dumps(event).encode()
    )
    answer = json.loads(response["Payload"].read() or b"null")
    if "FunctionError" in response:
        raise RuntimeError(f"store_report refused the hardware alert: {answer}")
    note("sns", f"the alert manager's notification {message_id[:8]} delivered to store_report")
    return list(dict.fromkeys(r["incident_id"] for r in answer if r.get("incident_id")))


def throttle_series(
    rank_map: Sequence[dict[str, Any]],
    start: int,
    now: int,
    bits: Callable[[dict[str, Any]], int],
    collector: Callable[[int], tuple[str, str]],
) -> list[Any]:
    """Every GPU's dcgm-exporter series from `start` to `now`, as the observability add-on
    stores them (each named by its Kubernetes node), its clock throttle reasons `bits(entry)`
    throughout; `collector(n)`: the n-th series' exporter pod and address."""
    from sdc_remediation.infra.local import prometheus
    from sdc_remediation.infra.local.run import kube_node_names

    hosts = kube_node_names(sorted({str(e["instance_id"]) for e in rank_map}))
    series: list[Any] = []
    for n, entry in enumerate(rank_map):
        series += prometheus.gpu_series(
            host=hosts[str(entry["instance_id"])],
            gpu=str(entry["rank"] % GPUS_PER_NODE),
            uuid=str(entry["gpu_uuid"]),
            start=start,
            end=now,
            changes={"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": [(start, bits(entry))]},
            collector=prometheus.collector_labels(*collector(n)),
        )
    return series
