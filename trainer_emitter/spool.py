"""The local spool: reports that could not be delivered, one JSON line each, re-sent later.

A record keeps the complete report, its datapoints and which parts are still pending, so a
replay delivers exactly what was missing, once: delivered records leave the file, records that
fail again stay, lines that cannot be read move to `<file>.rejected` and records that are not a
valid report (`report_schema()`) to `<file>.invalid`, rather than vanish or be sent.

The spool folder is the user's own (`ensure_spool_dir`): created 0700, and refused when it is a
link, owned by someone else, or writable by group or others, since whoever can write there
chooses what `sdc-replay-spool` sends with the training role. The replay refuses, by the same
check (`check_spool_dir`) and before sending anything, every folder it would read from. Files
are opened without following links (`O_NOFOLLOW`), and created with `O_EXCL`.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import logging
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from trainer_emitter.contract import REPORT_SCHEMA_VERSIONS, report_schema
from trainer_emitter.mapping import Datapoint, Report
from trainer_emitter.sinks import DeliveryError, Sink

log = logging.getLogger("trainer_emitter")

SPOOL_VERSION = 1
REFUSED_EXIT = 3
"""`sdc-replay-spool`'s exit status when a folder it would read from is refused."""
METRICS_PART = "metrics"
EVENT_PART = "event"
PARTS = (METRICS_PART, EVENT_PART)
"""A report's parts, in the order they are sent."""


class SpoolError(OSError):
    """The spool folder or a spool file is not safe to use: names it and why."""


def ensure_spool_dir(spool_dir: Path) -> Path:
    """The spool folder, created 0700 when missing; raises SpoolError when it is not one this
    user may use (`check_spool_dir`)."""
    with suppress(FileExistsError):
        spool_dir.mkdir(mode=0o700, parents=True)
    return check_spool_dir(spool_dir)


def check_spool_dir(spool_dir: Path) -> Path:
    """`spool_dir` when this user may use it as a spool; raises SpoolError when it is a link,
    not a folder, owned by another user, or writable by group or others. The writer's check
    (`ensure_spool_dir`) and the replay's are this one: a replay reads only what the emitter
    would have written."""
    try:
        info = os.lstat(spool_dir)
    except FileNotFoundError as err:
        raise SpoolError(f"spool folder {spool_dir} does not exist") from err
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SpoolError(f"spool folder {spool_dir} is not a folder (a link or a file): refused")
    if info.st_uid != os.geteuid():
        raise SpoolError(
            f"spool folder {spool_dir} is owned by uid {info.st_uid}, not by this user "
            f"({os.geteuid()}): refused; use a folder of your own (SDC_SPOOL_DIR)"
        )
    if info.st_mode & 0o022:
        raise SpoolError(
            f"spool folder {spool_dir} is writable by group or others "
            f"({stat.filemode(info.st_mode)}): refused; chmod 700 it or use another"
        )
    return spool_dir


def _open(path: Path, mode: str) -> Any:
    """`path` opened without following a link: "a" creates it (0600, `O_EXCL`) when missing,
    "r+" and "r" need it to exist."""
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if mode == "a":
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
        except FileExistsError:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | nofollow)
    else:
        fd = os.open(path, (os.O_RDWR if mode == "r+" else os.O_RDONLY) | nofollow)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SpoolError(f"spool file {path} is not a regular file: refused")
    return os.fdopen(fd, mode, encoding="utf-8")


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
    ensure_spool_dir(path.parent)
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
    invalid: list[str] = field(default_factory=list)
    """Records whose report is not a valid report: set aside in `<file>.invalid`, not sent."""
    files: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.still_pending and not self.rejected_lines and not self.invalid


def replay(paths: Sequence[Path], sink: Sink) -> ReplayResult:
    """Send every pending part of every record in `paths` (files, or folders of `*.jsonl`).
    Raises SpoolError, before anything is sent, when a folder read from (a given folder, or a
    given file's) is one the emitter would refuse to write to (`check_spool_dir`)."""
    result = ReplayResult()
    files = list(_spool_files(paths))
    given = {path for path in paths if path.is_dir() and not path.is_symlink()}
    for folder in sorted(given | {path.parent for path in files}):
        check_spool_dir(folder)  # a given folder is refused even when it holds no file yet
    for path in files:
        result.files.append(path)
        with _locked(path, "r+") as handle:
            keep: list[str] = []
            rejected: list[str] = []
            invalid: list[str] = []
            for line in handle.read().splitlines():
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    report_id = str(record["report"]["report_id"])
                    problem = _invalid(record)
                    if problem is not None:
                        log.error(
                            "spool record %s in %s is not a valid report (%s); moved to .invalid",
                            report_id[:100],
                            path,
                            problem,
                        )
                        invalid.append(line)
                        result.invalid.append(report_id)
                        continue
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
                with _open(path.with_suffix(path.suffix + ".rejected"), "a") as bad:
                    bad.write("\n".join(rejected) + "\n")
            if invalid:
                with _open(path.with_suffix(path.suffix + ".invalid"), "a") as aside:
                    aside.write("\n".join(invalid) + "\n")
            handle.seek(0)
            handle.truncate()
            if keep:
                handle.write("\n".join(keep) + "\n")
        if not keep:
            path.unlink(missing_ok=True)
    return result


def _invalid(record: dict[str, Any]) -> str | None:
    """Why the record cannot be re-sent (its report against the report schema, its pending
    parts and datapoints against what the emitter writes), or None."""
    report = record["report"]
    version = report.get("schema_version") if isinstance(report, dict) else None
    if version not in REPORT_SCHEMA_VERSIONS:
        return f"schema_version: {version!r} is not one of {', '.join(REPORT_SCHEMA_VERSIONS)}"
    validate, error = _report_validator(version)
    try:
        validate(report)
    except error as err:
        return f"{getattr(err, 'name', 'report')}: {getattr(err, 'message', err)}"
    if not isinstance(record.get("namespace"), str) or not record["namespace"]:
        return "namespace: not a string"
    datapoints = record.get("datapoints")
    if not isinstance(datapoints, list):
        return "datapoints: not a list"
    try:
        for d in datapoints:
            Datapoint.from_json(d)
    except (KeyError, TypeError, ValueError) as err:
        return f"datapoints: {err!r}"
    return None


@cache
def _report_validator(version: str) -> tuple[Any, type[Exception]]:
    """The report schema of `version` (`trainer_emitter/schemas`), compiled once per replay."""
    import fastjsonschema

    # a copy: fastjsonschema rewrites the refs of what it compiles, and report_schema() is shared
    schema = copy.deepcopy(report_schema(version))
    return fastjsonschema.compile(schema), fastjsonschema.JsonSchemaException


def _send(record: dict[str, Any], sink: Sink) -> list[str]:
    pending = [p for p in record.get("pending", PARTS) if p in PARTS]
    still: list[str] = []
    for part in pending:
        try:
            if part == METRICS_PART:
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
        if path.is_dir() and not path.is_symlink():
            yield from sorted(p for p in path.glob("*.jsonl") if not p.is_symlink())
        elif path.exists() or path.is_symlink():
            yield path  # a link is refused when it is opened


@contextmanager
def _locked(path: Path, mode: str) -> Iterator[Any]:
    """An exclusive lock, so a replay and a training process appending never interleave."""
    with _open(path, mode) as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def build_parser() -> argparse.ArgumentParser:
    """`sdc-replay-spool`'s options, each with its help (`--help`)."""
    from trainer_emitter.version import __version__

    parser = argparse.ArgumentParser(
        prog="sdc-replay-spool",
        allow_abbrev=False,
        description="Re-send the reports a training rank could not deliver and spooled "
        "(sdc-spool.rank<R>.<pid>.jsonl): only the parts still pending (metrics, event), so each "
        "arrives once. Delivered records leave the file; records that fail again stay; unreadable "
        "lines move to <file>.rejected and records that are not a valid report to "
        "<file>.invalid. Prints what happened as JSON. Needs the training role's "
        "cloudwatch:PutMetricData and events:PutEvents.",
        epilog="Exit status: 0 every record arrived (or there was none); 1 a record is still "
        "pending, rejected or invalid; 2 usage (no region); 3 refused: a folder read from is "
        "one the emitter refuses to write to (a link, another user's, or writable by group or "
        "others), nothing sent.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="spool files, or folders whose *.jsonl files are read (default: $SDC_SPOOL_DIR, "
        f"else {default_spool_dir()})",
    )
    parser.add_argument(
        "--region",
        default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        help="AWS region of the deployed pipeline (default: $AWS_REGION, else "
        "$AWS_DEFAULT_REGION; required)",
    )
    parser.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=os.environ.get("SDC_ENDPOINT_URL"),
        help="send the calls here instead of the AWS endpoints, e.g. a local moto server "
        "(default: $SDC_ENDPOINT_URL)",
    )
    parser.add_argument(
        "--event-bus",
        metavar="NAME",
        default=os.environ.get("SDC_EVENT_BUS", "default"),
        help="EventBridge bus of the report events (default: $SDC_EVENT_BUS, else default)",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`sdc-replay-spool [PATH ...]`: re-send spooled reports; exit 0 only if all arrived."""
    from trainer_emitter.sinks import AwsSink

    parser = build_parser()
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
    try:
        result = replay(paths, sink)
    except SpoolError as err:
        print(f"sdc-replay-spool: {err}", file=sys.stderr)
        return REFUSED_EXIT
    print(
        json.dumps(
            {
                "delivered": result.delivered,
                "still_pending": result.still_pending,
                "rejected_lines": result.rejected_lines,
                "invalid": result.invalid,
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
