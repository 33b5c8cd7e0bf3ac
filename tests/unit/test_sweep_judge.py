"""The drill's judge of the sweep scenarios fails a run that touched a busy node, opened the
incident elsewhere, or recorded the busy nodes as anything but busy."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sdc_remediation.infra.local.drill import judge
from sdc_remediation.infra.local.drill.scenarios import BUSY_NODES, SWEEP_FAILS
from sdc_remediation.lambdas.models.sweep import SkipReason


def observed(checked: list[str], incident_on: str = SWEEP_FAILS, busy_as: str = "busy") -> Any:
    run = {"checked": checked, "skipped": dict.fromkeys(BUSY_NODES, busy_as)}
    incident = SimpleNamespace(
        incident_id="sdc-1", locked_instances=[incident_on], sweeps=[{"kind": "sweep"}]
    )
    call = {"DeepHealthCheckConfigurations": [{"InstanceIds": checked}]}
    return judge.Observed(
        finals=[incident],
        holds=[],
        chain_ok=True,
        card=None,
        notices=[],
        held_texts=[],
        replace_calls=[{"NodeIds": [incident_on]}],
        reboot_calls=[],
        health_checks=[call],
        isolated=set(),
        alarm={},
        rank_map=[],
        interactive=False,
        sweeps=[run],
    )


def test_a_run_that_checked_only_idle_nodes_and_opened_one_incident_passes():
    assert judge._judge_sweep(observed([SWEEP_FAILS])) == []


def test_a_health_checked_busy_node_fails_the_drill():
    problems = judge._judge_sweep(observed([SWEEP_FAILS, BUSY_NODES[0]]))

    assert problems == [f"busy nodes {[BUSY_NODES[0]]} were health-checked"]


def test_an_incident_on_another_node_fails_the_drill():
    problems = judge._judge_sweep(
        observed([SWEEP_FAILS, "i-0ee00000000000001"], "i-0ee00000000000001")
    )

    assert any("expected one on" in p for p in problems)


def test_busy_nodes_recorded_as_anything_but_busy_fail_the_drill():
    problems = judge._judge_sweep(observed([SWEEP_FAILS], busy_as=SkipReason.SHARE.value))

    assert problems == ["sweep run 1 recorded the busy nodes as ['share']"]
