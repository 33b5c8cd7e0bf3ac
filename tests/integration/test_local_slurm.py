"""The local Slurm controller (infra/local/slurm.py) that the Slurm isolation is judged by: Debian's
slurmctld, nodes defined without a node daemon, drained and resumed by `scontrol`."""

from __future__ import annotations

import pytest

from sdc_remediation.infra.local import slurm as local_slurm
from sdc_remediation.infra.local.slurm import LocalSlurm, parse_node
from tests.integration.conftest import SLURM_NODES


def test_every_drill_node_is_defined_and_in_service(slurm: LocalSlurm) -> None:
    for name in SLURM_NODES:
        node = slurm.node(name)
        assert node.name == name
        assert node.in_service, node.state


def test_a_drain_shows_its_reason_and_a_resume_puts_the_node_back(slurm: LocalSlurm) -> None:
    # Given a node in service
    name = SLURM_NODES[0]
    # When an operator drains it and later resumes it
    slurm.drain(name, "operator: fan noise, ticket 1234")
    drained = slurm.node(name)
    slurm.resume(name)
    # Then the drain carried the reason and who set it, and the resume cleared both
    assert drained.drained and not drained.in_service
    assert drained.reason == "operator: fan noise, ticket 1234"
    assert drained.reason_user
    back = slurm.node(name)
    assert back.in_service and back.reason is None


def test_a_command_run_on_the_controller_reaches_it(slurm: LocalSlurm) -> None:
    # When a shell script (what Run Command carries) drains a node
    name = SLURM_NODES[1]
    result = slurm.run_shell(f"scontrol update nodename={name} state=drain reason='by script'")
    # Then the controller it reaches is this one
    assert result.returncode == 0, result.stderr
    assert slurm.node(name).reason == "by script"
    slurm.resume(name)


def test_an_unknown_node_is_refused_by_the_controller(slurm: LocalSlurm) -> None:
    result = slurm.run_shell("scontrol update nodename=ip-10-9-9-9 state=drain reason=x")
    assert result.returncode != 0
    assert "Invalid node name" in result.stderr


def test_a_line_that_is_not_a_node_is_refused() -> None:
    with pytest.raises(ValueError, match="scontrol -o show node"):
        parse_node("slurm_load_node error: Unable to contact slurm controller")


def test_without_the_packages_the_controller_refuses_and_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a machine without Debian's Slurm packages
    monkeypatch.setattr(local_slurm, "binaries", lambda: None)
    # Then starting a controller fails (never a skip), naming the packages
    starting = local_slurm.real_slurm(SLURM_NODES)
    with pytest.raises(local_slurm.SlurmNotInstalled, match="apt-get install -y slurmctld"):
        starting.__enter__()
