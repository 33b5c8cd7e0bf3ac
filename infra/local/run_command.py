"""SSM Run Command for the local run and the tests: `SendCommand` of `AWS-RunShellScript` to a
Slurm cluster's controller instance runs the script against the local Slurm controller
(infra/local/slurm.py), and `GetCommandInvocation` answers with what it printed. moto's SSM
records a sent command but runs nothing: this stand-in is what lets real Slurm judge the drain.

    commands = LocalRunCommand({"i-0c0000000000000c1": slurm})
    SsmSlurmControllers(lambda: commands)        # the adapter, unchanged, on the stand-in

It answers as Run Command does where the pipeline looks: an unknown instance is
`InvalidInstanceId`, another document `InvalidDocument`, an unknown command id
`InvocationDoesNotExist`; a controller marked `offline` accepts nothing (`InvalidInstanceId`,
as for an instance whose SSM agent is not connected).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from sdc_remediation.lambdas.models.slurm import RUN_SHELL_SCRIPT


class Shell(Protocol):
    def run_shell(self, script: str, *, timeout: float = 30.0) -> Any: ...


@dataclass(frozen=True)
class SentCommand:
    command_id: str
    instance_id: str
    document: str
    commands: tuple[str, ...]
    comment: str | None


def _error(operation: str, code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


class LocalRunCommand:
    """The two Run Command calls the Slurm adapter makes, boto3's shape, run against local
    controllers (instance id → a LocalSlurm, or anything with `run_shell`)."""

    def __init__(
        self,
        controllers: Mapping[str, Shell],
        *,
        observers: list[Callable[[str, dict[str, Any]], None]] | None = None,
    ) -> None:
        self.controllers = dict(controllers)
        self.offline: set[str] = set()
        self.sent: list[SentCommand] = []
        self.observers = observers if observers is not None else []
        """Told of every call (operation, parameters), as botocore's events tell of SDK calls."""
        self._ids = itertools.count(1)
        self._results: dict[tuple[str, str], dict[str, Any]] = {}

    def send_command(self, **params: Any) -> dict[str, Any]:
        self._tell("SendCommand", params)
        instances = list(params.get("InstanceIds") or [])
        document = params.get("DocumentName")
        if document != RUN_SHELL_SCRIPT:
            raise _error(
                "SendCommand", "InvalidDocument", f"document {document} is not served here"
            )
        unknown = [i for i in instances if i not in self.controllers or i in self.offline]
        if not instances or unknown:
            raise _error(
                "SendCommand", "InvalidInstanceId", f"instances not connected to SSM: {unknown}"
            )
        commands = tuple(params["Parameters"]["commands"])
        command_id = f"00000000-0000-4000-8000-{next(self._ids):012d}"
        for instance in instances:
            self.sent.append(
                SentCommand(command_id, instance, document, commands, params.get("Comment"))
            )
            result = self.controllers[instance].run_shell("\n".join(commands))
            self._results[(command_id, instance)] = {
                "CommandId": command_id,
                "InstanceId": instance,
                "DocumentName": document,
                "Status": "Success" if result.returncode == 0 else "Failed",
                "ResponseCode": result.returncode,
                "StandardOutputContent": result.stdout,
                "StandardErrorContent": result.stderr,
            }
        return {"Command": {"CommandId": command_id, "DocumentName": document, "Status": "Pending"}}

    def get_command_invocation(self, **params: Any) -> dict[str, Any]:
        self._tell("GetCommandInvocation", params)
        found = self._results.get((params["CommandId"], params["InstanceId"]))
        if found is None:
            raise _error(
                "GetCommandInvocation", "InvocationDoesNotExist", "no such command invocation"
            )
        return dict(found)

    def _tell(self, operation: str, params: dict[str, Any]) -> None:
        for observer in self.observers:
            observer(operation, params)
