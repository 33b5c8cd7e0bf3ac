"""A long set-up step that talks: `make` runs pip through it, so the first run, which installs
for minutes, never goes more than `TICK_SECONDS` without a line.

Standard library only: `make` runs it with the system Python, before `.venv` exists,

    python3 -m sdc_remediation.infra.stack.steps "installing the dev extras" -- .venv/bin/python -m pip install ...

It says what the step does, then, while the command runs, at most one line per `TICK_SECONDS`:
the time so far and the last line the command printed (pip's `Collecting torch==2.13.0`,
`Installing collected packages: ...`), and at the end how long it took. The command's own output
is not echoed: on a failure its last lines go to stderr, with its exit status.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, TextIO

TICK_SECONDS: Final = 8.0
"""The longest silence while a step runs (the goal is about 10 s)."""
TAIL_LINES: Final = 40
"""How much of a failed command's output is shown."""
PREFIX: Final = "make: "


def run_step(
    what: str,
    command: Sequence[str],
    *,
    out: TextIO,
    err: TextIO,
    tick: float = TICK_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run `command`, talking on `out` as the module says; its exit status."""
    start = clock()
    print(f"{PREFIX}{what} ...", file=out, flush=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
    except OSError as error:
        print(f"{PREFIX}{what}: cannot run {command[0]}: {error.strerror}", file=err, flush=True)
        return 127
    assert process.stdout is not None
    reader = threading.Thread(target=_read, args=(process.stdout, tail), daemon=True)
    reader.start()
    while True:
        try:
            process.wait(timeout=tick)
            break
        except subprocess.TimeoutExpired:
            latest = next((line for line in reversed(tail) if line), "")
            said = f": {_short(latest)}" if latest else ""
            print(f"{PREFIX}  ... {clock() - start:.0f} s{said}", file=out, flush=True)
    reader.join()
    took = clock() - start
    if process.returncode != 0:
        print(f"{PREFIX}{what}: failed after {took:.0f} s; the last lines:", file=err)
        for line in tail:
            print(f"  {line}", file=err)
        err.flush()
        return process.returncode
    print(f"{PREFIX}{what}: done in {took:.0f} s", file=out, flush=True)
    return 0


def _read(stream: TextIO, tail: deque[str]) -> None:
    for line in stream:
        tail.append(line.rstrip())


def _short(line: str, width: int = 100) -> str:
    line = " ".join(line.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m sdc_remediation.infra.stack.steps", description=__doc__.splitlines()[0]
    )
    parser.add_argument("what", help="what the step does, said before and after it")
    parser.add_argument("--tick", type=float, default=TICK_SECONDS, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    return run_step(args.what, command, out=sys.stdout, err=sys.stderr, tick=args.tick)


if __name__ == "__main__":
    sys.exit(main())
