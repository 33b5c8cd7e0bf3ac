"""Hardware telemetry against a real Prometheus (Debian's package, series backfilled with
promtool): the adapter's signed query_range and the logic's selection find the right counters
of the right GPU at the right times, and nothing of other GPUs or nodes."""

from __future__ import annotations

import re

import pytest
from botocore.credentials import Credentials

from sdc_remediation.infra.local.memory import InMemoryIncidentStore
from sdc_remediation.lambdas.adapters.prometheus import AmpPrometheus
from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.logic.evidence import telemetry, telemetry_query
from sdc_remediation.lambdas.models.payloads import ApprovalRequest
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from tests.integration.prometheus_server import (
    CLUSTER,
    INSTANCE_A,
    INSTANCE_B,
    INSTANCE_C,
    INSTANCE_E,
    INSTANCE_F,
    INSTANCE_G,
    NODE_A,
    NODE_C,
    NODE_E,
    NODE_F,
    NODE_G,
    UUID_A0,
    UUID_A1,
    UUID_B2,
    UUID_C0,
    UUID_F3,
    UUID_G0,
    WORKSPACE_ID,
)
from tests.unit.world import TOKEN, World, settings


def adapter(prometheus) -> AmpPrometheus:
    return AmpPrometheus(
        lambda: Credentials("AKIDLOCALTEST", "local-secret"),
        endpoint_overrides={WORKSPACE_ID: prometheus.server.base_url},
    )


def check(prometheus, incident, **workspace):
    world = World(settings=settings(telemetry={CLUSTER: prometheus.workspace(**workspace)}))
    world.prometheus = adapter(prometheus)
    return telemetry.gather(world.deps, incident, prometheus.data.later())


def test_the_server_is_debians_prometheus(prometheus):
    assert prometheus.server.running
    assert re.match(r"2\.\d+\.\d+", prometheus.server.version)


def test_the_suspect_gpus_xid_and_row_remap_failure_are_found_at_their_times(prometheus):
    data = prometheus.data
    incident = data.incident(INSTANCE_A, node_name=NODE_A, gpu_uuid=UUID_A1)

    found = check(prometheus, incident)

    assert found.state == TelemetryState.SIGNAL
    assert [(f.kind, f.at, f.gpu_uuid, f.gpu, f.value) for f in found.signals] == [
        ("xid", data.iso(90, 15), UUID_A1, "1", 79),
        ("row_remap_failed", data.iso(90, 45), UUID_A1, "1", 1),
    ]
    assert found.signals[0].text == (
        f"XID 79 at {data.clock(90, 15)} on {UUID_A1} (GPU 1): "
        "GPU has fallen off the bus (usually hardware)"
    )
    assert f"since {data.clock(90, 45)}" in found.signals[1].text
    assert found.series == 6  # the suspect GPU's six default series, nobody else's


def test_the_other_gpus_xid_and_the_neighbour_nodes_xid_are_not_the_suspects(prometheus):
    incident = prometheus.data.incident(INSTANCE_A, node_name=NODE_A, gpu_uuid=UUID_A1)

    found = check(prometheus, incident)

    assert {f.value for f in found.findings if f.kind == "xid"} == {79}  # not 31, not 48


def test_without_the_gpu_uuid_every_gpu_of_the_node_is_read_and_only_that_node(prometheus):
    incident = prometheus.data.incident(INSTANCE_A, node_name=NODE_A)

    found = check(prometheus, incident)

    xids = [(f.gpu_uuid, f.value) for f in found.signals if f.kind == "xid"]
    assert sorted(xids) == sorted([(UUID_A0, 31), (UUID_A1, 79)])  # node D's 48 stays out
    assert found.series == 12


def test_the_node_is_found_by_the_name_isolation_found_even_when_the_report_has_none(prometheus):
    incident = prometheus.data.incident(INSTANCE_A, gpu_uuid=UUID_A1, isolated_as=NODE_A)

    found = check(prometheus, incident)

    assert [f.kind for f in found.signals] == ["xid", "row_remap_failed"]


def test_a_newer_exporters_names_and_lowercase_hostname_holding_the_instance_id(prometheus):
    data = prometheus.data
    incident = data.incident(INSTANCE_B, gpu_uuid=UUID_B2)  # no node name known: the id only

    found = check(prometheus, incident)

    assert [(f.kind, f.metric, f.at, f.value) for f in found.signals] == [
        ("xid", "DCGM_FI_DEV_XID_ERROR", data.iso(95), 94),
        ("row_remap_failed", "DCGM_FI_DEV_ROW_REMAP_FAILED", data.iso(95, 30), 1),
    ]


def test_a_clean_node_has_no_hardware_signal_which_does_not_clear_it(prometheus):
    incident = prometheus.data.incident(INSTANCE_C, node_name=NODE_C, gpu_uuid=UUID_C0)

    found = check(prometheus, incident)

    assert found.state == TelemetryState.CLEAN
    assert found.findings == ()
    assert found.summary.startswith(
        f"no hardware signal in the last 63 minutes before the alarm ({prometheus.data.iso(40)[:10]}"
    )
    assert "this does not clear the node" in found.summary
    assert "ECC SBE total" not in found.not_exported  # node C exports the advanced families
    assert "NVLink replays" in found.not_exported
    assert found.context == (f"hottest GPU temperature 61 °C, on {UUID_C0} (GPU 0)",)


def test_counters_rising_under_the_addons_total_names_are_signals(prometheus):
    data = prometheus.data
    incident = data.incident(INSTANCE_F, node_name=NODE_F, gpu_uuid=UUID_F3)

    found = check(prometheus, incident)

    assert found.state == TelemetryState.SIGNAL
    assert [(f.kind, f.metric, f.at, f.value) for f in found.signals] == [
        (
            "correctable_remapped_rows",
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS_total",
            data.iso(98),
            2,
        ),
        ("pcie_replay", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total", data.iso(99), 7),
    ]
    assert found.series == 6  # the default set, as the add-on stores it


def test_the_addons_series_are_read_without_the_gpu_uuid_too(prometheus):
    incident = prometheus.data.incident(INSTANCE_F, node_name=NODE_F)

    found = check(prometheus, incident)

    assert {f.gpu_uuid for f in found.signals} == {UUID_F3}
    assert "PCIe replays" in found.read


def test_a_node_exporting_no_counter_family_is_clean_only_for_the_families_it_exports(prometheus):
    incident = prometheus.data.incident(INSTANCE_G, node_name=NODE_G, gpu_uuid=UUID_G0)

    found = check(prometheus, incident)

    assert found.state == TelemetryState.CLEAN
    assert found.series == 3  # found by its lowercase `uuid` label
    assert found.read == ("XID", "row remap failure")
    assert {"correctable remapped rows", "PCIe replays"} <= set(found.not_exported)
    clean, _, missing = found.summary.partition("; not exported for this node: ")
    assert "in what was read (XID, row remap failure)" in clean
    assert "PCIe replays" in missing and "PCIe replays" not in clean


def test_a_node_the_workspace_does_not_know_is_no_series_not_clean(prometheus):
    incident = prometheus.data.incident("i-0fff1234def567890", node_name="ip-10-9-9-9")

    found = check(prometheus, incident)

    assert found.state == TelemetryState.NO_SERIES
    assert "no dcgm-exporter series for every GPU of i-0fff1234def567890" in found.summary


def test_a_relabeled_node_label_is_read_when_configured(prometheus):
    incident = prometheus.data.incident(INSTANCE_E, node_name=NODE_E)

    default = check(prometheus, incident)
    relabeled = check(prometheus, incident, node_label="kubernetes_node")

    assert default.state == TelemetryState.NO_SERIES  # its Hostname is the exporter's pod name
    assert [(f.kind, f.value) for f in relabeled.signals] == [("xid", 45)]


def test_the_approval_card_shows_what_the_real_server_holds(prometheus):
    data = prometheus.data
    world = World(
        settings=settings(telemetry={CLUSTER: prometheus.workspace()}),
        store=InMemoryIncidentStore(),
    )
    world.prometheus = adapter(prometheus)
    world.hyperpod.add_node(CLUSTER, "gpu-workers", INSTANCE_A)
    incident = data.incident(INSTANCE_A, node_name=NODE_A, gpu_uuid=UUID_A1)
    world.store.create(incident)
    world.clock.current = data.later()

    approval.request_approval(ApprovalRequest(incident.incident_id, TOKEN), world.deps)

    card = world.notifier.published[-1].message
    assert f"  XID 79 at {data.clock(90, 15)} on {UUID_A1} (GPU 1): GPU has fallen off" in card
    assert f"row remap FAILED (no spare row left to repair its memory) on {UUID_A1}" in card
    assert "XID 31" not in card and "XID 48" not in card
    assert "dashboard: https://g-1a2b3c4d5e.grafana-workspace" in card
    stored = world.incident(incident.incident_id).telemetry
    assert stored is not None and stored.state == TelemetryState.SIGNAL


@pytest.mark.parametrize("step", [15, 60])
def test_the_raw_answer_keeps_prometheus_step_grid(prometheus, step):
    """What the logic relies on: points on start + k*step, values as strings."""
    data = prometheus.data
    incident = data.incident(INSTANCE_A, node_name=NODE_A, gpu_uuid=UUID_A1)
    target = telemetry_query.target_of(incident)
    window = telemetry_query.window_of(incident, data.later())

    answer = adapter(prometheus).query_range(
        prometheus.workspace(),
        telemetry_query.query_for(target, prometheus.workspace()),
        window.start,
        window.end,
        step,
    )

    assert answer["resultType"] == "matrix"
    for series in answer["result"]:
        assert all((at - window.start.timestamp()) % step == 0 for at, _ in series["values"])
        assert all(isinstance(value, str) for _, value in series["values"])
