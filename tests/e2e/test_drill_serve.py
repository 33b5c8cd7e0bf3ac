"""`make drill ARGS=--serve`, as a person runs it: the drill serves the local account at the
approval, a decision comes from `sdc` in another process, and the account stays served after
the scenario ends, so the `sdc show` the decision's answer suggests still works; its HTTP request
log goes to a file, never the terminal; SIGTERM (as Ctrl-C) stops it cleanly."""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.synth]

STARTED_WITHIN = 300.0
"""Seconds the drill may take to reach the approval (a first synth of the stack included)."""
STEP_WITHIN = 120.0
STOPPED_WITHIN = 30.0


class Lines:
    """The drill's stdout, line by line, as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        stream = process.stdout
        assert stream is not None

        def pump() -> None:
            for line in stream:
                self._lines.put(line.rstrip("\n"))
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def until(self, pattern: str, within: float) -> re.Match[str]:
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no line matching {pattern!r}; the drill said:\n" + self.text)

    @property
    def text(self) -> str:
        return "\n".join(self.seen)


def sdc(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sdc_remediation.infra.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_WITHIN,
        check=False,
    )


@pytest.fixture
def served(tmp_path: Path):
    """The drill with --serve on a free port, run where its files land in `tmp_path`; stopped
    (and, failing that, killed) at the end."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sdc_remediation.infra.local.drill", "--serve", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process, Lines(process), env
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=STOPPED_WITHIN)


def test_with_serve_a_decision_then_sdc_show_works_and_the_drill_stops_on_sigterm(served, tmp_path):
    process, lines, env = served
    # Given the drill waiting for a decision at the served account
    exported = lines.until(
        r"export (AWS_ACCESS_KEY_ID=\S+ AWS_SECRET_ACCESS_KEY=\S+)", STARTED_WITHIN
    )
    for pair in shlex.split(exported.group(1)):
        name, _, value = pair.partition("=")
        env[name] = value
    env["AWS_DEFAULT_REGION"] = "us-west-2"
    show = lines.until(r"sdc (--endpoint-url \S+ --outputs \S+) show (\S+)", STEP_WITHIN)
    where, incident_id = shlex.split(show.group(1)), show.group(2)
    lines.until(r"Waiting for the decision", STEP_WITHIN)

    # When someone approves from another process, and the scenario runs to its end
    approved = sdc(env, tmp_path, *where, "approve", incident_id, "-m", "looks bad")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    lines.until(r"stays served at", STEP_WITHIN)

    # Then `sdc show` still reads the served account
    shown = sdc(env, tmp_path, *where, "show", incident_id)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"Incident {incident_id}" in shown.stdout and "\nISOLATION\n" in shown.stdout
    # and the request log went to its file, not to the terminal
    log = (tmp_path / ".drill" / "serve.log").read_text()
    assert "POST / HTTP/1.1" in log
    assert "HTTP/1.1" not in lines.text

    # When it is sent SIGTERM, it stops by itself, cleanly
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=STOPPED_WITHIN) in (0, 1)  # the scenario's verdict, not a crash
    lines.until(r"Stopping: the served account shuts down", 1)
