"""Shared adapter plumbing: lazy clients, request ids, ClientError → domain error, and plain
Python values ↔ DynamoDB attribute values."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Final

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from sdc_remediation.lambdas.models.errors import (
    AwsError,
    ConditionFailed,
    DependencyFailed,
    ServiceUnavailable,
    Throttled,
)

ClientFactory = Callable[[], Any]

CONNECT_TIMEOUT_SECONDS: Final = 2
READ_TIMEOUT_SECONDS: Final = 5
CALL_ATTEMPTS: Final = 2
"""Every AWS call of the functions: at most this many attempts (the SDK's standard retry mode),
each waiting at most the connect and read timeouts. The control-plane APIs the functions call
answer in well under a second; a call that hangs must end in time for the function to record
it (`worst_call_seconds`, held against every function's timeout by the infra tests)."""

CLIENT_CONFIG = Config(
    connect_timeout=CONNECT_TIMEOUT_SECONDS,
    read_timeout=READ_TIMEOUT_SECONDS,
    retries={"mode": "standard", "max_attempts": CALL_ATTEMPTS},
    user_agent_extra="sdc-remediation",
)

SDK_MAX_BACKOFF_SECONDS: Final = 20
SDK_RETRY_AFTER_EXTRA_SECONDS: Final = 5
"""The standard retry mode's backoff before attempt n+1: at most min(2**(n-1), 20) s, raised by
a service's `x-amz-retry-after` by at most 5 s more."""


def worst_call_seconds(config: Config = CLIENT_CONFIG) -> float:
    """The longest one AWS call can take with `config`: every attempt timing out on connect and
    read, with the longest backoff between attempts."""
    attempts = int((config.retries or {}).get("max_attempts", 1))
    per_attempt = float(config.connect_timeout) + float(config.read_timeout)
    backoff = sum(
        min(2 ** (n - 1), SDK_MAX_BACKOFF_SECONDS) + SDK_RETRY_AFTER_EXTRA_SECONDS
        for n in range(1, attempts)
    )
    return attempts * per_attempt + backoff


THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
    }
)


SERVICE_FAILURE_CODES = frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "InternalServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
    }
)
"""Failures on the service's side: worth another attempt later (ServiceUnavailable)."""


def client_factory(service: str, session: boto3.session.Session | None = None) -> ClientFactory:
    """A factory for a boto3 client, called on first use only (importing makes no AWS call)."""

    def build() -> Any:
        return (session or boto3.session.Session()).client(service, config=CLIENT_CONFIG)

    return build


class LazyClient:
    """Holds a client factory and builds the client once, on first use."""

    def __init__(self, factory: ClientFactory) -> None:
        self._factory = factory
        self._client: Any = None

    def get(self) -> Any:
        if self._client is None:
            self._client = self._factory()
        return self._client


class DynamoTable:
    """Base of the adapters that work on one DynamoDB table: its name and a lazy client."""

    def __init__(self, table_name: str, factory: ClientFactory | None = None) -> None:
        self.table_name = table_name
        self._client = LazyClient(factory or client_factory("dynamodb"))

    @property
    def client(self) -> Any:
        return self._client.get()


def request_id(response: Mapping[str, Any] | None) -> str | None:
    metadata = (response or {}).get("ResponseMetadata") or {}
    value = metadata.get("RequestId")
    return str(value) if value else None


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def translate(
    err: ClientError,
    operation: str,
    known: Mapping[str, type[AwsError]] | None = None,
) -> AwsError:
    """The domain error for a ClientError: `known` codes first, then throttling and condition
    failures, else DependencyFailed. Always carries the operation, code and request id."""
    code = error_code(err)
    message = str(err.response.get("Error", {}).get("Message", "")) or str(err)
    kind: type[AwsError]
    if known and code in known:
        kind = known[code]
    elif code in THROTTLING_CODES:
        kind = Throttled
    elif code in SERVICE_FAILURE_CODES or _status(err) >= 500:
        kind = ServiceUnavailable
    elif code == "ConditionalCheckFailedException":
        kind = ConditionFailed
    else:
        kind = DependencyFailed
    return kind(
        f"{operation} failed: {code}: {message}",
        operation=operation,
        code=code,
        request_id=request_id(err.response),
    )


def _status(err: ClientError) -> int:
    status = (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return int(status) if isinstance(status, int) else 0


@contextmanager
def aws_call(operation: str, known: Mapping[str, type[AwsError]] | None = None) -> Iterator[None]:
    """Translate botocore errors raised in the block into domain errors (`raise ... from`)."""
    try:
        yield
    except ClientError as err:
        raise translate(err, operation, known) from err
    except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError) as err:
        raise ServiceUnavailable(f"{operation} failed: {err}", operation=operation) from err
    except BotoCoreError as err:
        raise DependencyFailed(f"{operation} failed: {err}", operation=operation) from err


_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Plain Python (JSON types) → DynamoDB attribute values; floats become Decimals."""
    return {key: _serializer.serialize(_decimals(value)) for key, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values → plain Python: integral numbers int, others float."""
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


def _decimals(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _decimals(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decimals(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    return value


def pages(call: Any, operation: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a paginated DynamoDB Query or Scan, as plain Python values."""
    while True:
        with aws_call(operation):
            response = call(**kwargs)
        yield from (from_item(item) for item in response.get("Items", []))
        if "LastEvaluatedKey" not in response:
            return
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
