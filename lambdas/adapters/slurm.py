"""Slurm controllers through SSM Run Command: a short shell script (`AWS-RunShellScript`) sent to
the cluster's controller instance runs `scontrol` there and prints what it found and did.

The check and the change run in one script, on the controller, so that nothing else comes
between reading a node's reason and draining it (a drain reason someone else set is never
overwritten: Slurm has no conditional update, and this is the shortest window there is).

What the script prints, one line each: `sdc-before <scontrol -o show node>`, `sdc-outcome
<DrainOutcome>`, `sdc-after <scontrol -o show node>`. Exit 3: the controller knows no such node.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
)
from sdc_remediation.lambdas.models.errors import (
    AwsError,
    SlurmError,
    SlurmNodeNotFound,
    SlurmUnreachable,
)
from sdc_remediation.lambdas.models.slurm import (
    FREE_TEXT_KEYS,
    REASON_KEY,
    RUN_SHELL_SCRIPT,
    DrainChange,
    DrainOutcome,
    SlurmNodeState,
)

COMMAND_TIMEOUT_SECONDS: Final = 30
"""Run Command's own limits on a command: delivery (its minimum) and execution."""
WAIT_SECONDS: Final = 20
"""How long a drain or release waits for the command's result (scontrol answers in well under a
second; the rest is Run Command's delivery). No result by then: SlurmUnreachable, recorded, and
a retried step finds its own reason on the node."""
NODE_NOT_FOUND_EXIT: Final = 3
CONTROLLER_FAILED_EXIT: Final = 5
_DONE: Final = frozenset({"Success", "Failed", "Cancelled", "TimedOut"})

_SHOW = 'scontrol -o show node "$node"'
_MISSING_OR_UNREACHABLE = (
    f'case "$before" in *" not found"*) exit {NODE_NOT_FOUND_EXIT} ;; esac; '
    f"exit {CONTROLLER_FAILED_EXIT}"
)
"""`scontrol show node` fails for a node the controller does not know ("Node x not found") and
when it cannot reach slurmctld at all: only the first is a node gone; the second fails the
command (a release that can be retried), never reads as a missing node."""
_PATH = 'PATH="$PATH:/opt/slurm/bin"; SLURM_TIME_FORMAT=standard; export SLURM_TIME_FORMAT'
"""Where HyperPod installs Slurm on its nodes, in case the agent's shell does not have it; and
the time format of the stamp Slurm appends to a reason, whatever the environment says."""


_GLOB_TIME: Final = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
"""`models.slurm.STAMP_TIME` as a shell pattern."""
REASON_OF: Final = f"""reason_of() {{
  case "${{1%%"{REASON_KEY}"*}}" in {"|".join(f'*"{k}"*' for k in FREE_TEXT_KEYS)}) return 1 ;; esac
  case "$1" in *"{REASON_KEY}"*) ;; *) return 1 ;; esac
  rest=${{1#*"{REASON_KEY}"}}; reason=
  while case "$rest" in *" ["*) true ;; *) false ;; esac; do
    after=${{rest#*" ["}}
    case "$after" in *"]"*) case "${{after%%"]"*}}" in *@{_GLOB_TIME})
      printf '%s\\n' "$reason${{rest%%" ["*}}"; return 0 ;; esac ;; esac
    reason="$reason${{rest%%" ["*}} ["; rest=$after
  done
  return 1
}}"""
"""A POSIX shell function: the `Reason` field of a `scontrol -o show node` line, read step for
step as `models.slurm.reason_field` reads it (status 1: no reason). Ownership is then one
exact comparison with our reason, never a pattern over the line."""


def _escaped(text: str) -> str:
    """`text` as it must stand in a template that `str.format` fills in."""
    return text.replace("{", "{{").replace("}", "}}")


def _script(cases: str) -> str:
    """A script that reads the node (`sdc-before`) and its reason (`$found`, set only when it
    has one), acts by `cases` (a `case` on `$found`, printing `sdc-outcome`), and reads the node
    again (`sdc-after`); `{node}` and `{reason}` are filled in, quoted, by the caller."""
    return f"""set -u
{_PATH}
{_escaped(REASON_OF)}
node={{node}}
ours={{reason}}
before=$({_SHOW} 2>&1) || {{{{ echo "sdc-missing $before"; {_MISSING_OR_UNREACHABLE}; }}}}
echo "sdc-before $before"
found=$(reason_of "$before") && has_reason=yes || has_reason=no
case "$has_reason:$found" in
{cases}
esac
echo "sdc-after $({_SHOW})"
"""


_OURS = '"yes:$ours"'
"""The case arm of a reason that is exactly ours (quoted: no pattern in it)."""
_DRAIN_SCRIPT: Final = _script(
    f"""  {_OURS}) echo "sdc-outcome {DrainOutcome.ALREADY_OURS}" ;;
  yes:*) echo "sdc-outcome {DrainOutcome.FOREIGN}" ;;
  *) scontrol update nodename="$node" state=drain reason="$ours" || exit 4
     echo "sdc-outcome {DrainOutcome.DRAINED}" ;;"""
)
_RESUME_SCRIPT: Final = _script(
    f"""  {_OURS}) scontrol update nodename="$node" state=resume || exit 4
     echo "sdc-outcome {DrainOutcome.RESUMED}" ;;
  yes:*) echo "sdc-outcome {DrainOutcome.FOREIGN}" ;;
  *) echo "sdc-outcome {DrainOutcome.NOT_DRAINED}" ;;"""
)


def drain_script(node_name: str, reason: str) -> str:
    """The commands that drain `node_name` with `reason` unless it carries a reason already."""
    return _DRAIN_SCRIPT.format(node=shlex.quote(node_name), reason=shlex.quote(reason))


def resume_script(node_name: str, reason: str) -> str:
    """The commands that resume `node_name` only while its reason is exactly `reason`."""
    return _RESUME_SCRIPT.format(node=shlex.quote(node_name), reason=shlex.quote(reason))


def parse_output(node_name: str, stdout: str, command_id: str | None) -> DrainChange:
    """The script's printed lines as a DrainChange; SlurmError when they are not all there."""
    lines = dict(
        line.split(" ", 1)
        for line in stdout.splitlines()
        if line.startswith("sdc-") and " " in line
    )
    try:
        return DrainChange(
            node_name=node_name,
            outcome=DrainOutcome(lines["sdc-outcome"].strip()),
            before=SlurmNodeState.parse(lines["sdc-before"]),
            after=SlurmNodeState.parse(lines["sdc-after"]),
            command_id=command_id,
        )
    except (KeyError, ValueError) as err:
        raise SlurmError(
            f"the command on the controller printed no result for {node_name} ({err}): "
            f"{stdout[-500:]!r}"
        ) from err


NODES_SCRIPT: Final = f"""set -u
{_PATH}
scontrol -o show node | sed 's/^/sdc-node /'
"""
"""Every node on one line each (read only: what an idle sweep judges idleness by)."""


def parse_nodes(stdout: str) -> list[SlurmNodeState]:
    """The nodes `NODES_SCRIPT` printed; SlurmError for a line that is not a node."""
    try:
        return [
            SlurmNodeState.parse(line.removeprefix("sdc-node "))
            for line in stdout.splitlines()
            if line.startswith("sdc-node ")
        ]
    except ValueError as err:
        raise SlurmError(f"the controller printed a node line that does not parse: {err}") from err


class SsmSlurmControllers:
    """SendCommand (`AWS-RunShellScript`) to the controller instance, then GetCommandInvocation
    until the command is done or `wait_seconds` have passed."""

    def __init__(
        self,
        factory: ClientFactory | None = None,
        *,
        wait_seconds: float = WAIT_SECONDS,
        poll_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = LazyClient(factory or client_factory("ssm"))
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds
        self._sleep = sleep

    @property
    def client(self) -> Any:
        return self._client.get()

    def drain(self, controller: str, node_name: str, reason: str) -> DrainChange:
        return self._run(controller, node_name, drain_script(node_name, reason), "drain")

    def resume(self, controller: str, node_name: str, reason: str) -> DrainChange:
        return self._run(controller, node_name, resume_script(node_name, reason), "resume")

    def nodes(self, controller: str) -> list[SlurmNodeState]:
        invocation, command_id = self._send(controller, NODES_SCRIPT, "show nodes")
        if invocation.get("Status") != "Success":
            raise SlurmUnreachable(
                f"show nodes on controller {controller}: status {invocation.get('Status')} "
                f"(exit {invocation.get('ResponseCode')}; command {command_id}): "
                f"{str(invocation.get('StandardErrorContent') or '')[-300:]}"
            )
        return parse_nodes(str(invocation.get("StandardOutputContent") or ""))

    def _run(self, controller: str, node_name: str, script: str, verb: str) -> DrainChange:
        invocation, command_id = self._send(controller, script, f"{verb} {node_name}")
        status = invocation.get("Status")
        stdout = str(invocation.get("StandardOutputContent") or "")
        if status == "Success":
            return parse_output(node_name, stdout, command_id)
        if invocation.get("ResponseCode") == NODE_NOT_FOUND_EXIT:
            raise SlurmNodeNotFound(
                f"the controller of instance {controller} knows no node {node_name}: "
                f"{stdout.strip()[-300:]}"
            )
        if status in _DONE:
            raise SlurmError(
                f"{verb} {node_name} on controller {controller} ended {status} "
                f"(exit {invocation.get('ResponseCode')}): "
                f"{str(invocation.get('StandardErrorContent') or stdout)[-300:]}"
            )
        raise SlurmUnreachable(
            f"{verb} {node_name} on controller {controller}: no result within "
            f"{self.wait_seconds:.0f} s (status {status}; command {command_id})"
        )

    def _send(self, controller: str, script: str, what: str) -> tuple[dict[str, Any], str]:
        """Send `script` to the controller and wait for its invocation (what `_wait` returns)."""
        try:
            with aws_call("SendCommand"):
                sent = self.client.send_command(
                    InstanceIds=[controller],
                    DocumentName=RUN_SHELL_SCRIPT,
                    Parameters={
                        "commands": [script],
                        "executionTimeout": [str(COMMAND_TIMEOUT_SECONDS)],
                    },
                    TimeoutSeconds=COMMAND_TIMEOUT_SECONDS,
                    Comment=f"sdc-remediation: {what}"[:100],
                )
        except AwsError as err:
            raise SlurmUnreachable(f"SendCommand to controller {controller} failed: {err}") from err
        command_id = str(sent["Command"]["CommandId"])
        return self._wait(controller, command_id), command_id

    def _wait(self, controller: str, command_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.wait_seconds
        invocation: dict[str, Any] = {}
        while True:
            try:
                with aws_call("GetCommandInvocation"):
                    invocation = self.client.get_command_invocation(
                        CommandId=command_id, InstanceId=controller
                    )
            except AwsError as err:
                if err.code != "InvocationDoesNotExist":  # not registered yet, just after sending
                    raise SlurmUnreachable(
                        f"GetCommandInvocation of {command_id} failed: {err}"
                    ) from err
            if invocation.get("Status") in _DONE or time.monotonic() >= deadline:
                return invocation
            self._sleep(self.poll_seconds)


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import SlurmControllers

    _port: SlurmControllers = SsmSlurmControllers()
