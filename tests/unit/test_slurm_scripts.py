"""The scripts sent to a Slurm controller tell a node the controller does not know from a
controller that does not answer: only the first reads as a node gone (never retried); the
second fails the command, so a release is retried rather than our drain left for good."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sdc_remediation.lambdas.adapters.slurm import (
    CONTROLLER_FAILED_EXIT,
    NODE_NOT_FOUND_EXIT,
    REASON_OF,
    drain_script,
    resume_script,
)
from sdc_remediation.lambdas.models.slurm import SlurmNodeState, drain_reason, reason_field

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


NODE = "NodeName=ip-10-1-69-242 Arch=x86_64 State=IDLE+DRAIN"
AT = "2026-12-05T10:00:00"
OURS = drain_reason("sdc-x")
LINES = {
    "ours": f"{NODE} Reason={OURS} [root@2026-12-05T10:00:00]",
    "extends ours": f"{NODE} Reason={OURS} [hold: ops] [bob@2026-12-05T10:00:00]",
    "extends ours with an @": f"{NODE} Reason={OURS} x [hold: bob@ops] [bob@2026-12-05T10:00:00]",
    "extends ours with a bracket of its own": f"{NODE} Reason={OURS} [bob@ops] [bob@2026-12-05T10:00:00]",
    "no reason": f"{NODE} Partitions=drill",
    "a comment only": f"{NODE} Comment=x Reason={OURS} [a@{AT}]",
    "an extra only": f"{NODE} Extra=e Reason={OURS} [a@{AT}]",
    "reason and comment": f"{NODE} Reason=maint [root@{AT}] Comment=x Reason={OURS} [a@{AT}]",
    "shell characters": f"{NODE} Reason=$(id) `id` * ? \\ \"' [op@{AT}]",
    "no stamp": f"{NODE} Reason={OURS} [hold]",
}


def shell_reason(shell: str, line: str) -> str | None:
    done = subprocess.run(
        [shell, "-c", f'{REASON_OF}\nreason_of "$1"', "sh", line],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout[:-1] if done.returncode == 0 else None


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("case", sorted(LINES))
def test_the_controller_script_reads_the_reason_field_as_the_parser_does(shell, case):
    line = LINES[case]

    in_script = shell_reason(shell, line)

    parsed = reason_field(line)
    assert in_script == (parsed[0] if parsed else None)


def test_a_reason_that_extends_ours_is_not_ours():
    node = SlurmNodeState.parse(LINES["extends ours"])

    assert node.reason == f"{OURS} [hold: ops]"
    assert node.reason_user == "bob"


def test_an_operators_bracket_holding_an_at_sign_is_part_of_the_reason():
    node = SlurmNodeState.parse(LINES["extends ours with a bracket of its own"])

    assert node.reason == f"{OURS} [bob@ops]"


def test_text_after_a_free_text_field_is_no_reason():
    assert SlurmNodeState.parse(LINES["a comment only"]).reason is None
    assert SlurmNodeState.parse(LINES["reason and comment"]).reason == "maint"
