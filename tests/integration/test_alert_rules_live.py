"""The hardware alerting rules loaded and evaluated by a real Prometheus (Debian's package, the
one the telemetry tests use) over series as the HyperPod observability add-on stores them, up to
now: every rule evaluates without error, an XID from the critical list fires at once with the
labels the intake reads, sustained hardware throttling is pending (its `for` runs in real time),
and a GPU with only an application XID and the normal SW power cap raises nothing."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
import yaml

from sdc_remediation.infra.local.prometheus import (
    RealPrometheus,
    collector_labels,
    gpu_series,
    real_prometheus,
)
from sdc_remediation.infra.stack.alert_rules import rule_groups

CLUSTER = "ml-cluster-1"
SICK = "hyperpod-i-0fff1234def567890"
WELL = "hyperpod-i-0aab1234def567890"
SICK_UUID = "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003"
WELL_UUID = "GPU-a0b0a0b0-5a1e-4c1d-9e7b-000000000000"
EVALUATED_WITHIN = 30.0


def series(now: int) -> list[Any]:
    start = now - 30 * 60
    sick = gpu_series(
        host=SICK,
        gpu="3",
        uuid=SICK_UUID,
        start=start,
        end=now,
        counters={"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0},
        changes={
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": [(start, 0x04), (now - 20 * 60, 0x44)],
            "DCGM_FI_DEV_XID_ERRORS": [(now - 10 * 60, 79)],
        },
        collector=collector_labels("dcgm-exporter-f7m2p", "10.1.17.71"),
    )
    well = gpu_series(
        host=WELL,
        gpu="0",
        uuid=WELL_UUID,
        start=start,
        end=now,
        counters={"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0},
        changes={
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": [(start, 0x04)],
            "DCGM_FI_DEV_XID_ERRORS": [(now - 10 * 60, 31)],
        },
        collector=collector_labels("dcgm-exporter-g2k9d", "10.1.17.81"),
    )
    return [*sick, *well]


def every_second() -> str:
    """The rule file as deployed, its group evaluated every second instead of every minute."""
    content = rule_groups(CLUSTER)
    for group in content["groups"]:
        group["interval"] = "1s"
    return yaml.safe_dump(content, sort_keys=False, width=1000)


def api(server: RealPrometheus, path: str) -> Any:
    with urllib.request.urlopen(f"{server.base_url}/api/v1/{path}", timeout=5) as answer:
        return json.load(answer)["data"]


@pytest.fixture(scope="module")
def evaluated():
    now = int(time.time())
    with real_prometheus(series(now), rules=every_second()) as server:
        deadline = time.monotonic() + EVALUATED_WITHIN
        while time.monotonic() < deadline:
            rules = [r for g in api(server, "rules")["groups"] for r in g["rules"]]
            if rules and all(not r["lastEvaluation"].startswith("0001") for r in rules):
                break
            time.sleep(0.5)
        yield rules, api(server, "alerts")["alerts"]


def test_the_server_loads_every_rule_and_evaluates_it_without_error(evaluated):
    rules, _ = evaluated

    assert len(rules) == len(rule_groups(CLUSTER)["groups"][0]["rules"])
    assert {(r["health"], r.get("lastError", "")) for r in rules} == {("ok", "")}


def test_a_critical_xid_fires_at_once_with_the_labels_the_intake_reads(evaluated):
    _, alerts = evaluated

    (xid,) = [a for a in alerts if a["labels"]["alertname"] == "GpuCriticalXid"]
    assert xid["state"] == "firing"
    labels = xid["labels"]
    assert (labels["cluster"], labels["node"], labels["gpu"], labels["gpu_uuid"]) == (
        CLUSTER,
        SICK,
        "3",
        SICK_UUID,
    )
    assert (labels["rule"], labels["severity"], labels["xid"]) == (
        "critical_xid",
        "warning",
        "79",
    )
    assert xid["annotations"]["meaning"] == "GPU has fallen off the bus"


def test_sustained_hardware_throttling_is_pending_on_the_sick_gpu_only(evaluated):
    _, alerts = evaluated

    throttled = [a for a in alerts if a["labels"]["alertname"] == "GpuHardwareThrottling"]

    assert [(a["state"], a["labels"]["node"]) for a in throttled] == [("pending", SICK)]


def test_the_well_gpu_raises_nothing(evaluated):
    _, alerts = evaluated

    assert [a["labels"]["alertname"] for a in alerts if a["labels"].get("node") == WELL] == []
