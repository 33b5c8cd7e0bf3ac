"""Isolation on a HyperPod cluster orchestrated by Slurm, judged by a real slurmctld: the SSM
adapter's scripts run through the local Run Command stand-in on the local controller, and
`scontrol show node` says what they did."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sdc_remediation.infra.local.run_command import LocalRunCommand
from sdc_remediation.infra.local.slurm import LocalSlurm
from sdc_remediation.lambdas.adapters.slurm import SsmSlurmControllers, parse_output
from sdc_remediation.lambdas.logic import approval, closing, isolation, recovery
from sdc_remediation.lambdas.models.errors import SlurmError, SlurmNodeNotFound, SlurmUnreachable
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.models.slurm import RUN_SHELL_SCRIPT, DrainOutcome, drain_reason
from sdc_remediation.lambdas.models.states import Scope
from sdc_remediation.lambdas.wording import cards
from tests.integration.conftest import SLURM_NODES
from tests.unit.world import CLUSTER, INSTANCE, World, settings

CONTROLLER = "i-0c0000000000000c1"
HOST = SLURM_NODES[0]
HOSTNAME = f"{HOST}.us-west-2.compute.internal"
OPERATOR_REASON = "operator: NVLink flaps, ticket OPS-77"


@pytest.fixture
def commands(slurm: LocalSlurm) -> Iterator[LocalRunCommand]:
    for name in SLURM_NODES:  # every test starts from nodes in service
        if not slurm.node(name).in_service:
            slurm.resume(name)
    yield LocalRunCommand({CONTROLLER: slurm})


def slurm_world(commands: LocalRunCommand, **config: str) -> World:
    isolation_config = IsolationConfig(isolate=True, slurm_controller=CONTROLLER, **config)
    return World(
        settings=settings(node_isolation={CLUSTER: isolation_config}),
        slurm=SsmSlurmControllers(lambda: commands, sleep=lambda _: None),
        slurm_hostname=HOSTNAME,
    )


def drained_approved_and_replaced(world: World) -> str:
    """An incident whose node was drained, approved and replaced (the replacement done)."""
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "approve"), world.deps)
    ref = IncidentRef(incident_id)
    recovery.replace_node(ref, world.deps)
    while not recovery.check_replacement(ref, world.deps)["done"]:
        pass
    return incident_id


def close(world: World, incident_id: str, outcome: Outcome) -> None:
    closing.close_incident(CloseRequest(incident_id, outcome, None), world.deps)


def test_the_node_is_drained_with_our_reason_while_the_approval_waits(commands, slurm):
    world = slurm_world(commands)

    incident_id = world.awaiting_approval(isolated=True)

    node = slurm.node(HOST)
    assert node.drained and not node.in_service
    assert node.reason == drain_reason(incident_id)
    record = world.incident(incident_id).isolation
    assert record.state == "isolated"
    assert record.slurm_controller == CONTROLLER
    assert record.nodes[INSTANCE].node_name == HOST
    assert record.nodes[INSTANCE].cordoned_by_us is True
    sent = commands.sent[0]
    assert (sent.instance_id, sent.document) == (CONTROLLER, RUN_SHELL_SCRIPT)


def test_the_node_is_back_in_service_after_a_rejected_incident_closes(commands, slurm):
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "reject"), world.deps)

    close(world, incident_id, Outcome.REJECTED)

    node = slurm.node(HOST)
    assert node.in_service and node.reason is None
    assert world.incident(incident_id).isolation.state == "released"
    assert "node_released" in world.audit.actions(incident_id)


def test_an_operators_drain_reason_set_before_the_incident_is_still_there_after_it_closes(
    commands, slurm
):
    # Given an operator drained the node before the incident
    slurm.drain(HOST, OPERATOR_REASON)
    world = slurm_world(commands)
    # When the incident isolates, waits, is rejected and closes
    incident_id = world.awaiting_approval(isolated=True)
    during = slurm.node(HOST)
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    close(world, incident_id, Outcome.REJECTED)
    # Then the operator's drain and reason were never touched, and the record says whose it is
    after = slurm.node(HOST)
    assert during.reason == after.reason == OPERATOR_REASON
    assert after.drained
    node = world.incident(incident_id).isolation.nodes[INSTANCE]
    assert node.state == "kept"
    assert node.found_drain == OPERATOR_REASON
    assert node.cordoned_by_us is False


def test_a_drain_someone_set_while_the_incident_was_open_is_left_on_release(commands, slurm):
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)
    slurm.resume(HOST)
    slurm.drain(HOST, OPERATOR_REASON)  # an operator took the node over
    approval.decide(world.decision(incident_id, "reject"), world.deps)

    close(world, incident_id, Outcome.REJECTED)

    assert slurm.node(HOST).reason == OPERATOR_REASON
    assert world.incident(incident_id).isolation.nodes[INSTANCE].state == "kept"


def test_an_operators_drain_whose_reason_extends_ours_is_left_on_release(commands, slurm):
    # Given an operator who, while the incident was open, drained the node again with our
    # reason followed by a note of their own
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)
    extended = f"{drain_reason(incident_id)} [hold: ops ticket 77]"
    slurm.resume(HOST)
    slurm.drain(HOST, extended)
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    # When the incident closes
    close(world, incident_id, Outcome.REJECTED)
    # Then the operator's drain is theirs (the parsed reason is not exactly ours): kept
    assert slurm.node(HOST).reason == extended
    assert slurm.node(HOST).drained
    node = world.incident(incident_id).isolation.nodes[INSTANCE]
    assert (node.state, node.found_drain) == ("kept", extended)


def test_a_comment_that_reads_like_our_reason_does_not_pass_for_our_drain(commands, slurm):
    # Given a node in service whose comment (a field Slurm writes after the reason) carries
    # text that reads like our reason
    world = slurm_world(commands)
    incident_id = world.opened()
    slurm.scontrol(
        "update",
        f"nodename={HOST}",
        f"comment=x Reason={drain_reason(incident_id)} [a@2026-12-05T10:00:00]",
    )
    try:
        # When the incident isolates the node
        isolation.isolate_node(IncidentRef(incident_id), world.deps)
        # Then the node is drained with our reason: the comment is no reason field
        node = slurm.node(HOST)
        assert node.drained and node.reason == drain_reason(incident_id)
        assert world.incident(incident_id).isolation.nodes[INSTANCE].taint_added is True
    finally:
        slurm.scontrol("update", f"nodename={HOST}", "comment=")


def test_isolating_twice_drains_once_and_keeps_our_reason(commands, slurm):
    world = slurm_world(commands)
    incident_id = world.opened()
    ref = IncidentRef(incident_id)
    isolation.isolate_node(ref, world.deps)
    world.incident(incident_id)  # the record as the first attempt left it

    change = world.deps.slurm.drain(CONTROLLER, HOST, drain_reason(incident_id))

    assert change.outcome is DrainOutcome.ALREADY_OURS
    assert slurm.node(HOST).reason == drain_reason(incident_id)


def test_after_a_replacement_the_node_name_it_kept_is_back_in_service(commands, slurm):
    # Given a drained node, approved and replaced (the new instance keeps the host name)
    world = slurm_world(commands)
    incident_id = drained_approved_and_replaced(world)
    drained_during_replacement = slurm.node(HOST).reason
    # When the incident closes as replaced
    close(world, incident_id, Outcome.REPLACED)
    # Then the drain held until the replacement was done, and is lifted after it
    assert drained_during_replacement == drain_reason(incident_id)
    assert slurm.node(HOST).in_service
    node = world.incident(incident_id).isolation.nodes[INSTANCE]
    assert node.state == "gone"
    assert "replaced" in str(node.reason)


def test_a_replaced_node_that_was_kept_for_inspection_is_lifted_all_the_same(
    commands, slurm, monkeypatch
):
    # Given a node that would be kept for inspection (as a job-level incident keeps a node that
    # failed its health check), approved and replaced
    world = slurm_world(commands)
    incident_id = drained_approved_and_replaced(world)
    monkeypatch.setattr(
        isolation, "_kept_reason", lambda *_: "failed its deep health check: left for inspection"
    )
    # When the incident closes as replaced
    close(world, incident_id, Outcome.REPLACED)
    # Then the name the new instance kept is not left drained under our reason
    assert slurm.node(HOST).in_service
    assert world.incident(incident_id).isolation.nodes[INSTANCE].state == "gone"


class LateRunCommand:
    """The SSM Slurm port whose drain runs on the controller but answers too late."""

    def __init__(self, real: SsmSlurmControllers) -> None:
        self.real = real

    def drain(self, controller, node_name, reason):
        self.real.drain(controller, node_name, reason)
        raise SlurmUnreachable("drain: no result within 20 s (status InProgress)")

    def resume(self, controller, node_name, reason):
        return self.real.resume(controller, node_name, reason)


def test_a_drain_that_answered_too_late_is_lifted_when_the_incident_closes(commands, slurm):
    # Given a drain whose command ran on the controller after the wait for its result ended
    world = slurm_world(commands)
    world.slurm = LateRunCommand(world.slurm)
    incident_id = world.awaiting_approval(isolated=True)
    node = world.incident(incident_id).isolation.nodes[INSTANCE]
    assert (node.state, node.cause, node.node_name) == ("not_isolated", "unreachable", HOST)
    assert slurm.node(HOST).reason == drain_reason(incident_id)
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    # When the incident closes
    close(world, incident_id, Outcome.REJECTED)
    # Then our late drain is lifted, not left for good
    assert slurm.node(HOST).in_service
    assert world.incident(incident_id).isolation.nodes[INSTANCE].state == "released"


class SilentRunCommand:
    """The SSM Slurm port of a controller that never answers; counts the drains sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def drain(self, controller, node_name, reason):
        self.sent.append(node_name)
        raise SlurmUnreachable("drain: no result within 20 s (status InProgress)")

    def resume(self, controller, node_name, reason):
        raise SlurmUnreachable("resume: no result within 20 s (status InProgress)")


def test_after_one_silent_drain_the_other_nodes_of_the_incident_are_not_sent():
    world = slurm_world(None)
    world.slurm = silent = SilentRunCommand()
    others = [f"i-0f{n:015x}" for n in range(3)]
    for n, instance_id in enumerate(others):
        world.hyperpod.add_node(CLUSTER, "workers", instance_id, hostname=f"ip-10-9-0-{n}.x")
    incident_id = world.opened()
    incident = world.incident(incident_id)
    # a job-level incident over four nodes, as an ambiguous report opens one
    incident.scope, incident.instance_id = Scope.JOB, ""
    incident.instance_ids = [INSTANCE, *others]
    world.store.incidents[incident_id] = incident

    isolation.isolate_node(IncidentRef(incident_id), world.deps)

    assert silent.sent == [HOST]
    nodes = world.incident(incident_id).isolation.nodes
    assert {nodes[i].cause for i in others} == {"unreachable"}
    assert all("not sent" in str(nodes[i].reason) for i in others)
    assert all(nodes[i].node_name is None for i in others)


def test_a_reboot_in_progress_keeps_the_drain(commands, slurm):
    # Given a reboot that never returns (the node stays Pending)
    world = slurm_world(commands)
    world.hyperpod.set_reboot_returns(CLUSTER, INSTANCE, returns=False)
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "reboot"), world.deps)
    ref = IncidentRef(incident_id)
    recovery.reboot_node(ref, world.deps)
    recovery.check_reboot(ref, world.deps)
    # When the incident closes as failed mid-recovery
    close(world, incident_id, Outcome.FAILED)
    # Then, as a cordon would, the drain stays with our reason for reconciliation to settle
    node = world.incident(incident_id).isolation.nodes[INSTANCE]
    assert node.state == "isolated"
    assert slurm.node(HOST).reason == drain_reason(incident_id)


def test_an_unreachable_controller_leaves_the_node_not_isolated_and_the_flow_goes_on(
    commands, slurm
):
    commands.offline.add(CONTROLLER)
    world = slurm_world(commands)
    incident_id = world.opened()

    result = isolation.isolate_node(IncidentRef(incident_id), world.deps)

    assert result["isolated"] is False
    assert "unreachable" in str(result["reason"])
    assert slurm.node(HOST).in_service
    assert "node_not_isolated" in world.audit.actions(incident_id)


def test_a_node_the_controller_does_not_know_is_reported_not_found(commands):
    adapter = SsmSlurmControllers(lambda: commands, sleep=lambda _: None)

    with pytest.raises(SlurmNodeNotFound, match="ip-10-9-9-9"):
        adapter.drain(CONTROLLER, "ip-10-9-9-9", "sdc-remediation incident x")


def test_a_command_to_an_instance_that_is_not_a_controller_is_refused(commands):
    adapter = SsmSlurmControllers(lambda: commands, sleep=lambda _: None)

    with pytest.raises(SlurmUnreachable, match="InvalidInstanceId"):
        adapter.drain("i-0ddd000000000000d", HOST, "sdc-remediation incident x")


def test_a_reason_with_shell_characters_is_data_not_commands(commands, slurm):
    adapter = SsmSlurmControllers(lambda: commands, sleep=lambda _: None)
    reason = "sdc-remediation incident x'; scontrol update nodename=ip-10-1-69-243 state=drain #"

    adapter.drain(CONTROLLER, HOST, reason)

    assert slurm.node(HOST).reason == reason
    assert slurm.node(SLURM_NODES[1]).in_service


def test_the_card_names_the_drain_and_what_hyperpod_does_by_itself_on_slurm(commands):
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)

    text = cards.approval_card(world.incident(incident_id), world.settings).text

    assert f"drained on Slurm node {HOST} with reason '{drain_reason(incident_id)}'" in text
    assert '"Action:Replace"' in text
    assert "NOT isolated" not in text


def test_the_card_reports_an_operators_drain_and_the_closing_notice_leaves_it(commands, slurm):
    slurm.drain(HOST, OPERATOR_REASON)
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)

    text = cards.approval_card(world.incident(incident_id), world.settings).text
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    close(world, incident_id, Outcome.REJECTED)

    assert f"drained by someone else on Slurm node {HOST}" in text
    assert OPERATOR_REASON in text
    notice = world.notifier.published[-1].message
    assert f"{HOST}: drained by someone else ('{OPERATOR_REASON}'): left as it is" in notice


def test_the_closing_notice_says_the_node_was_resumed(commands):
    world = slurm_world(commands)
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "reject"), world.deps)

    close(world, incident_id, Outcome.REJECTED)

    notice = world.notifier.published[-1].message
    assert f"Isolation: Slurm node {HOST} ({INSTANCE}) resumed, our drain lifted." in notice


class _NeverDone:
    """Run Command that accepts a command and never finishes it."""

    def send_command(self, **_):
        return {"Command": {"CommandId": "c-1"}}

    def get_command_invocation(self, **_):
        return {"Status": "InProgress"}


def test_a_command_with_no_result_in_time_is_unreachable_not_a_hang():
    adapter = SsmSlurmControllers(lambda: _NeverDone(), wait_seconds=0, sleep=lambda _: None)

    with pytest.raises(SlurmUnreachable, match="no result within"):
        adapter.drain(CONTROLLER, HOST, "sdc-remediation incident x")


def test_output_without_the_scripts_lines_is_a_clear_error():
    with pytest.raises(SlurmError, match="printed no result"):
        parse_output(HOST, "bash: scontrol: command not found\n", "c-1")
