"""A Lambda context for running handlers in-process (tests, the local drill)."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import uuid4


@dataclass
class LocalContext:
    function_name: str = "sdc-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:111122223333:function:sdc-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid4()))
    log_group_name: str = "/aws/lambda/sdc-local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000
