"""The hardware alerting rules judged by `promtool test rules` (Debian's prometheus package): for
every rule a case that fires and one that does not, over series named and labelled as the
HyperPod observability add-on stores dcgm-exporter's (counters under `_total`, the collector's
`job`/`instance`/`pod` labels, the node in `Hostname`).

promtool is required, as for the other Prometheus tests: without it these tests fail with the
install hint, they are never skipped."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from sdc_remediation.infra.local.prometheus import (
    INSTALL_HINT,
    binaries,
    collector_labels,
    dcgm_labels,
)
from sdc_remediation.infra.stack.alert_manager import (
    CLEAN,
    MESSAGE_TEMPLATE,
    TEMPLATE,
    TEMPLATE_FILE,
)
from sdc_remediation.infra.stack.alert_rules import (
    Rule,
    Thresholds,
    label_ref,
    rule_annotations,
    rule_labels,
    rules,
    rules_yaml,
)
from sdc_remediation.lambdas.models.hardware_alert import HardwareRule

CLUSTER = "ml-cluster-1"
NODE = "ip-10-1-17-70.us-west-2.compute.internal"
UUID = "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003"
GPU = "3"
STORED = {**dcgm_labels(NODE, GPU, UUID), **collector_labels("dcgm-exporter-f7m2p", "10.1.17.71")}
"""A GPU's labels as the add-on stores them."""
PORT = {
    "device": "rdmap16s27",
    "port": "1",
    "Hostname": NODE,
    **collector_labels("node-exporter-q8x1z", "10.1.17.71"),
}
"""A network port's labels (node_exporter's infiniband collector; the node in `Hostname`)."""
THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Case:
    """A promtool test group: series, and whether the alert fires at `at`."""

    name: str
    rule: HardwareRule
    series: Mapping[str, str]
    """`name{labels}` → promtool's expanding notation (one value per 15 s)."""
    at: str
    fires: bool
    match: Mapping[str, str] = field(default_factory=dict)
    """Labels that pick the firing rule when several share an alert name (the XID, counter)."""
    labels: Mapping[str, str] = field(default_factory=lambda: STORED)


def series(name: str, labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def gpu(name: str, values: str) -> dict[str, str]:
    return {series(name, STORED): values}


def steady(value: float, minutes: int) -> str:
    return f"{value:g}x{minutes * 4}"


def flaps(down_at: Sequence[int], down_steps: int, minutes: int = 70) -> str:
    """A port ACTIVE (4) but DOWN (1) for `down_steps` scrapes from each minute in `down_at`."""
    values = []
    for step in range(minutes * 4 + 1):
        down = any(start * 4 <= step < start * 4 + down_steps for start in down_at)
        values.append("1" if down else "4")
    return " ".join(values)


THROTTLE = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
XID = "DCGM_FI_DEV_XID_ERRORS"
CASES: tuple[Case, ...] = (
    *(
        Case(
            f"throttled by {reason} for 10 minutes",
            HardwareRule.THROTTLING,
            gpu(THROTTLE, steady(bits, 10)),
            "8m",
            True,
        )
        for reason, bits in (
            ("HW slowdown", 0x08),
            ("HW thermal slowdown", 0x40),
            ("HW power brake and SW power cap", 0x80 | 0x04),
        )
    ),
    Case(
        "SW power cap and SW thermal slowdown only (normal under load)",
        HardwareRule.THROTTLING,
        gpu(THROTTLE, steady(0x04 | 0x20, 10)),
        "8m",
        False,
    ),
    Case(
        "HW slowdown for 3 minutes only (a spike, not sustained)",
        HardwareRule.THROTTLING,
        gpu(THROTTLE, f"{steady(0x08, 3)} {steady(0x04, 7)}"),
        "8m",
        False,
    ),
    Case(
        "the newer exporters' name (clocks event reasons)",
        HardwareRule.THROTTLING,
        gpu("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", steady(0x40, 10)),
        "8m",
        True,
    ),
    *(
        Case(
            f"XID {code}",
            HardwareRule.XID,
            gpu(XID, f"0x4 {code}x20"),
            "3m",
            True,
            match={"xid": str(code)},
        )
        for code in THRESHOLDS.critical_xids
    ),
    Case(
        "XID 79 under dcgm-exporter 4.9's name",
        HardwareRule.XID,
        gpu("DCGM_FI_DEV_XID_ERROR", "0x4 79x20"),
        "3m",
        True,
        match={"xid": "79"},
    ),
    Case(
        "XID 31 (an application's illegal address)",
        HardwareRule.XID,
        gpu(XID, "0x4 31x20"),
        "3m",
        False,
    ),
    Case(
        "row remap failed",
        HardwareRule.ROW_REMAP_FAILURE,
        gpu("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x4 1x20"),
        "3m",
        True,
    ),
    Case(
        "row remap fine",
        HardwareRule.ROW_REMAP_FAILURE,
        gpu("DCGM_FI_DEV_ROW_REMAP_FAILURE", steady(0, 5)),
        "3m",
        False,
    ),
    Case(
        "row remap field blank (DCGM has no reading)",
        HardwareRule.ROW_REMAP_FAILURE,
        gpu("DCGM_FI_DEV_ROW_REMAP_FAILURE", steady(9223372036854775792, 5)),
        "3m",
        False,
    ),
    Case(
        "an uncorrectable ECC error",
        HardwareRule.UNCORRECTABLE_ECC,
        gpu("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_total", "0x8 1x12"),
        "4m",
        True,
    ),
    Case(
        "uncorrectable ECC errors of the past, none new",
        HardwareRule.UNCORRECTABLE_ECC,
        gpu("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_total", steady(3, 5)),
        "4m",
        False,
    ),
    *(
        Case(
            f"NVLink {counter} errors streaming",
            HardwareRule.NVLINK_ERRORS,
            gpu(f"{name}_total", "0+5x80"),
            "15m",
            True,
            match={"counter": counter},
        )
        for counter, name in (
            ("nvlink_crc_flit", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
            ("nvlink_crc_data", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"),
            ("nvlink_replay", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"),
            ("nvlink_recovery", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"),
        )
    ),
    Case(
        "a burst of 5 NVLink CRC errors, repaired by replays",
        HardwareRule.NVLINK_ERRORS,
        gpu("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL_total", "0x20 5x60"),
        "15m",
        False,
    ),
    Case(
        "PCIe replays streaming (20 a scrape)",
        HardwareRule.PCIE_REPLAYS,
        gpu("DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total", "0+20x60"),
        "12m",
        True,
    ),
    Case(
        "PCIe replays now and then (one a scrape)",
        HardwareRule.PCIE_REPLAYS,
        gpu("DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total", "0+1x60"),
        "12m",
        False,
    ),
    Case(
        "a brief flap: 60 s down",
        HardwareRule.LINK_DOWNTIME,
        {series("node_infiniband_state_id", PORT): flaps([30], 4)},
        "65m",
        False,
        labels=PORT,
    ),
    Case(
        "three flaps of 60 s: 180 s down in total",
        HardwareRule.LINK_DOWNTIME,
        {series("node_infiniband_state_id", PORT): flaps([20, 30, 40], 4)},
        "65m",
        True,
        labels=PORT,
    ),
    Case(
        "one outage of 180 s: the same total",
        HardwareRule.LINK_DOWNTIME,
        {series("node_infiniband_state_id", PORT): flaps([30], 12)},
        "65m",
        True,
        labels=PORT,
    ),
)


def rendered(rule: Rule, labels: Mapping[str, str]) -> dict[str, str]:
    """The labels of the alert `rule` raises over a series with `labels`: the series' own, then
    the rule's, templates filled in as Prometheus fills them."""
    out = dict(labels)
    for name, value in rule_labels(rule, CLUSTER, None).items():
        for label in ("Hostname", "hostname", "gpu", "UUID", "uuid"):
            value = value.replace(label_ref(label), labels.get(label, ""))
        out[name] = value
    return out


def group(case: Case) -> dict[str, object]:
    candidates = [
        r
        for r in rules(THRESHOLDS)
        if r.rule is case.rule and all(r.labels.get(k) == v for k, v in case.match.items())
    ]
    rule = candidates[0]
    expected = (
        [{"exp_labels": rendered(rule, case.labels), "exp_annotations": rule_annotations(rule)}]
        if case.fires
        else []
    )
    return {
        "name": case.name,
        "interval": "15s",
        "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
        "alert_rule_test": [
            {"eval_time": case.at, "alertname": rule.alert, "exp_alerts": expected}
        ],
    }


def promtool_test(tmp_path: Path, cases: Sequence[Case]) -> subprocess.CompletedProcess[str]:
    found = binaries()
    if found is None:
        pytest.fail(INSTALL_HINT)
    (tmp_path / "rules.yml").write_text(rules_yaml(CLUSTER, thresholds=THRESHOLDS))
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [group(case) for case in cases],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    return subprocess.run(
        [found[1], "test", "rules", "tests.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("rule", list(HardwareRule), ids=str)
def test_each_rule_fires_on_its_fault_and_stays_quiet_otherwise(rule, tmp_path):
    cases = [case for case in CASES if case.rule is rule]

    answer = promtool_test(tmp_path, cases)

    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "SUCCESS" in answer.stdout


def test_every_rule_and_every_critical_xid_has_a_firing_and_a_quiet_case():
    for rule in HardwareRule:
        assert {case.fires for case in CASES if case.rule is rule} == {True, False}, rule
    fired_xids = {c.match.get("xid") for c in CASES if c.rule is HardwareRule.XID and c.fires}
    assert fired_xids >= {str(code) for code in THRESHOLDS.critical_xids}


def test_promtool_fails_a_case_whose_expectation_is_wrong(tmp_path):
    """The harness can fail: a quiet case claimed to fire is reported by promtool."""
    quiet = next(c for c in CASES if c.rule is HardwareRule.LINK_DOWNTIME and not c.fires)
    wrong = Case(quiet.name, quiet.rule, quiet.series, quiet.at, True, labels=quiet.labels)

    answer = promtool_test(tmp_path, [wrong])

    assert answer.returncode != 0
    assert "FAILED" in answer.stdout + answer.stderr


def test_the_rule_file_passes_promtool_check(tmp_path):
    found = binaries()
    if found is None:
        pytest.fail(INSTALL_HINT)
    path = tmp_path / "rules.yml"
    path.write_text(rules_yaml(CLUSTER, node_label="kubernetes_node"))

    answer = subprocess.run(
        [found[1], "check", "rules", str(path)], capture_output=True, text=True, check=False
    )

    assert answer.returncode == 0, answer.stdout + answer.stderr


def test_the_message_template_cuts_what_could_close_a_json_string(tmp_path):
    """A label value is a claim of whoever writes series: rendered by alertmanager's own
    template engine (`amtool template render`), it loses `"`, `\\` and control characters."""
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail(
            "amtool is missing: install Debian's prometheus-alertmanager package as root "
            "(`apt-get install -y prometheus-alertmanager`; `make test` does it)"
        )
    (tmp_path / TEMPLATE_FILE).write_text(TEMPLATE)
    hostile = 'ip-10-1-17-70\\", \\"cluster\\": \\"ml-cluster-9\\\\\\n'

    answer = subprocess.run(
        [
            amtool,
            "template",
            "render",
            f"--template.glob={tmp_path / TEMPLATE_FILE}",
            '--template.text={{ "' + hostile + '" | ' + CLEAN + " }}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "ip-10-1-17-70, cluster: ml-cluster-9"
    message = subprocess.run(
        [
            amtool,
            "template",
            "render",
            f"--template.glob={tmp_path / TEMPLATE_FILE}",
            '--template.text={{ template "' + MESSAGE_TEMPLATE + '" . }}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(message.stdout)["version"] == "sdc-hardware-alert/1"
