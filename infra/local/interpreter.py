"""moto's Step Functions interpreter, quicker for the local run and with the same outcome.

- Waits. moto's interpreter sleeps for real: a `Wait` state of n seconds blocks its thread n
  seconds, and so does the interval between two attempts of a `Retry`. The fake HyperPod
  counts polls, not seconds, so those waits only make a scenario take longer: here they last
  `wait_scale` times as long. A task's `TimeoutSeconds` (the approval's) stays in real time: a
  person may be answering it.
- Parsing. moto parses a definition again for every execution it starts (about half a second
  for the remediation machine); here each definition is parsed once, and each execution gets
  fresh evaluation components built from that parse tree.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
    WaitFunction,
)
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

_parse_trees: dict[str, Any] = {}
"""Definition → its parse tree (read only, so executions on several threads can share it)."""


@contextmanager
def local_interpreter(wait_scale: float) -> Iterator[None]:
    """Scaled waits and one parse per definition until the block ends."""
    original_wait = WaitFunction._wait_interval
    original_time = retrier_decl.time
    original_parse = AmazonStateLanguageParser.parse

    def wait_interval(self: WaitFunction, env: Any, wait_seconds: int) -> None:
        deadline = time.monotonic() + wait_seconds * wait_scale
        while env.is_running():  # a stopped execution ends its wait at once
            left = deadline - time.monotonic()
            if left <= 0:
                return
            env.program_state_event.wait(left)

    def parse(definition: str) -> tuple[Any, Any]:
        tree = _parse_trees.get(definition)
        if tree is None:
            program, tree = original_parse(definition)  # a bad definition raises here, as before
            _parse_trees[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    WaitFunction._wait_interval = wait_interval  # type: ignore[method-assign]
    retrier_decl.time = SimpleNamespace(sleep=lambda seconds: time.sleep(seconds * wait_scale))  # type: ignore[assignment]
    AmazonStateLanguageParser.parse = staticmethod(parse)  # type: ignore[method-assign]
    try:
        yield
    finally:
        WaitFunction._wait_interval = original_wait  # type: ignore[method-assign]
        retrier_decl.time = original_time
        AmazonStateLanguageParser.parse = staticmethod(original_parse)  # type: ignore[method-assign]
