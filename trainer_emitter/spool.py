"""The local spool: reports that could not be delivered, one JSON line each, re-sent later.

A record keeps the complete report, its datapoints and which parts are still pending, so a
replay delivers exactly what was missing, once: delivered records leave the file, records that
fail again stay, and lines that cannot be read move to `<file>.rejected` rather than vanish.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer_emitter.mapping import Datapoint, Report
from trainer_emitter.sinks import DeliveryError, Sink

log = logging.getLogger("trainer_emitter")

SPOOL_VERSION = 1
PARTS = ("metrics", "event")


def spool_file(spool_dir: Path, rank: int | None) -> Path:
    """One file per rank, so ranks sharing a volume never interleave their lines."""
    return spool_dir / f"sdc-spool.rank{rank if rank is not None else 'x'}.{os.getpid()}.jsonl"


def append(path: Path, report: Report, namespace: str, pending: Sequence[str], reason: str) -> None:
    record = {
        "spool_version": SPOOL_VERSION,
        "spooled_at": datetime.now(UTC).isoformat(),
        "reason": reason,
        "namespace": namespace,
        "pending": list(pending),
        "datapoints": [d.to_json() for d in report.datapoints],
        "report": report.detail,
    }
    line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    # No fsync: the line must survive the training process, which the page cache ensures; an
    # fsync on a busy disk can take longer than the whole delivery deadline.
    with _locked(path, "a") as handle:
        handle.write(line)
        handle.flush()


@dataclass
class ReplayResult:
    delivered: list[str] = field(default_factory=list)
    still_pending: list[str] = field(default_factory=list)
    rejected_lines: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.still_pending and not self.rejected_lines


def replay(paths: Sequence[Path], sink: Sink) -> ReplayResult:
    """Send every pending part of every record in `paths` (files, or folders of `*.jsonl`)."""
    result = ReplayResult()
    for path in _spool_files(paths):
        result.files.append(path)
        with _locked(path, "r+") as handle:
            keep: list[str] = []
            rejected: list[str] = []
            for line in handle.read().splitlines():
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    report_id = record["report"]["report_id"]
                    pending = _send(record, sink)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("spool line in %s cannot be read (%s); moved to .rejected", path, exc)
                    rejected.append(line)
                    continue
                if pending:
                    record["pending"] = pending
                    keep.append(json.dumps(record, separators=(",", ":")))
                    result.still_pending.append(report_id)
                else:
                    result.delivered.append(report_id)
            if rejected:
                result.rejected_lines += len(rejected)
                with path.with_suffix(path.suffix + ".rejected").open("a") as bad:
                    bad.write("\n".join(rejected) + "\n")
            handle.seek(0)
            handle.truncate()
            if keep:
                handle.write("\n".join(keep) + "\n")
        if not keep:
            path.unlink(missing_ok=True)
    return result


def _send(record: dict[str, Any], sink: Sink) -> list[str]:
    pending = [p for p in record.get("pending", PARTS) if p in PARTS]
    still: list[str] = []
    for part in pending:
        try:
            if part == "metrics":
                points = [Datapoint.from_json(d) for d in record["datapoints"]]
                if points:
                    sink.put_metrics(record["namespace"], points)
            else:
                sink.put_event(record["report"])
        except DeliveryError as exc:
            log.warning(
                "replay of report %s, part %s, failed: %s", record["report"]["report_id"], part, exc
            )
            still.append(part)
    return still


def _spool_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(path.glob("*.jsonl"))
        elif path.exists():
            yield path


@contextmanager
def _locked(path: Path, mode: str) -> Iterator[Any]:
    """An exclusive lock, so a replay and a training process appending never interleave."""
    with path.open(mode, encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def main(argv: Sequence[str] | None = None) -> int:
    """`sdc-replay-spool [PATH ...]`: re-send spooled reports; exit 0 only if all arrived."""
    from trainer_emitter.sinks import AwsSink

    parser = argparse.ArgumentParser(prog="sdc-replay-spool", description=main.__doc__)
    parser.add_argument(
        "paths", nargs="*", type=Path, help="spool files or folders (default: $SDC_SPOOL_DIR)"
    )
    parser.add_argument(
        "--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    parser.add_argument("--endpoint-url", default=os.environ.get("SDC_ENDPOINT_URL"))
    parser.add_argument("--event-bus", default=os.environ.get("SDC_EVENT_BUS", "default"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    paths = args.paths or [Path(os.environ.get("SDC_SPOOL_DIR", default_spool_dir()))]
    if not args.region:
        parser.error("no AWS region: pass --region or set AWS_REGION")
    sink = AwsSink(
        region=args.region,
        endpoint_url=args.endpoint_url,
        event_bus=args.event_bus,
        connect_timeout=5,
        read_timeout=10,
        max_attempts=5,
    )
    result = replay(paths, sink)
    print(
        json.dumps(
            {
                "delivered": result.delivered,
                "still_pending": result.still_pending,
                "rejected_lines": result.rejected_lines,
                "files": [str(p) for p in result.files],
            },
            indent=2,
        )
    )
    return 0 if result.ok else 1


def default_spool_dir() -> str:
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), "sdc-spool")


if __name__ == "__main__":
    sys.exit(main())
