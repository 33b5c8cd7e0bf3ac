"""SSM Parameter Store: the pause switch, read on every guarded step (no deploy to flip it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
)


class SsmPauseSwitch:
    """`GetParameter` of one String parameter; the logic interprets the value."""

    def __init__(self, parameter_name: str, factory: ClientFactory | None = None) -> None:
        self.parameter_name = parameter_name
        self._client = LazyClient(factory or client_factory("ssm"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def read(self) -> str | None:
        with aws_call("GetParameter"):
            response = self.client.get_parameter(Name=self.parameter_name)
        return str(response["Parameter"]["Value"])


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import PauseSwitch

    _port: PauseSwitch = SsmPauseSwitch("/sdc/paused")
