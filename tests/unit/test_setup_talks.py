"""Set-up that talks: Node.js and npm checked up front with the version needed, in one line; the
drill's long first steps said out loud with their elapsed time."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from sdc_remediation.infra.local.drill.announce import Announcer
from sdc_remediation.infra.stack import toolchain
from sdc_remediation.infra.stack.toolchain import NODE_MAJOR, node_problem, npm_problem
from tests.conftest import REPO


def _which(*present: str):
    return lambda tool: f"/usr/bin/{tool}" if tool in present else None


@pytest.mark.parametrize(
    ("version", "wanted"),
    [
        ("v20.20.2", None),
        ("v24.1.0", None),
        ("v18.19.1", "Node.js 20 or newer is needed; /usr/bin/node is v18.19.1"),
        ("something", "`/usr/bin/node --version` said 'something'"),
    ],
)
def test_node_is_checked_for_the_version_the_cdk_needs(version, wanted):
    problem = node_problem(_which("node"), lambda node: version)

    if wanted is None:
        assert problem is None
    else:
        assert problem is not None and wanted in problem


def test_a_missing_node_says_what_to_install_in_one_line():
    problem = node_problem(_which(), lambda node: "v20.0.0")

    assert problem is not None and "\n" not in problem
    assert f"Node.js {NODE_MAJOR} or newer is needed" in problem
    assert "apt-get install nodejs npm" in problem


def test_npm_and_npx_are_both_needed():
    assert npm_problem(_which("npm", "npx")) is None
    assert "`npx` is not on PATH" in (npm_problem(_which("npm")) or "")
    assert "`npm` and `npx` are not on PATH" in (npm_problem(_which()) or "")


def test_the_readme_states_the_node_version_the_check_wants():
    readme = (REPO / "README.md").read_text()

    assert f"Node.js ≥ {NODE_MAJOR}" in readme


def test_the_check_runs_without_the_venv_and_prints_one_line(tmp_path):
    # Given a PATH with neither node nor npm, and no site-packages (-S: what .venv holds)
    done = subprocess.run(
        [
            sys.executable,
            "-E",
            "-S",
            "-m",
            "sdc_remediation.infra.stack.toolchain",
            "--npm",
            "--for",
            "make synth",
        ],
        cwd=REPO,
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"make synth: Node.js {NODE_MAJOR} or newer is needed (the CDK runs on it) and `node` "
        f"is not on PATH: {toolchain.INSTALL_HINT}"
    ]


@pytest.mark.parametrize("target", ["synth", "deploy"])
def test_make_checks_node_before_it_runs_the_cdk_cli(target):
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", target, "-o", ".venv/.installed", "-o",
         "node_modules/.installed"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip

    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    check = next(
        i for i, line in enumerate(lines) if "sdc_remediation.infra.stack.toolchain --npm" in line
    )
    cdk = next(i for i, line in enumerate(lines) if "npx --no-install cdk" in line)
    assert check < cdk


def test_the_drill_without_node_stops_with_one_line(tmp_path, monkeypatch, capsys):
    from sdc_remediation.infra.local.drill.__main__ import main

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

    status = main(["--scenario", "replay-culprit"])

    assert status == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"make drill: Node.js {NODE_MAJOR} or newer is needed")


class _Clock:
    def __init__(self, *readings: float) -> None:
        self._readings = list(readings)

    def __call__(self) -> float:
        return self._readings.pop(0)


def test_a_step_says_what_it_does_then_how_long_it_took():
    stream = io.StringIO()
    announcer = Announcer(stream, clock=_Clock(100.0, 124.94))

    with announcer.step("synthesizing the stack", "the first time, 10 to 30 s"):
        pass

    assert stream.getvalue().splitlines() == [
        "drill: synthesizing the stack (the first time, 10 to 30 s) ...",
        "drill: synthesizing the stack: done in 24.9 s",
    ]


def test_a_failed_step_says_so_with_its_time_and_the_error_goes_on():
    stream = io.StringIO()
    announcer = Announcer(stream, clock=_Clock(0.0, 3.0))

    with pytest.raises(RuntimeError), announcer.step("building the Lambda asset"):
        raise RuntimeError("pip failed")

    assert stream.getvalue().splitlines()[-1] == (
        "drill: building the Lambda asset: failed after 3.0 s"
    )


def test_on_a_terminal_the_seconds_are_counted_while_a_step_runs(monkeypatch):
    import threading

    from sdc_remediation.infra.local.drill import announce

    monkeypatch.setattr(announce, "TICK_SECONDS", 0.01)
    stream = io.StringIO()
    announcer = Announcer(stream, live=True)
    ticked = threading.Event()
    original = announcer._write

    def write(text: str) -> None:
        original(text)
        if text.startswith("\r\033[K…"):
            ticked.set()

    monkeypatch.setattr(announcer, "_write", write)

    with announcer.step("synthesizing the stack"):
        assert ticked.wait(5)

    # Then the counting line was written, and cleared before the last line
    assert "\r\033[K… synthesizing the stack (0 s)" in stream.getvalue()
    assert re.search(
        r"\r\033\[Kdrill: synthesizing the stack: done in \d+\.\d s\n$", stream.getvalue()
    )


@pytest.mark.parametrize(
    ("context", "said"),
    [
        ({"sdc:clusterz": {}}, "sdc settings: unknown context key(s) sdc:clusterz; known keys:"),
        (
            {"sdc:approvalTimeoutSeconds": "soon"},
            "sdc settings: context key sdc:approvalTimeoutSeconds='soon': expected an integer",
        ),
    ],
)
def test_a_bad_setting_from_the_command_line_is_one_line_without_a_traceback(
    context, said, tmp_path
):
    # Given the app as the CDK CLI runs it (cdk.json's `app`), with the context it passes
    import json
    import os

    done = subprocess.run(
        [sys.executable, "-m", "sdc_remediation.infra.stack.app"],
        cwd=REPO,
        env={
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": str(tmp_path / "cdk.out"),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": str(NODE_MAJOR),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )

    # Then it fails with the one line naming the key, and no traceback
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("sdc settings:")]
    assert line.startswith(said)


def test_a_long_step_says_it_is_still_going_with_the_commands_latest_line():
    from sdc_remediation.infra.stack.steps import run_step

    # Given a command that works for a while and says what it does, as pip does
    command = [
        sys.executable,
        "-c",
        "import time; print('Collecting torch==2.13.0', flush=True); time.sleep(1.2);"
        "print('Installing collected packages: torch', flush=True); time.sleep(1.2)",
    ]
    out, err = io.StringIO(), io.StringIO()

    # When it runs as a set-up step that talks at least every 0.3 s
    status = run_step("installing the dev extras", command, out=out, err=err, tick=0.3)

    # Then it is announced, each silence is broken with the time and the latest line, and the
    # end says how long it took
    lines = out.getvalue().splitlines()
    assert status == 0 and err.getvalue() == ""
    assert lines[0] == "make: installing the dev extras ..."
    ticks = lines[1:-1]
    assert any(t.endswith(" s: Collecting torch==2.13.0") for t in ticks)
    assert any(t.endswith(" s: Installing collected packages: torch") for t in ticks)
    assert all(re.fullmatch(r"make:   \.\.\. \d+ s(: .+)?", t) for t in ticks)
    assert re.fullmatch(r"make: installing the dev extras: done in \d+ s", lines[-1])


def test_a_failed_step_shows_the_commands_last_lines_and_its_status():
    from sdc_remediation.infra.stack.steps import run_step

    command = [
        sys.executable,
        "-c",
        "import sys; print('ERROR: No matching distribution found for nosuch==1'); sys.exit(3)",
    ]
    out, err = io.StringIO(), io.StringIO()

    status = run_step("installing", command, out=out, err=err, tick=5)

    assert status == 3
    assert err.getvalue().splitlines() == [
        "make: installing: failed after 0 s; the last lines:",
        "  ERROR: No matching distribution found for nosuch==1",
    ]


@pytest.mark.parametrize("stamp", [".venv/.installed", "node_modules/.installed"])
def test_every_install_of_the_set_up_runs_as_a_step_that_talks(stamp):
    from sdc_remediation.infra.stack import steps

    # Given the set-up recipes as make would run them on a fresh machine
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", "-B", stamp],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then each install (pip, npm) runs through the talking step, and none is told to be quiet
    assert planned.returncode == 0, planned.stderr
    commands = planned.stdout.replace("\\\n", " ").splitlines()  # continued lines joined
    installs = [c for c in commands if "pip install" in c or "npm ci" in c]
    assert installs
    for line in installs:
        assert re.search(rf"-m {re.escape(steps.__name__)} \"[^\"]+\" --\s+\S", line), line
        assert "--quiet" not in line and "--loglevel=error" not in line, line
