"""A real Slurm controller for tests and the local run: Debian's `slurmctld` (with `munge` for
its authentication and `scontrol` to talk to it) in a temporary directory, with the drill's nodes
defined, on 127.0.0.1 and free ports.

    with real_slurm(["ip-10-1-69-242", "ip-10-1-69-243"]) as slurm:   # needs Debian's packages
        slurm.run_shell("scontrol update nodename=ip-10-1-69-242 state=drain reason=x")
        slurm.node("ip-10-1-69-242").drained                            # True

No slurmd runs: the nodes are defined as cloud nodes (`State=CLOUD`), powered down until a job
would need them, which is what lets the controller drain and resume them without a node daemon
answering (a node defined `State=UNKNOWN` goes NOT_RESPONDING, and `state=resume` on it is
refused). Nothing here ever submits a job, so nothing tries to power one up.

`run_shell` is how the local run's SSM stand-in runs a command "on the controller": a shell with
`SLURM_CONF` pointing at this controller's configuration, so `scontrol` reaches it.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sdc_remediation.lambdas.models.slurm import SlurmNodeState

SLURMCTLD: Final = "slurmctld"
SCONTROL: Final = "scontrol"
MUNGED: Final = "munged"
SBIN: Final = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
INSTALL_HINT: Final = (
    "Debian's Slurm packages are not installed (slurmctld, scontrol and munged not found): run "
    "`make test` (it installs them), or as root `apt-get update && apt-get install -y slurmctld "
    "slurm-client munge`"
)
CLUSTER_NAME: Final = "sdc-drill"
DRILL_CONTROLLER: Final = "i-0c0000000000000c1"
"""The controller instance id of the local run's Slurm cluster (what `sdc:slurmControllers`
names): Run Command's stand-in sends its commands to this controller."""


class SlurmNotInstalled(RuntimeError):
    """Debian's Slurm packages are missing: the message says what to install."""


class SlurmDidNotStart(RuntimeError):
    """munged or slurmctld did not come up: the message carries the daemon's own log."""


SlurmNode = SlurmNodeState
"""A node as the controller shows it (the parser the pipeline's adapter uses)."""


def parse_node(line: str) -> SlurmNode:
    """A node from one line of `scontrol -o show node <name>`."""
    return SlurmNodeState.parse(line)


@dataclass(frozen=True)
class ShellResult:
    returncode: int
    stdout: str
    stderr: str


class LocalSlurm:
    """A running controller: its configuration, and the shell that reaches it."""

    def __init__(self, root: Path, nodes: Sequence[str], scontrol: str) -> None:
        self.root = root
        self.nodes = tuple(nodes)
        self.conf = root / "slurm.conf"
        self._scontrol = scontrol

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run_shell(self, script: str, *, timeout: float = 30.0) -> ShellResult:
        """Run `script` with bash, as a command sent to the controller would run (its `scontrol`
        talks to this controller)."""
        done = subprocess.run(
            ["bash", "-c", script],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return ShellResult(done.returncode, done.stdout, done.stderr)

    def scontrol(self, *args: str) -> str:
        done = subprocess.run(
            [self._scontrol, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def node(self, name: str) -> SlurmNode:
        return parse_node(self.scontrol("-o", "show", "node", name).strip())

    def drain(self, name: str, reason: str) -> None:
        """What an operator would do by hand."""
        self.scontrol("update", f"nodename={name}", "state=drain", f"reason={reason}")

    def resume(self, name: str) -> None:
        self.scontrol("update", f"nodename={name}", "state=resume")

    def run_job(self, name: str) -> None:
        """A job on node `name` (with `jobs`: the node shows ALLOCATED while the drill runs)."""
        done = self.run_shell(f"sbatch -w {shlex.quote(name)} -N1 --wrap 'sleep 3600'")
        if done.returncode != 0:
            raise RuntimeError(f"sbatch on {name} failed: {done.stderr.strip()}")
        self._wait_until(name, lambda node: "ALLOCATED" in node.flags, "allocated")

    def reserve(self, reservation: str, name: str) -> None:
        """A maintenance reservation of node `name` (what HyperPod holds a node in while it
        checks it)."""
        self.scontrol(
            "create",
            "reservation",
            f"reservationname={reservation}",
            "starttime=now",
            "duration=UNLIMITED",
            f"nodes={name}",
            "flags=maint",
            f"users={pwd.getpwuid(os.getuid()).pw_name}",
        )
        self._wait_until(name, lambda node: "RESERVED" in node.flags, "reserved")

    def release(self, reservation: str, name: str) -> None:
        self.scontrol("delete", f"reservationname={reservation}")
        self._wait_until(name, lambda node: "RESERVED" not in node.flags, "out of reservation")

    def _wait_until(
        self, name: str, shown: Callable[[SlurmNode], bool], what: str, timeout: float = 15.0
    ) -> None:
        """The controller's scheduler applies a job or a reservation on its next pass: wait
        until `scontrol show node` shows it."""
        deadline = time.monotonic() + timeout
        while not shown(node := self.node(name)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} is not {what} after {timeout:.0f} s: {node.state}")
            time.sleep(0.2)


def binaries() -> tuple[str, str, str] | None:
    """(slurmctld, scontrol, munged), or None when any is missing."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    found = [shutil.which(name, path=path) for name in (SLURMCTLD, SCONTROL, MUNGED)]
    if any(f is None for f in found):
        return None
    slurmctld, scontrol, munged = found
    assert slurmctld and scontrol and munged
    return slurmctld, scontrol, munged


JOBS_CONF: Final = (
    "ResumeProgram=/bin/true",
    "SuspendProgram=/bin/true",
    "ResumeTimeout=3600",
    "SuspendTime=INFINITE",
)
"""With `jobs`: a job given a node powers it up (a no-op), and the node shows ALLOCATED for as
long as the drill runs (no slurmd ever registers; the resume waits an hour), as a busy node
of a real cluster shows while its job runs."""


def slurm_conf(
    root: Path,
    nodes: Sequence[str],
    *,
    user: str,
    host: str,
    port: int,
    munge_socket: Path,
    jobs: bool = False,
) -> str:
    """The controller's configuration: `nodes` as cloud nodes in one partition, every path
    under `root`, no accounting, no node daemons expected (`jobs`: `JOBS_CONF` too)."""
    lines = [
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmUser={user}",
        f"SlurmctldPort={port}",
        f"SlurmdPort={port + 1}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "CredType=cred/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        "SlurmctldDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/linear",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        # Cloud nodes are hidden from `scontrol show node` unless this is set.
        "PrivateData=cloud",
        *(f"NodeName={name} NodeAddr=127.0.0.1 CPUs=1 State=CLOUD" for name in nodes),
        "PartitionName=drill Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        *(JOBS_CONF if jobs else ()),
    ]
    return "\n".join(lines) + "\n"


@contextmanager
def real_slurm(
    nodes: Sequence[str], *, ready_timeout: float = 30.0, jobs: bool = False
) -> Iterator[LocalSlurm]:
    """munged and slurmctld in a fresh temporary directory, `nodes` defined, until the block
    ends (`jobs`: a job submitted to a node holds it ALLOCATED, `JOBS_CONF`). Raises
    SlurmNotInstalled or SlurmDidNotStart (with the daemon's log), never skips."""
    found = binaries()
    if found is None:
        raise SlurmNotInstalled(INSTALL_HINT)
    slurmctld, scontrol, munged = found
    with tempfile.TemporaryDirectory(prefix="sdc-slurm-") as scratch:
        root = Path(scratch)
        os.chmod(root, 0o700)
        (root / "state").mkdir()
        (root / "spool").mkdir()
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        munge_socket = root / "munge.sock"
        munge = _start(
            [
                munged,
                "--foreground",
                "--force",
                f"--socket={munge_socket}",
                f"--key-file={key}",
                f"--pid-file={root / 'munged.pid'}",
                f"--seed-file={root / 'munged.seed'}",
                f"--log-file={root / 'munged.log'}",
            ],
            root / "munged.out",
        )
        controller: subprocess.Popen[bytes] | None = None
        try:
            _wait_for(
                lambda: munge_socket.exists(), munge, root / "munged.out", "munged", ready_timeout
            )
            slurm = LocalSlurm(root, nodes, scontrol)
            slurm.conf.write_text(
                slurm_conf(
                    root,
                    nodes,
                    user=pwd.getpwuid(os.getuid()).pw_name,
                    host=socket.gethostname().split(".")[0],
                    port=_free_port_pair(),
                    munge_socket=munge_socket,
                    jobs=jobs,
                )
            )
            controller = _start(
                [slurmctld, "-D", "-i", "-f", str(slurm.conf)], root / "slurmctld.out"
            )
            _wait_for(
                lambda: _answers(slurm),
                controller,
                root / "slurmctld.out",
                "slurmctld",
                ready_timeout,
            )
            yield slurm
        finally:
            for process in (controller, munge):
                if process is not None:
                    _stop(process)


def _start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _answers(slurm: LocalSlurm) -> bool:
    try:
        slurm.scontrol("ping")
        return all(slurm.node(name) for name in slurm.nodes)
    except RuntimeError:
        return False


def _wait_for(
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    log: Path,
    name: str,
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SlurmDidNotStart(f"{name} exited with {process.returncode}: {_tail(log)}")
        if ready():
            return
        time.sleep(0.2)
    raise SlurmDidNotStart(f"{name} did not answer within {timeout:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


def _free_port_pair() -> int:
    """A free port whose successor is free too (slurmctld's and the unused slurmd port)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise SlurmDidNotStart("no two adjacent free ports on 127.0.0.1")
