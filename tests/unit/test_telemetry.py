"""Hardware telemetry, the pure part: which series are asked for, over which window, what counts
as a signal, and the plain words. Answers are canned Prometheus JSON (tests/events/
prometheus_query_range.json was recorded from Prometheus 2.42 answering the pipeline's own query
for the sdc_report fixture's incident)."""

from __future__ import annotations

import copy
import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sdc_remediation.infra.local.memory import FakePrometheus
from sdc_remediation.lambdas.logic.evidence import (
    dcgm,
    telemetry,
    telemetry_findings,
    telemetry_query,
    xids,
)
from sdc_remediation.lambdas.logic.evidence.summaries import report_evidence
from sdc_remediation.lambdas.models.errors import (
    TelemetryBadAnswer,
    TelemetryRefused,
    TelemetrySlow,
)
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.isolation import IsolatedNode, IsolationRecord, IsolationState
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace
from sdc_remediation.lambdas.models.telemetry import TelemetryRecord, TelemetryState
from sdc_remediation.lambdas.wording import card_lines
from tests.conftest import load_fixture
from tests.unit.world import CLUSTER, INSTANCE, World, settings

UUID = "GPU-0000000d-5a1e-4c1d-9e7b-000000019223"
"""The fixture report's suspect GPU (rank 13: GPU 5 of its node)."""
NODE_NAME = "hyperpod-i-0abc1234def567890"
WORKSPACE = TelemetryWorkspace(
    workspace_id="ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77",
    query_url="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77",
    region="us-west-2",
    dashboard="https://g-1a2b3c4d5e.grafana-workspace.us-west-2.amazonaws.com/d/gpu-health",
)
ALARM_AT = datetime(2026, 11, 30, 8, 15, 4, 512000, tzinfo=UTC)
REPORT_AT = datetime(2026, 11, 30, 8, 14, 31, 207000, tzinfo=UTC)
LATER = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def incident(*, report: bool = True, alarm: bool = True, node: str | None = None) -> Incident:
    """The fixture report's incident: the report and the alarm as its evidence; `node`: the
    Kubernetes node name node isolation found by providerID."""
    found = Incident(
        "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081431",
        CLUSTER,
        INSTANCE,
        IncidentState.HEALTH_CHECK,
        "2026-11-30T08:14:32+00:00",
        "2026-11-30T08:14:32+00:00",
    )
    if report:
        parsed = parse_report_event(load_fixture("events", "sdc_report")).report
        found.evidence.append(report_evidence(parsed, INSTANCE).to_record())
    if alarm:
        state = load_fixture("events", "contributor_alarm")["detail"]["state"]
        found.evidence.append({"kind": "alarm", "key": "alarm:1", "state_at": state["timestamp"]})
    if node:
        found.isolation = IsolationRecord(
            IsolationState.ISOLATED,
            nodes={INSTANCE: IsolatedNode(IsolationState.ISOLATED, node_name=node)},
        )
    return found


def answer() -> dict[str, Any]:
    return load_fixture("events", "prometheus_query_range")


def series_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["result"] if s["metric"]["__name__"] == name)


def record(data: dict[str, Any], target: telemetry_query.Target | None = None) -> TelemetryRecord:
    target = target or telemetry_query.target_of(incident())
    window = telemetry_query.window_of(incident(), LATER)
    return telemetry_findings.summarize(
        dcgm.parse_matrix(data), target, window, WORKSPACE, queried_at=LATER.isoformat()
    )


def at(text: str) -> float:
    return datetime.fromisoformat(f"2026-11-30T{text}+00:00").timestamp()


def set_from(series: dict[str, Any], when: str, value: float) -> None:
    """From `when` on, the series holds `value` (as a scrape would have seen it)."""
    for point in series["values"]:
        if point[0] >= at(when):
            point[1] = str(value)


# -- which series, which node, which GPUs -------------------------------------------------------


def name_pattern(query: str) -> re.Pattern[str]:
    """The query's `__name__` regex, as PromQL applies it (anchored at both ends)."""
    return re.compile(re.search(r'__name__=~"([^"]*)"', query).group(1))


def test_the_query_asks_for_every_family_under_both_exporter_names_with_and_without_total():
    query = telemetry_query.query_for(telemetry_query.target_of(incident()), WORKSPACE)

    pattern = name_pattern(query)
    for name in [
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_XID_ERROR",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_FAILED",
        "DCGM_FI_DEV_PAGE_RETIRED_PENDING",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL_total",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total",
        "DCGM_FI_DEV_PCIE_REPLAY_TOTAL_total",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS_total",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS_total",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_DEV_GPU_TEMP",
    ]:
        assert pattern.fullmatch(name), name
    assert all(pattern.fullmatch(n) for n in dcgm.FAMILY_OF)


def test_the_query_asks_for_no_other_series_than_the_families_stored_names():
    query = telemetry_query.query_for(telemetry_query.target_of(incident()), WORKSPACE)

    pattern = name_pattern(query)
    assert not pattern.fullmatch("DCGM_FI_DEV_XID_ERRORS_count")
    assert not pattern.fullmatch("DCGM_FI_DEV_GPU_UTIL")
    assert not pattern.fullmatch("DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total_total")


def test_a_counter_family_is_stored_with_total_and_a_gauge_family_as_exported():
    assert dcgm.stored_name("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS") == (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS_total"
    )
    assert dcgm.stored_name("DCGM_FI_DEV_XID_ERRORS") == "DCGM_FI_DEV_XID_ERRORS"
    assert dcgm.stored_name("DCGM_FI_DEV_ROW_REMAP_FAILURE") == "DCGM_FI_DEV_ROW_REMAP_FAILURE"


def test_the_query_selects_the_suspect_gpu_by_either_uuid_label_on_either_node_label():
    query = telemetry_query.query_for(telemetry_query.target_of(incident()), WORKSPACE)

    selectors = query.split(" or ")
    assert len(selectors) == 4
    assert sorted(
        (node, gpu)
        for s in selectors
        for node in ("Hostname", "hostname")
        for gpu in ("UUID", "uuid")
        if f"{node}=~" in s and f'{gpu}=~"{UUID}"' in s
    ) == [("Hostname", "UUID"), ("Hostname", "uuid"), ("hostname", "UUID"), ("hostname", "uuid")]
    assert "hyperpod-i-0abc1234def567890|" in query


def test_without_a_gpu_uuid_in_the_reports_every_gpu_of_the_node_is_asked_for():
    target = telemetry_query.target_of(incident(report=False))

    query = telemetry_query.query_for(target, WORKSPACE)

    assert target.gpu_uuids == ()
    assert "UUID" not in query


def test_a_configured_node_label_replaces_dcgm_exporters_own():
    workspace = dataclasses.replace(WORKSPACE, node_label="kubernetes_node")

    query = telemetry_query.query_for(telemetry_query.target_of(incident()), workspace)

    selectors = query.split(" or ")
    assert len(selectors) == 2  # one per GPU label
    assert all("kubernetes_node=~" in s for s in selectors) and "ostname" not in query


def test_the_node_found_by_provider_id_is_its_only_name_whatever_the_reports_claim():
    target = telemetry_query.target_of(incident(node="ip-10-1-17-42.us-west-2.compute.internal"))

    assert target.node_names == ("ip-10-1-17-42.us-west-2.compute.internal",)
    assert target.gpu_uuids == (UUID,)


def test_without_node_isolation_the_reports_node_name_serves_as_a_hint():
    target = telemetry_query.target_of(incident())

    assert target.node_names == (NODE_NAME,)


@pytest.mark.parametrize(
    ("value", "matches"),
    [
        ("ip-10-1-17-42.us-west-2.compute.internal", True),
        ("hyperpod-i-0abc1234def567890", True),  # the instance id as a whole word
        ("i-0abc1234def567890", True),
        ("ip-10-1-17-42xus-west-2.compute.internal", False),  # the dots are literal
        ("ip-10-1-17-4.us-west-2.compute.internal", False),
        ("hyperpod-i-0abc1234def5678901", False),  # a longer id is another instance
        ("hyperpod-xi-0abc1234def567890", False),
        ("dcgm-exporter-7x2kq", False),  # a pod name: not this node
    ],
)
def test_a_node_label_value_matches_only_the_node(value, matches):
    target = telemetry_query.target_of(incident(node="ip-10-1-17-42.us-west-2.compute.internal"))

    assert bool(re.fullmatch(telemetry_query.node_pattern(target), value)) is matches


# -- the window -----------------------------------------------------------------------------------


def test_the_window_runs_from_an_hour_before_the_report_to_two_minutes_after_the_alarm():
    window = telemetry_query.window_of(incident(), LATER)

    assert window.step_seconds == 15
    assert window.start <= REPORT_AT - timedelta(hours=1) < window.start + timedelta(seconds=15)
    assert window.end - timedelta(seconds=15) < ALARM_AT + timedelta(minutes=2) <= window.end
    assert window.start.timestamp() % 15 == 0 and window.end.timestamp() % 15 == 0


def test_the_window_never_reaches_past_now():
    now = ALARM_AT + timedelta(seconds=30)

    window = telemetry_query.window_of(incident(), now)

    assert window.end - now < timedelta(seconds=15)


def test_a_long_stretch_of_evidence_is_cut_to_the_last_six_hours_in_coarser_steps():
    long_ago = incident()
    long_ago.evidence.append(
        {"kind": "report", "key": "report:old", "emitted_at": "2026-11-29T20:00:00Z"}
    )

    window = telemetry_query.window_of(long_ago, LATER)

    assert window.end - window.start <= timedelta(hours=6, seconds=2 * window.step_seconds)
    assert (window.end - window.start) / timedelta(seconds=window.step_seconds) <= 482
    assert window.step_seconds > 15


def test_without_evidence_times_the_window_ends_at_the_incidents_creation():
    window = telemetry_query.window_of(incident(report=False, alarm=False), LATER)

    created = datetime(2026, 11, 30, 8, 14, 32, tzinfo=UTC)
    assert window.end - timedelta(seconds=15) < created + timedelta(minutes=2) <= window.end


# -- reading the answer ---------------------------------------------------------------------------


def test_the_recorded_answer_parses_into_its_series():
    series = dcgm.parse_matrix(answer())

    assert {s.name for s in series} == {
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_XID_ERRORS",
    }
    assert all(s.gpu_uuid == UUID and len(s.points) > 200 for s in series)


def test_dcgm_blank_values_and_nan_are_not_readings():
    data = answer()
    temperature = series_of(data, "DCGM_FI_DEV_GPU_TEMP")
    temperature["values"][0][1] = "9223372036854775794"  # DCGM_INT64_BLANK + 2: not supported
    temperature["values"][1][1] = "NaN"

    (parsed,) = [s for s in dcgm.parse_matrix(data) if s.name == "DCGM_FI_DEV_GPU_TEMP"]

    assert len(parsed.points) == len(temperature["values"]) - 2
    assert max(v for _, v in parsed.points) == 61


@pytest.mark.parametrize(
    "data",
    [
        {"resultType": "vector", "result": []},
        {"resultType": "matrix"},
        {"resultType": "matrix", "result": [{"metric": {}}]},
        {"resultType": "matrix", "result": [{"metric": {}, "values": [["x", "1"]]}]},
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[1]]}]},
    ],
)
def test_an_answer_that_is_not_a_matrix_of_points_is_a_bad_answer(data):
    with pytest.raises(TelemetryBadAnswer):
        dcgm.parse_matrix(data)


# -- what counts as a signal ----------------------------------------------------------------------


def test_the_xid_and_the_row_remap_failure_are_named_with_their_time_and_gpu():
    found = record(answer())

    assert found.state == TelemetryState.SIGNAL
    assert [(f.kind, f.at, f.gpu_uuid, f.value) for f in found.signals] == [
        ("xid", "2026-11-30T08:03:15+00:00", UUID, 79),
        ("row_remap_failed", "2026-11-30T08:03:45+00:00", UUID, 1),
    ]
    assert found.signals[0].text == (
        f"XID 79 at 08:03:15 UTC on {UUID} (GPU 5): GPU has fallen off the bus (usually hardware)"
    )
    assert "row remap FAILED" in found.signals[1].text
    assert "since 08:03:45 UTC" in found.signals[1].text
    assert found.summary.startswith("hardware signal: XID 79 at 08:03:15 UTC")


def test_a_clean_panel_says_so_and_that_it_does_not_clear_the_node():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 0)
    set_from(series_of(data, "DCGM_FI_DEV_ROW_REMAP_FAILURE"), "00:00:00", 0)

    found = record(data)

    assert found.state == TelemetryState.CLEAN
    assert found.findings == ()
    assert found.summary.startswith("no hardware signal in the last 63 minutes before the alarm")
    assert "this does not clear the node" in found.summary
    assert found.context == (f"hottest GPU temperature 61 °C, on {UUID} (GPU 5)",)


def test_a_clean_verdict_names_the_families_read_and_those_not_exported():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 0)
    set_from(series_of(data, "DCGM_FI_DEV_ROW_REMAP_FAILURE"), "00:00:00", 0)

    found = record(data)

    read, _, missing = found.summary.partition("; not exported for this node: ")
    assert found.read == (
        "XID",
        "row remap failure",
        "uncorrectable remapped rows",
        "correctable remapped rows",
        "PCIe replays",
    )
    assert "in what was read (XID, row remap failure, uncorrectable remapped rows, " in read
    assert "ECC SBE total" not in read and "GPU temperature" not in read
    assert missing.split(", ") == list(found.not_exported)
    assert "ECC SBE total" in missing


def test_only_a_temperature_series_is_not_a_clean_node():
    data = answer()
    data["result"] = [series_of(data, "DCGM_FI_DEV_GPU_TEMP")]

    found = record(data)

    assert found.state == TelemetryState.NO_SERIES
    assert found.summary.startswith("no fault counter exported for ")
    assert "not exported for this node: XID, XID count, row remap failure" in found.summary
    assert "this does not clear the node" in found.summary


def test_a_counter_rising_under_its_total_name_is_a_signal():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 0)
    set_from(series_of(data, "DCGM_FI_DEV_ROW_REMAP_FAILURE"), "00:00:00", 0)
    replays = series_of(data, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    replays["metric"]["__name__"] = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total"
    set_from(replays, "08:10:00", 12)

    found = record(data)

    assert found.state == TelemetryState.SIGNAL
    assert [(f.kind, f.metric, f.value) for f in found.signals] == [
        ("pcie_replay", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total", 12)
    ]
    assert "PCIe replays" in found.read and "PCIe replays" not in found.not_exported


def xid_count_series(data: dict[str, Any], xid: str) -> dict[str, Any]:
    """dcgm-exporter's XID counter for the suspect GPU as the add-on stores it, at 0."""
    series = copy.deepcopy(series_of(data, "DCGM_FI_DEV_XID_ERRORS"))
    series["metric"].update({"__name__": "DCGM_EXP_XID_ERRORS_COUNT_total", "xid": xid})
    set_from(series, "00:00:00", 0)
    data["result"].append(series)
    return series


def test_a_rising_xid_count_under_its_total_name_names_the_xid_and_its_meaning():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 0)
    set_from(series_of(data, "DCGM_FI_DEV_ROW_REMAP_FAILURE"), "00:00:00", 0)
    set_from(xid_count_series(data, "94"), "08:05:00", 2)

    found = record(data)

    (signal,) = found.signals
    assert (signal.kind, signal.value, signal.cause) == ("xid_count", 94, "hardware")
    assert signal.text.startswith(f"XID 94 counted 2 time(s) from 08:05:00 UTC on {UUID}")
    assert signal.text.endswith("(usually hardware)")
    assert "XID count" in found.read


def test_a_quiet_xid_count_is_read_and_clean():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 0)
    set_from(series_of(data, "DCGM_FI_DEV_ROW_REMAP_FAILURE"), "00:00:00", 0)
    xid_count_series(data, "13")

    found = record(data)

    assert found.state == TelemetryState.CLEAN
    assert "XID count" in found.read and "XID count" not in found.not_exported


def test_the_suspect_gpu_is_found_under_the_lowercase_uuid_label():
    data = answer()
    for series in data["result"]:
        series["metric"]["uuid"] = series["metric"].pop("UUID")

    found = record(data)

    assert [(f.kind, f.gpu_uuid) for f in found.signals] == [
        ("xid", UUID),
        ("row_remap_failed", UUID),
    ]


def test_families_the_exporter_does_not_collect_are_named_as_not_exported():
    found = record(answer())

    assert "ECC SBE total" in found.not_exported
    assert "NVLink replays" in found.not_exported
    assert "XID" not in found.not_exported
    assert "row remap failure" not in found.not_exported


def test_another_gpu_and_another_node_in_the_answer_are_ignored():
    data = answer()
    other_gpu = copy.deepcopy(series_of(data, "DCGM_FI_DEV_XID_ERRORS"))
    other_gpu["metric"].update({"UUID": "GPU-00000005-5a1e-4c1d-9e7b-000000000000", "gpu": "3"})
    set_from(other_gpu, "07:30:00", 31)
    other_node = copy.deepcopy(series_of(data, "DCGM_FI_DEV_XID_ERRORS"))
    other_node["metric"]["Hostname"] = "hyperpod-i-0fff1234def567890"
    set_from(other_node, "07:30:00", 48)
    data["result"] += [other_gpu, other_node]

    found = record(data)

    assert [f.value for f in found.signals if f.kind == "xid"] == [79]
    assert found.series == 6


def test_an_xid_already_set_when_the_window_began_says_so():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "00:00:00", 79)

    (xid, _) = record(data).signals

    assert "XID 79 already reported when the window began (07:14:30 UTC)" in xid.text


def test_each_distinct_xid_is_named_in_order():
    data = answer()
    xid = series_of(data, "DCGM_FI_DEV_XID_ERRORS")
    set_from(xid, "07:40:00", 13)
    set_from(xid, "08:03:15", 79)

    values = [f.value for f in record(data).signals if f.kind == "xid"]

    assert values == [13, 79]


def test_the_newer_exporters_dcgm_names_and_lowercase_hostname_are_read_alike():
    data = answer()
    for series in data["result"]:
        metric = series["metric"]
        metric["hostname"] = metric.pop("Hostname")
        metric["__name__"] = {
            "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": "DCGM_FI_DEV_ROW_REMAP_FAILED",
        }.get(metric["__name__"], metric["__name__"])

    found = record(data)

    assert [(f.kind, f.metric) for f in found.signals] == [
        ("xid", "DCGM_FI_DEV_XID_ERROR"),
        ("row_remap_failed", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
    ]


def quiet_answer() -> dict[str, Any]:
    data = answer()
    for name in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ROW_REMAP_FAILURE"):
        set_from(series_of(data, name), "00:00:00", 0)
    return data


def add_series(data: dict[str, Any], name: str, value: float = 0) -> dict[str, Any]:
    added = copy.deepcopy(series_of(data, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"))
    added["metric"]["__name__"] = name
    set_from(added, "00:00:00", value)
    data["result"].append(added)
    return added


def test_a_count_that_rose_in_the_window_is_a_signal():
    data = quiet_answer()
    ecc = add_series(data, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 3)
    set_from(ecc, "07:50:00", 5)
    set_from(ecc, "08:10:00", 9)

    (rising,) = record(data).signals

    assert rising.kind == "ecc_sbe"
    assert rising.at == "2026-11-30T07:50:00+00:00"
    assert rising.text.startswith("correctable (single-bit) ECC errors rose by 6 to 9")


def test_a_counter_reset_is_not_a_rise_but_counting_goes_on_after_it():
    data = quiet_answer()
    replays = series_of(data, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    set_from(replays, "00:00:00", 40)
    set_from(replays, "07:30:00", 0)  # the driver reloaded
    set_from(replays, "08:00:00", 2)

    (rising,) = record(data).signals

    assert (rising.kind, rising.value, rising.at) == ("pcie_replay", 2, "2026-11-30T08:00:00+00:00")


def test_old_uncorrectable_faults_that_did_not_change_are_history_not_a_signal():
    data = quiet_answer()
    set_from(series_of(data, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"), "00:00:00", 2)
    set_from(series_of(data, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"), "00:00:00", 7)

    found = record(data)

    assert found.state == TelemetryState.CLEAN
    assert [(f.kind, f.value) for f in found.history] == [("uncorrectable_remapped_rows", 2)]
    assert found.history[0].text == (
        f"2 rows remapped for uncorrectable errors on {UUID} (GPU 5), none new in the window"
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", "row_remap_pending"),
        ("DCGM_FI_DEV_RETIRED_PENDING", "retired_pending"),
        ("DCGM_FI_DEV_PAGE_RETIRED_PENDING", "retired_pending"),
    ],
)
def test_a_pending_repair_is_a_signal(name, kind):
    data = quiet_answer()
    set_from(add_series(data, name), "08:05:00", 1)

    (pending,) = record(data).signals

    assert (pending.kind, pending.at) == (kind, "2026-11-30T08:05:00+00:00")
    assert "a GPU reset applies it" in pending.text


def test_power_capping_alone_is_not_throttling_by_the_hardware():
    data = quiet_answer()
    set_from(add_series(data, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"), "00:00:00", 0x4 | 0x1)

    assert record(data).state == TelemetryState.CLEAN


def test_hardware_thermal_slowdown_and_power_brake_are_named():
    data = quiet_answer()
    reasons = add_series(data, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0x4)
    set_from(reasons, "08:01:00", 0x4 | 0x40)
    set_from(reasons, "08:02:00", 0x80)

    (throttled,) = record(data).signals

    assert throttled.at == "2026-11-30T08:01:00+00:00"
    assert "(HW thermal slowdown, HW power brake)" in throttled.text


def test_an_answer_without_the_nodes_series_says_so_and_does_not_clear_the_node():
    data = answer()
    for series in data["result"]:
        series["metric"]["Hostname"] = "dcgm-exporter-7x2kq"  # the exporter's pod name

    found = record(data)

    assert found.state == TelemetryState.NO_SERIES
    assert "no dcgm-exporter series" in found.summary
    assert "docs/deploy.md, 'Hardware telemetry'" in found.summary
    assert "this does not clear the node" in found.summary


def test_the_summary_names_at_most_three_signals_and_counts_the_rest():
    data = answer()
    for name in ("DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_RETIRED_PENDING"):
        set_from(add_series(data, name), "08:05:00", 1)
    set_from(add_series(data, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"), "08:05:00", 1)

    found = record(data)

    assert len(found.signals) == 5
    assert found.summary.endswith("; and 2 more")


# -- the step: never raises ------------------------------------------------------------------------


def configured_world(*answers: Any) -> World:
    world = World(settings=settings(telemetry={CLUSTER: WORKSPACE}))
    world.prometheus = FakePrometheus(*answers)
    return world


def test_a_cluster_without_a_workspace_asks_nothing_and_says_it_is_not_configured(world):
    found = telemetry.gather(world.deps, incident(), LATER)

    assert world.prometheus.calls == []
    assert found.state == TelemetryState.NOT_CONFIGURED
    assert "not configured for cluster ml-cluster-1 (sdc:telemetry)" in found.summary


def test_the_query_goes_to_the_clusters_workspace_over_the_window():
    world = configured_world(answer())

    found = telemetry.gather(world.deps, incident(), LATER)

    (call,) = world.prometheus.calls
    window = telemetry_query.window_of(incident(), LATER)
    assert call.workspace == WORKSPACE
    assert (call.start, call.end, call.step_seconds) == (
        window.start,
        window.end,
        window.step_seconds,
    )
    assert call.query == telemetry_query.query_for(telemetry_query.target_of(incident()), WORKSPACE)
    assert found.state == TelemetryState.SIGNAL
    assert found.dashboard == WORKSPACE.dashboard


@pytest.mark.parametrize(
    ("error", "state"),
    [
        (TelemetrySlow("workspace ws-x did not answer within 5 s"), TelemetryState.SLOW),
        (TelemetryRefused("workspace ws-x refused the query (403)"), TelemetryState.REFUSED),
        (TelemetryBadAnswer("not JSON"), TelemetryState.FAILED),
        (RuntimeError("a bug"), TelemetryState.FAILED),
    ],
)
def test_a_failed_query_becomes_one_line_that_says_why(error, state):
    world = configured_world(error)

    found = telemetry.gather(world.deps, incident(), LATER)

    assert found.state == state
    assert found.summary == f"not available: {error}; this does not clear the node"
    assert found.error["type"] == type(error).__name__
    assert card_lines.telemetry_panel(found) == [found.summary, f"dashboard: {WORKSPACE.dashboard}"]


def test_a_malformed_answer_is_a_failed_query():
    world = configured_world({"resultType": "vector", "result": []})

    assert telemetry.gather(world.deps, incident(), LATER).state == TelemetryState.FAILED


# -- the card's paragraph ---------------------------------------------------------------------------


def test_the_card_lists_every_signal_what_was_looked_at_and_the_dashboard():
    lines = card_lines.telemetry_panel(record(answer()))

    assert lines[0].startswith(f"XID 79 at 08:03:15 UTC on {UUID} (GPU 5): ")
    assert lines[1].startswith("row remap FAILED")
    assert any(
        line.startswith(
            "looked at: Hostname/hostname = hyperpod-i-0abc1234def567890 or any name holding "
            "i-0abc1234def567890, GPU GPU-0000000d"
        )
        and "2026-11-30 07:14:30 to 08:17:15 UTC in 15 s steps" in line
        for line in lines
    )
    assert any(line.startswith("not exported for this node: ") for line in lines)
    assert lines[-1] == f"dashboard: {WORKSPACE.dashboard}"


def test_an_incident_not_yet_asked_about_says_so():
    assert card_lines.telemetry_panel(None) == ["not queried yet (the approval request queries it)"]


def test_the_record_round_trips_through_the_incident_record():
    stored = incident()
    stored.telemetry = record(answer())

    again = Incident.from_record(stored.to_record())

    assert again == stored
    assert again.telemetry is not None and again.telemetry.signals[0].value == 79


# -- what an XID means --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "hardware"),
    [
        (48, True),
        (63, True),
        (64, True),
        (74, True),
        (79, True),
        (92, True),
        (94, True),
        (95, True),
        (13, False),
        (31, False),
        (43, False),
        (45, False),
        (119, False),
        (120, False),
    ],
)
def test_the_catalog_says_whether_an_xid_usually_means_the_hardware(code, hardware):
    assert xids.CATALOG[code].hardware is hardware


def test_an_xid_signal_carries_its_meaning_and_cause():
    found = record(answer())

    xid = found.signals[0]
    assert xid.text.endswith(": GPU has fallen off the bus (usually hardware)")
    assert xid.cause == "hardware"


def test_an_application_xid_says_it_is_usually_not_the_hardware():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "08:03:15", 13)

    xid = record(data).signals[0]

    assert xid.text.endswith(
        ": graphics engine exception (usually the application, not the hardware)"
    )
    assert xid.cause == "application"


def test_an_xid_outside_the_catalog_is_named_as_unknown_not_guessed():
    data = answer()
    set_from(series_of(data, "DCGM_FI_DEV_XID_ERRORS"), "08:03:15", 999)

    xid = record(data).signals[0]

    assert "not in the catalog the card knows" in xid.text
    assert xid.cause is None


def test_every_cause_has_words_and_is_used_by_the_catalog():
    assert {x.cause for x in xids.CATALOG.values()} == set(xids.XidCause)
    assert all(cause.words for cause in xids.XidCause)
