"""The scripts sent to a Slurm controller tell a node the controller does not know from a
controller that does not answer: only the first reads as a node gone (never retried); the
second fails the command, so a release is retried rather than our drain left for good."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lambdas.adapters.slurm import (
    CONTROLLER_FAILED_EXIT,
    NODE_NOT_FOUND_EXIT,
    drain_script,
    resume_script,
)
from lambdas.models.slurm import SlurmNodeState, drain_reason

SCRIPTS = {"drain": drain_script, "resume": resume_script}


def run_with_scontrol(tmp_path: Path, script: str, says: str) -> int:
    """Run `script` under sh with an `scontrol` that prints `says` and fails."""
    fake = tmp_path / "scontrol"
    fake.write_text(f"#!/bin/sh\necho '{says}' >&2\nexit 1\n")
    fake.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", script],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode


@pytest.mark.parametrize("verb", sorted(SCRIPTS))
def test_a_node_the_controller_does_not_know_exits_as_not_found(tmp_path, verb):
    script = SCRIPTS[verb]("ip-10-1-69-242", drain_reason("sdc-x"))

    code = run_with_scontrol(tmp_path, script, "Node ip-10-1-69-242 not found")

    assert code == NODE_NOT_FOUND_EXIT


@pytest.mark.parametrize("verb", sorted(SCRIPTS))
def test_a_controller_that_does_not_answer_is_no_missing_node(tmp_path, verb):
    script = SCRIPTS[verb]("ip-10-1-69-242", drain_reason("sdc-x"))

    code = run_with_scontrol(
        tmp_path, script, "slurm_load_node error: Unable to contact slurm controller"
    )

    assert code == CONTROLLER_FAILED_EXIT


def test_the_reason_ends_at_the_first_user_and_time_slurm_writes_after_it():
    line = (
        "NodeName=ip-10-1-69-242 Arch=x86_64 State=IDLE+DRAIN Reason=maint [root@2026-12-05T10:00:00]"
        " Comment=see [alice@elsewhere]"
    )

    node = SlurmNodeState.parse(line)

    assert (node.reason, node.reason_user) == ("maint", "root")
