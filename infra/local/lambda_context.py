"""The Lambda context object, for running a function's handler in-process (the local run, tests).

It carries what Powertools reads of a context (name, version, ARN, memory, request id, log group
and stream, the time left), named after the function the way Lambda names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import uuid4

from sdc_remediation.infra.stack.template import ACCOUNT, REGION


@dataclass(frozen=True)
class LocalContext:
    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid4()))
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000
