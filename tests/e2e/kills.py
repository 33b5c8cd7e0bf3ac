"""Killing a function mid-invocation in a local run, the way Lambda ends one.

A `Kill` names the function (its handler module), the port call it is killed around and the
point: `before` the call (killed at its timeout while waiting to make it: `Sandbox.Timedout`),
`after` it (the call acted; the function's process dies before it saves the answer:
`Runtime.ExitError`), `after_save` (the answer saved; killed before the audit entry and the
rest), or `timeout` (the call reached the service, which acted, and hung until Lambda killed
the function at its timeout: `Sandbox.Timedout`). Step Functions' own `States.Timeout` (a task's
TimeoutSeconds) cannot come from a handler; its retry is checked on the definitions
(tests/infra/test_workflow.py). The kill fires on the first `times` invocations that reach the call (once by
default); the retries after that run normally.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from sdc_remediation.infra.local.routing import InvocationKilled, invocation_handler
from sdc_remediation.lambdas.handlers import _deps

POINTS: Final = ("before", "after", "after_save", "timeout")


@dataclass
class Kill:
    function: str
    """The handler module, e.g. `reboot_node`."""
    port: str
    """The Deps field whose call is the external action, e.g. `hyperpod`."""
    method: str
    point: str
    times: int = 1
    fired: list[str] = field(default_factory=list)
    """What the kill did, once it fired (empty: the call was never reached)."""

    @property
    def name(self) -> str:
        return f"{self.function}:{self.method}:{self.point}"


class _Killing:
    """The port, with `method` killed at `kill.point` (while the kill has not fired yet)."""

    def __init__(self, inner: Any, kill: Kill, armed: dict[str, bool]) -> None:
        self._inner, self._kill, self._armed = inner, kill, armed

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        kill = self._kill
        if name != kill.method or self._armed.get("done"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if kill.point == "before":
                self._die("killed before the call", f"before {name}")
            result = attr(*args, **kwargs)
            if kill.point == "after":
                self._die("the process died after the call", f"after {name}", "Runtime.ExitError")
            if kill.point == "timeout":
                self._die("timed out in the call", f"in {name}")
            self._armed["save"] = True  # after_save: the next incident save ends it
            return result

        return call

    def _die(self, what: str, message: str, error_type: str | None = None) -> None:
        self._kill.fired.append(what)
        self._armed["done"] = True
        raise InvocationKilled(message, error_type)


class _KillingSaves:
    def __init__(self, inner: Any, kill: Kill, armed: dict[str, bool]) -> None:
        self._inner, self._kill, self._armed = inner, kill, armed

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "save":
            return attr

        def save(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if self._armed.get("save") and not self._armed.get("done"):
                self._kill.fired.append("killed after the save")
                self._armed["done"] = True
                raise InvocationKilled("after the save")
            return result

        return save


@contextmanager
def killing(kill: Kill) -> Iterator[Kill]:
    """While active, the first `kill.times` invocations of `kill.function` that reach the call
    die there."""
    source = _deps._override
    assert source is not None and not isinstance(source, _deps.Deps), "inside a LocalRun only"
    handler = f"sdc_remediation.lambdas.handlers.{kill.function}.handler"

    def per_invocation() -> _deps.Deps:
        deps = source()
        if len(kill.fired) >= kill.times or invocation_handler() != handler:
            return deps
        armed: dict[str, bool] = {}
        changes: dict[str, Any] = {kill.port: _Killing(getattr(deps, kill.port), kill, armed)}
        if kill.point == "after_save":
            changes["incidents"] = _KillingSaves(
                changes.get("incidents", deps.incidents), kill, armed
            )
        return dataclasses.replace(deps, **changes)

    _deps.set_deps(per_invocation)
    try:
        yield kill
    finally:
        _deps.set_deps(source)
