"""What a long step of the drill is doing, and for how long: the first run builds the Lambda
asset (pip fetches its wheels once) and synthesizes the stack, a minute or two of otherwise
silent work. Each step prints a line when it starts and one with its elapsed time when it ends;
on a terminal a line in between counts the seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

TICK_SECONDS = 1.0


class Announcer:
    """Writes `<who>: <step> (<hint>) ...` and `<who>: <step>: done in <elapsed> s` to `stream`
    (stderr, so that `--json` output stays clean); `live`: count the seconds on the line in
    between."""

    def __init__(
        self,
        stream: TextIO,
        *,
        who: str = "drill",
        live: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream, self._who, self._live, self._clock = stream, who, live, clock
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        with self._lock:
            self._stream.write(text)
            self._stream.flush()

    @contextmanager
    def step(self, what: str, hint: str = "") -> Iterator[None]:
        started = self._clock()
        self._write(f"{self._who}: {what}{f' ({hint})' if hint else ''} ...\n")
        done = threading.Event()
        ticker = None
        if self._live:
            ticker = threading.Thread(
                target=self._tick, args=(what, started, done), name="drill-ticker", daemon=True
            )
            ticker.start()
        try:
            yield
        except BaseException:
            self._end(done, ticker)
            self._write(f"{self._who}: {what}: failed after {self._clock() - started:.1f} s\n")
            raise
        self._end(done, ticker)
        self._write(f"{self._who}: {what}: done in {self._clock() - started:.1f} s\n")

    def _tick(self, what: str, started: float, done: threading.Event) -> None:
        while not done.wait(TICK_SECONDS):
            self._write(f"\r\033[K… {what[:80]} ({self._clock() - started:.0f} s)")

    def _end(self, done: threading.Event, ticker: threading.Thread | None) -> None:
        done.set()
        if ticker is not None:
            ticker.join()
            self._write("\r\033[K")
