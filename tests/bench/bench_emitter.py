"""The emitter as training code feels it: latency to a live endpoint, the bound when AWS is
unreachable, and the cost of a step where nothing fired."""

from __future__ import annotations

import logging
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from moto.server import ThreadedMotoServer

from sdc_remediation.infra.local.drill.scenarios import RANK_MAP
from sdc_remediation.infra.local.drill.scenarios import REPLAY_CULPRIT as ALARM
from trainer_emitter import Emitter, MemorySink
from trainer_emitter.mapping import Datapoint

REGION = "us-west-2"
CALLS = 200
DEADLINE = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _emitter(spool: str, **settings: Any) -> Emitter:
    return Emitter(
        cluster_name="bench-cluster",
        region=REGION,
        rank=0,
        rank_map=RANK_MAP,
        spool_dir=spool,
        deadline=DEADLINE,
        **settings,
    )


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run() -> list[dict[str, Any]]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as spool:
        port = _free_port()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request in the table
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            live = _emitter(spool, endpoint_url=f"http://127.0.0.1:{port}")
            live.report(ALARM)  # clients and connections warm
            latencies = []
            for _ in range(CALLS):
                result = live.report(ALARM)
                assert result.delivered, result.errors
                latencies.append(result.elapsed)
        finally:
            server.stop()
        median, p99 = statistics.median(latencies), _percentile(latencies, 0.99)
        rows += [
            {
                "name": f"report() to a local server, median of {CALLS}",
                "value": median * 1000,
                "unit": "ms",
                "ratio": median / DEADLINE,
                "goal": "ratio = median / deadline, well under 1",
            },
            {
                "name": f"report() to a local server, p99 of {CALLS}",
                "value": p99 * 1000,
                "unit": "ms",
                "ratio": p99 / DEADLINE,
                "goal": "< 1 (never spools when AWS answers)",
            },
        ]

        refused = _emitter(spool, endpoint_url=f"http://127.0.0.1:{_free_port()}")
        worst_refused = max(refused.report(ALARM).elapsed for _ in range(20))
        rows.append(
            {
                "name": "report() to a closed port, worst of 20",
                "value": worst_refused,
                "unit": "s",
                "ratio": worst_refused / DEADLINE,
                "goal": "≤ 1.1 x deadline",
            }
        )

        with _silent_server() as silent_port:
            silent = _emitter(spool, endpoint_url=f"http://127.0.0.1:{silent_port}")
            worst_silent = max(silent.report(ALARM).elapsed for _ in range(5))
        rows.append(
            {
                "name": "report() to a server that never answers, worst of 5",
                "value": worst_silent,
                "unit": "s",
                "ratio": worst_silent / DEADLINE,
                "goal": "≤ 1.1 x deadline",
            }
        )

    counting = _CountingSink()
    quiet = Emitter(
        cluster_name="bench-cluster", region=REGION, rank=0, rank_map=RANK_MAP, sink=counting
    )
    steps = 100_000
    started = time.perf_counter()
    for _ in range(steps):
        quiet.report(None)
    per_step = (time.perf_counter() - started) / steps
    rows += [
        {
            "name": "calls to AWS on steps where nothing fired",
            "value": counting.calls,
            "unit": f"calls in {steps:,} steps",
            "ratio": None,
            "goal": "0",
        },
        {
            "name": "report(None) per step",
            "value": per_step * 1e6,
            "unit": "µs",
            "ratio": None,
            "goal": "negligible next to a training step",
        },
    ]
    return rows


class _CountingSink(MemorySink):
    calls = 0

    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None:
        self.calls += 1

    def put_event(self, detail: dict[str, Any]) -> None:
        self.calls += 1


class _silent_server:
    """Accepts connections and never answers."""

    def __enter__(self) -> int:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.1)
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        return int(self.server.getsockname()[1])

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                continue

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(1)
        for conn in self.held:
            conn.close()
        self.server.close()


if __name__ == "__main__":
    for row in run():
        print(row)
