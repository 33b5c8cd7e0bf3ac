"""In-process routing for the local run: Lambda invocations and EventBridge rules.

moto's simple Lambda backend is the one place every invocation passes through (the state
machine interpreter's `lambda:invoke` tasks included); `handlers_in_process` replaces its
`invoke` so that the function's real handler runs here, with that function's environment, and
an exception comes back as a function error the state machine can Catch, as on AWS.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, cast

from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.events.models import EventPattern
from moto.stepfunctions.parser.utils import TMP_THREADS

from sdc_remediation.infra.local.lambda_context import LocalContext
from sdc_remediation.infra.local.metrics import EmfCapture
from sdc_remediation.infra.local.template import LocalStack


@dataclass
class Invocation:
    function: str
    handler: str
    event: Any
    started: float
    seconds: float
    result: Any = None
    error: dict[str, str] | None = None


@dataclass
class InvocationLog:
    calls: list[Invocation] = field(default_factory=list)
    _ended: threading.Condition = field(default_factory=threading.Condition)

    def handlers(self) -> list[str]:
        return [c.handler.split(".")[-2] for c in self.calls]

    def record(self, call: Invocation) -> None:
        with self._ended:
            self.calls.append(call)
            self._ended.notify_all()

    def wait_past(self, count: int, timeout: float) -> None:
        """Until more than `count` invocations have ended, or `timeout` seconds: what a handler
        saves is visible once its invocation ends, so a waiter reads again only then."""
        with self._ended:
            self._ended.wait_for(lambda: len(self.calls) > count, timeout=timeout)


class InvocationKilled(BaseException):
    """Raised inside a handler to end its invocation the way Lambda ends one at its timeout:
    not an Exception, so no handler code catches it and nothing more is recorded; the caller
    gets the function error `Sandbox.Timedout`, as a state machine's task does on AWS
    (`error_type` `States.Timeout`: the invocation's answer never came back within the task's
    own TimeoutSeconds)."""

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type or KILLED_ERROR_TYPE


KILLED_ERROR_TYPE = "Sandbox.Timedout"


_invoke_lock = threading.RLock()
_current = threading.local()


def invocation_handler() -> str | None:
    """The handler (`sdc_remediation.lambdas.handlers.<module>.handler`) this thread is running, while it runs
    one."""
    handlers: list[str] = getattr(_current, "handlers", [])
    return handlers[-1] if handlers else None


def invocation_environment() -> dict[str, str] | None:
    """The environment of the function this thread is running, while it runs one: read it
    instead of os.environ, which another thread may be setting or restoring."""
    stack: list[dict[str, str]] = getattr(_current, "stack", [])
    return stack[-1] if stack else None


@contextmanager
def handlers_in_process(
    stack: LocalStack,
    before_each: Callable[[], None] | None = None,
    *,
    emf: EmfCapture | None = None,
) -> Iterator[InvocationLog]:
    """While active, invoking a function of `stack` runs its handler in this process.

    Invocations are serialized (the state machine interpreter runs on its own thread) and each
    sees exactly its function's environment variables, as separate functions would. With `emf`,
    the metrics each invocation flushes are published into the account after it, outside its
    measured time (infra/local/metrics.py)."""
    log = InvocationLog()
    # Interpreter threads of an earlier run that are still alive must not reach this run's
    # handlers (they would act with that run's task tokens on this run's tables).
    # Thread objects, not idents: an ident is reused once its thread ends, and a new thread of
    # this run that got a dead stale thread's ident would be refused.
    stale = {thread for thread in TMP_THREADS if thread.is_alive()}
    by_name = {f.name: f for f in stack.functions.values()}
    by_arn = {f.arn: f for f in stack.functions.values()}
    original = LambdaSimpleBackend.invoke

    def invoke(
        self: Any,
        function_name: str,
        qualifier: Any,
        body: Any,
        headers: Any,
        response_headers: dict[str, str],
    ) -> str | bytes | None:
        function = by_name.get(function_name) or by_arn.get(function_name)
        if function is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        if threading.current_thread() in stale:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {"errorType": "StaleLocalRun", "errorMessage": "invoked from an ended local run"}
            ).encode()
        event = json.loads(body) if body else {}
        # The function's environment is this thread's (invocation_environment), never written
        # into os.environ: another thread may be reading it (building a boto3 client walks
        # os.environ for proxies), and a write mid-walk fails that read.
        with (
            _invoke_lock,
            _current_function(function),
            emf.for_function(function.environment) if emf else nullcontext(),
        ):
            if before_each:
                before_each()
            module_name, attr = function.handler.rsplit(".", 1)
            handler = getattr(importlib.import_module(module_name), attr)
            started = time.perf_counter()
            call = Invocation(function.name, function.handler, event, time.time(), 0.0)
            try:
                call.result = handler(event, LocalContext(function.name))
            except InvocationKilled as killed:
                call.error = {
                    "errorType": killed.error_type,
                    "errorMessage": f"Task timed out ({killed})",
                }
            except Exception as exc:
                call.error = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
            call.seconds = time.perf_counter() - started
            log.record(call)
        if emf:
            emf.publish()  # the account's doing (CloudWatch Logs), not the function's
        if call.error is not None:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(call.error).encode()
        return json.dumps(call.result).encode()

    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
    try:
        yield log
    finally:
        # An invocation may still be running (a wait returns as soon as its state is saved):
        # let it finish, metrics flushed and published, before the run goes away.
        with _invoke_lock:
            LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]


@contextmanager
def _current_function(function: Any) -> Iterator[None]:
    stack = getattr(_current, "stack", None)
    if stack is None:
        stack = _current.stack = []
    handlers = getattr(_current, "handlers", None)
    if handlers is None:
        handlers = _current.handlers = []
    stack.append(dict(function.environment))
    handlers.append(function.handler)
    try:
        yield
    finally:
        stack.pop()
        handlers.pop()


@dataclass
class Delivery:
    rule: str
    target: str
    ok: bool
    response: Any
    dead_lettered: bool = False


class EventBus:
    """Routes events by the deployed rules' patterns to their Lambda targets, the way EventBridge
    would: every matching rule, every target, asynchronously from the event's point of view; a
    target that fails is retried as Lambda retries an asynchronous invocation (the function's
    EventInvokeConfig), then lands in the dead-letter queue with the error."""

    def __init__(self, stack: LocalStack, session: Any) -> None:
        self.stack = stack
        self._lambda = session.client("lambda")
        self._sqs = session.client("sqs")
        self._patterns = {
            logical: EventPattern(json.dumps(rule.pattern), rule.pattern)
            for logical, rule in stack.rules.items()
        }

    def matching_rules(self, event: dict[str, Any]) -> list[str]:
        return [
            logical
            for logical, pattern in self._patterns.items()
            if pattern.matches_event(cast(Any, event))
        ]

    def put(self, event: dict[str, Any]) -> list[Delivery]:
        deliveries: list[Delivery] = []
        for logical in self.matching_rules(event):
            for target in self.stack.rules[logical].targets:
                function = next(
                    (f for f in self.stack.functions.values() if target["Arn"] in (f.arn, f.name)),
                    None,
                )
                # Lambda retries a failed asynchronous invocation (EventInvokeConfig), then
                # hands the event to the on-failure destination.
                for _ in range(1 + (function.async_retries if function else 0)):
                    response = self._lambda.invoke(
                        FunctionName=target["Arn"], Payload=json.dumps(event).encode()
                    )
                    payload = json.loads(response["Payload"].read() or b"null")
                    ok = "FunctionError" not in response
                    if ok:
                        break
                delivery = Delivery(logical, target["Arn"], ok, payload)
                if not ok:
                    dlq = (function.dead_letter_arn if function else None) or (
                        target.get("DeadLetterConfig") or {}
                    ).get("Arn")
                    delivery.dead_lettered = self._dead_letter(dlq, event, payload)
                deliveries.append(delivery)
        return deliveries

    def _dead_letter(self, arn: str | None, event: dict[str, Any], error: Any) -> bool:
        queue = next((q for q in self.stack.queues.values() if q["arn"] == arn), None)
        if queue is None:
            return False
        self._sqs.send_message(
            QueueUrl=queue["url"],
            MessageBody=json.dumps(event),
            MessageAttributes={
                "ERROR_CODE": {
                    "DataType": "String",
                    "StringValue": str((error or {}).get("errorType")),
                },
                "ERROR_MESSAGE": {
                    "DataType": "String",
                    "StringValue": str((error or {}).get("errorMessage"))[:1000],
                },
            },
        )
        return True


def new_event(
    detail_type: str, source: str, detail: dict[str, Any], *, region: str, account: str
) -> dict[str, Any]:
    """An EventBridge envelope around `detail`, as the bus delivers it to targets."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": region,
        "resources": [],
        "detail": detail,
    }
