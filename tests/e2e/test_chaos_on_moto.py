"""Chaos at every step: each function killed around each external call it makes, in full runs
through the synthesized rules and state machines on moto (tests/e2e/kills.py: before the call;
after it, before the incident is saved; after the save; and hung in the call until its
timeout). The intake functions are retried as Lambda retries an asynchronous invocation, the
others by the state machines' Retry.

Every run must end in its decision's outcome; the node is never uncordoned while a reboot or
replacement may be running; no HyperPod action and no node patch happens twice; the audit
names every external action that happened. Notices are at-least-once: a function killed between
a publish and its record publishes again on the retry (the approver may get a card twice; the
decision is still taken once). The outcome of each run goes into the fault suite's figures
(`chaos <function>`), the table of the issue note.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sdc_remediation.infra.local.run import TERMINAL, LocalRun
from tests.conftest import load_fixture
from tests.e2e.kills import POINTS, Kill, killing
from tests.e2e.test_pipeline_on_moto import open_from_fixture, trail
from tests.e2e.test_stuck_on_moto import wait_until
from tests.faults.figures import record

pytestmark = [pytest.mark.slow, pytest.mark.synth]

REBOOT = "BatchRebootClusterNodes"
REPLACE = "BatchReplaceClusterNodes"
HEALTH_CHECK = "StartClusterHealthCheck"


@dataclass(frozen=True)
class Case:
    function: str
    port: str
    method: str
    decision: str
    """What the approver decides in the run (reject, reboot or approve)."""
    trigger: str = "alarm"
    """What opens the incident: the documented contributor alarm, or a training rank's report."""

    @property
    def name(self) -> str:
        return f"{self.function}.{self.method}"


CASES = (
    Case("open_incident", "workflow", "start_execution", "reject"),
    Case("store_report", "workflow", "start_execution", "reject", trigger="report"),
    Case("isolate_node", "kubernetes", "cordon", "reject"),
    Case("start_health_check", "hyperpod", "start_health_check", "reject"),
    Case("request_approval", "notifier", "publish", "reject"),
    Case("decide", "workflow", "send_task_success", "reject"),
    Case("reboot_node", "hyperpod", "reboot_nodes", "reboot"),
    Case("check_reboot", "hyperpod", "describe_node", "reboot"),
    Case("replace_node", "hyperpod", "replace_nodes", "approve"),
    Case("check_replacement", "hyperpod", "describe_node", "approve"),
    Case("close_incident", "kubernetes", "uncordon", "reject"),
    Case("close_incident", "notifier", "publish", "reject"),
)
OUTCOME = {"reject": "rejected", "reboot": "rebooted", "approve": "replaced"}
NOTICE_KILLS = {("request_approval", "publish"), ("close_incident", "publish")}


def opened(run: LocalRun, trigger: str) -> str:
    """The incident a contributor alarm (EventBridge → open_incident) or a training rank's report
    (EventBridge → store_report) opened."""
    if trigger == "alarm":
        return open_from_fixture(run)
    run.emitter(load_fixture("alarms", "rank_map")).report(load_fixture("alarms", "replay_culprit"))
    # the delivery's answer is the last attempt's: "attached" when an earlier one opened it
    (report,) = [d for d in run.deliveries if "incidents" in (d.response or {})]
    (incident,) = report.response["incidents"]
    return str(incident["incident_id"])


def released_mid_recovery(steps: list[tuple[str, str]]) -> bool:
    """A node_released entry between a reboot or replacement request and its end."""
    running = False
    for _, action in steps:
        if action in ("reboot_requested", "replacement_requested"):
            running = True
        elif action in ("reboot_done", "replacement_done", "node_gone"):
            running = False
        elif action == "node_released" and running:
            return True
    return False


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_function_killed_around_its_external_call_ends_allowed_and_acts_once(case, point):
    with LocalRun.open() as run:
        with killing(Kill(case.function, case.port, case.method, point)) as kill:
            incident_id = opened(run, case.trigger)
            run.wait_for(incident_id, "awaiting_approval", timeout=90)
            # the approver decides once the approval request completed (its card went out)
            wait_until(lambda: "approval_requested" in [e.action for e in run.audit(incident_id)])
            run.decide(incident_id, case.decision, f"chaos: {case.name} {point}")
            final = run.wait_for(incident_id, *TERMINAL, timeout=120)
        steps = trail(run, incident_id)
        actions = [action for _, action in steps]
        cards = [n for n in run.inbox + run.notifications() if n["subject"]]
        hyperpod = {op: len(run.hyperpod.calls_to(op)) for op in (HEALTH_CHECK, REBOOT, REPLACE)}
        patches = len(run.kube_api.patches())
        machine = run.stack.state_machine("Remediation").arn
        executions = run.session.client("stepfunctions").list_executions(stateMachineArn=machine)

    outcome = final.state.value
    record(f"chaos {case.name}", f"{point}: {outcome}" if kill.fired else f"{point}: not reached")
    assert outcome == OUTCOME[case.decision], (kill.fired, actions)
    assert len(executions["executions"]) == 1  # one remediation, however often opening ran
    assert not released_mid_recovery(steps), actions
    # HyperPod acted once per intended action, and the audit names each
    checks = 2 if case.decision == "reboot" else 1  # the check runs again after a reboot
    assert hyperpod == {
        HEALTH_CHECK: checks,
        REBOOT: int(case.decision == "reboot"),
        REPLACE: int(case.decision == "approve"),
    }, hyperpod
    assert actions.count("health_check_started") == checks
    assert actions.count("reboot_requested") == hyperpod[REBOOT]
    assert actions.count("replacement_requested") == hyperpod[REPLACE]
    # the node: cordoned once; released once unless replaced (gone: nothing to release)
    released = 0 if case.decision == "approve" else 1
    assert patches == 1 + released, run.kube_api.patches()
    assert actions.count("node_isolated") == 1
    assert actions.count("node_released") == released
    # notices: at least once; twice only where the kill fell between a publish and its record
    kinds = [n["attributes"].get("kind") for n in cards]
    extra = int((case.function, case.method) in NOTICE_KILLS and point != "before")
    assert 1 <= kinds.count("approval_request") <= 1 + extra, kinds
    assert 1 <= kinds.count("closed") <= 1 + extra, kinds
