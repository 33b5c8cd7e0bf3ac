"""What can get stuck, end to end on moto: an approval card during an SNS outage, a close that
fails, a node kept mid-recovery; each is visible (`sdc status`, the dashboard, an alarm) and the
reconcile function settles it from HyperPod's and Step Functions' own state."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from sdc_remediation.infra.cli.main import main
from sdc_remediation.infra.local.drill.judge import check_dashboard
from sdc_remediation.infra.local.metrics import alarm_breaching
from sdc_remediation.infra.local.run import CLUSTER, LocalRun, default_cluster
from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE
from tests.e2e.kills import Kill, killing
from tests.e2e.test_pipeline_on_moto import CULPRIT_INSTANCE, open_from_fixture, trail
from tests.e2e.test_reboot_on_moto import rebooted_on_decision

pytestmark = [pytest.mark.slow, pytest.mark.synth]


@contextmanager
def sns_outage(run: LocalRun) -> Iterator[None]:
    """Every Publish fails to connect (the SDK's view of SNS being unreachable)."""

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://sns.us-west-2.amazonaws.com")

    run.session.events.register("before-call.sns.Publish", refuse)
    try:
        yield
    finally:
        run.session.events.unregister("before-call.sns.Publish", refuse)


def wait_until(predicate: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("condition not met")


def status(run: LocalRun, tmp_path: Any, capsys: Any) -> dict[str, Any]:
    outputs = run.write_outputs(str(tmp_path / "outputs.json"))
    capsys.readouterr()
    assert main(["--outputs", outputs, "status", "--json"], session=run.session) == 0
    # The functions' JSON log lines share stdout here; the report is the indented document.
    (document,) = re.findall(r"^\{\n.*?^\}$", capsys.readouterr().out, re.M | re.S)
    return dict(json.loads(document))


def sdc_reconcile(run: LocalRun, tmp_path: Any, capsys: Any) -> tuple[int, dict[str, Any]]:
    """`sdc reconcile --json` against the run's account: its exit status and its report."""
    outputs = run.write_outputs(str(tmp_path / "outputs.json"))
    capsys.readouterr()
    status = main(["--outputs", outputs, "reconcile", "--json"], session=run.session)
    (document,) = re.findall(r"^\{\n.*?^\}$", capsys.readouterr().out, re.M | re.S)
    return status, dict(json.loads(document))


def alarm(run: LocalRun, suffix: str) -> dict[str, Any]:
    (found,) = [a for a in run.stack.alarms.values() if a["AlarmName"].endswith(suffix)]
    return found


def node_spec(run: LocalRun) -> dict[str, Any]:
    (name,) = [
        n
        for n, node in run.kube_api.nodes.items()
        if node["spec"]["providerID"].endswith(CULPRIT_INSTANCE)
    ]
    return dict(run.kube_api.spec(name))


def test_an_sns_outage_at_the_approval_is_shown_alarmed_and_the_card_goes_out_when_sns_returns(
    tmp_path, capsys
):
    with LocalRun.open() as run:
        with sns_outage(run):
            incident_id = open_from_fixture(run)
            wait_until(
                lambda: (
                    (run.incident(incident_id) or None)
                    and run.incident(incident_id).card_undelivered
                )
            )
            report = status(run, tmp_path, capsys)
            breaching = alarm_breaching(
                run.session.client("cloudwatch"), alarm(run, "cards-undelivered")
            )
            expected, problems = check_dashboard(run, run.audit(incident_id), set())
            exit_status, during = sdc_reconcile(run, tmp_path, capsys)

        after = run.reconcile()
        card = run.wait_for_notification("approve")

        assert report["cards_undelivered"] == [incident_id]
        assert exit_status == 1  # something needs a person
        assert breaching
        assert f"{PIPELINE_NAMESPACE}/CardsUndelivered" in expected and problems == []
        assert [(e["finding"], e["incident_id"]) for e in during["needs_person"]] == [
            ("card_undelivered", incident_id)
        ]
        assert [(e["finding"], e["incident_id"]) for e in after["settled"]] == [
            ("card_undelivered", incident_id)
        ]
        assert card["attributes"]["incident_id"] == incident_id
        assert run.incident(incident_id).card_undelivered is None
        decided = run.decide(incident_id, "reject", "seen the card at last")
        assert decided["status"] == "SUCCEEDED"
        run.wait_for(incident_id, "rejected")


def test_a_close_that_fails_leaves_nothing_stuck_after_one_reconcile_run():
    with LocalRun.open() as run:
        incident_id = open_from_fixture(run)
        run.wait_for(incident_id, "awaiting_approval")
        kill = Kill("close_incident", "kubernetes", "uncordon", "before", times=100)
        with killing(kill):
            run.decide(incident_id, "reject", "not the GPU")
            execution = run.wait_for_execution(incident_id)
        stuck = run.incident(incident_id)
        held_lock = run.deps.incidents.open_incident_id(CLUSTER, CULPRIT_INSTANCE)
        cordoned = node_spec(run).get("unschedulable")

        result = run.reconcile()

        assert execution["status"] == "FAILED"
        assert (stuck.state.value, held_lock, cordoned) == ("rejected", incident_id, True)
        assert [(e["finding"], e["incident_id"]) for e in result["settled"]] == [
            ("orphan_slot", incident_id)
        ]
        assert run.deps.incidents.open_incident_id(CLUSTER, CULPRIT_INSTANCE) is None
        assert run.deps.guard.guard_state(CLUSTER).open_ids == ()
        assert "unschedulable" not in node_spec(run) and not node_spec(run).get("taints")
        actions = [action for _, action in trail(run, incident_id)]
        assert actions.count("node_released") == 1 and "reconciled" in actions
        assert result["needs_person"] == []


def test_a_node_kept_after_a_reboot_that_never_ended_is_released_after_its_health_check_passes():
    hyperpod = default_cluster()
    with LocalRun.open(hyperpod=hyperpod) as run:
        hyperpod.set_reboot_returns(CLUSTER, CULPRIT_INSTANCE, returns=False)
        incident_id = rebooted_on_decision(run)
        run.wait_for(incident_id, "failed", timeout=90)
        kept = node_spec(run).get("unschedulable")
        hyperpod.set_reboot_returns(CLUSTER, CULPRIT_INSTANCE, returns=True)
        hyperpod.advance(5)

        checking = run.reconcile()  # back from the reboot: the health check after it starts
        still_kept = node_spec(run).get("unschedulable")
        hyperpod.advance(5)
        result = run.reconcile()

        assert (kept, still_kept) == (True, True)
        assert [(e["finding"], e["incident_id"]) for e in checking["waiting"]] == [
            ("recovery_unknown", incident_id)
        ]
        assert [(e["finding"], e["incident_id"]) for e in result["settled"]] == [
            ("recovery_unknown", incident_id)
        ]
        assert "unschedulable" not in node_spec(run)
        assert run.deps.incidents.open_incident_id(CLUSTER, CULPRIT_INSTANCE) is None
        assert run.deps.guard.guard_state(CLUSTER).open_ids == ()
        assert run.incident(incident_id).reconciled_at is not None
