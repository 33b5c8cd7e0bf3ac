"""How the watch times a step and its sections: marks taken on the training thread, turned into
seconds only when a window is published, so that timing never waits on the device mid-step.

- `WallTimer`: the host's clock (`time.perf_counter`), where the work runs on the CPU.
- `CudaEventTimer`: a CUDA event recorded on the current stream at each mark, read
  (`elapsed_time`) when the window is published, once its last event is done: what the GPU spent
  between the marks, where the host runs ahead of it. The time waiting in collectives left out of
  busy time is the watch's host-side measure (`CollectiveCounter.seconds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def mark(self) -> Any:
        """A point in time, taken on the training thread."""
        ...

    def seconds(self, start: Any, end: Any) -> float:
        """The seconds between two marks (may wait for the device to reach `end`)."""
        ...


class WallTimer:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock

    def mark(self) -> float:
        return self.clock()

    def seconds(self, start: float, end: float) -> float:
        return end - start


class CudaEventTimer:
    """`event`: makes an event to record (default: `torch.cuda.Event(enable_timing=True)`)."""

    def __init__(self, event: Callable[[], Any] | None = None) -> None:
        if event is None:
            import torch

            def event() -> Any:
                return torch.cuda.Event(enable_timing=True)

        self._event = event

    def mark(self) -> Any:
        event = self._event()
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0


def default_timer() -> Timer:
    """CUDA events where torch has a CUDA device, the host's clock otherwise."""
    try:
        import torch

        if torch.cuda.is_available():
            return CudaEventTimer()
    except ImportError:
        pass
    return WallTimer()
