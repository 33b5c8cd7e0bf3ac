"""The one call training code makes: `report(alarm)`.

Construction checks the configuration and raises early and loudly. After that nothing raises
into training code: `report()` delivers within its deadline or spools the complete report to
disk, logs one line naming the file, and returns a `ReportResult` the caller may inspect.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer_emitter import spool
from trainer_emitter.contract import MAX_EXACT_INTEGER, NAMESPACE
from trainer_emitter.mapping import Datapoint, Report, build_report
from trainer_emitter.rankmap import (
    RankInfo,
    RankMap,
    gather_rank_map,
    local_rank_info,
    process_rank,
)
from trainer_emitter.sinks import (
    AwsSink,
    DeliveryError,
    EmfSink,
    MemorySink,
    Sink,
    SinkName,
    sink_problem,
)

log = logging.getLogger("trainer_emitter")

DEFAULT_DEADLINE_SECONDS = 3.0
CLUSTER_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
NAMESPACE_RE = re.compile(r"^[0-9A-Za-z._/#: -]{1,255}$")
"""A CloudWatch namespace: 1 to 255 of the characters CloudWatch allows in one (letters, digits,
period, hyphen, underscore, slash, hash, colon and space), not starting with a colon (the API's
own pattern, `[^:].*`) and not in the `AWS/` namespaces, which are AWS's own
(`namespace_problem`)."""
RESERVED_NAMESPACE_PREFIX = "AWS/"
EMITTER_ARGUMENTS = ("config", "rank_map", "rank", "sink")
"""What `Emitter(...)` and `setup(...)` take besides the `EmitterConfig` settings."""


class ConfigurationError(ValueError):
    """The emitter cannot be built as configured; the message says which setting and why."""


@dataclass(frozen=True)
class EmitterConfig:
    """Settings, from arguments or the environment (argument wins):

    | setting         | environment          | default                     |
    |-----------------|----------------------|-----------------------------|
    | cluster_name    | SDC_CLUSTER_NAME     | required                    |
    | job_name        | SDC_JOB_NAME         | None                        |
    | region          | AWS_REGION, AWS_DEFAULT_REGION | required for sink "aws" |
    | endpoint_url    | SDC_ENDPOINT_URL     | the AWS endpoints           |
    | namespace       | SDC_NAMESPACE        | contract.NAMESPACE          |
    | deadline        | SDC_DEADLINE_SECONDS | 3.0                         |
    | spool_dir       | SDC_SPOOL_DIR        | $TMPDIR/sdc-spool           |
    | sink            | SDC_SINK             | "aws" ("emf", "memory")     |
    (`Emitter(sink=...)` and `setup(sink=...)` also take a sink object.)
    | event_bus       | SDC_EVENT_BUS        | "default"                   |
    | tokens_per_step | SDC_TOKENS_PER_STEP  | None (rollback in steps only) |
    """

    cluster_name: str
    job_name: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    namespace: str = NAMESPACE
    deadline: float = DEFAULT_DEADLINE_SECONDS
    spool_dir: Path = field(default_factory=lambda: Path(spool.default_spool_dir()))
    sink: SinkName = SinkName.AWS
    event_bus: str = "default"
    tokens_per_step: int | None = None
    """The tokens one optimizer step trains on (global batch size x sequence length): reports
    carry it, and the approval card gives the rollback in tokens as well as steps."""

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> EmitterConfig:
        env = os.environ if environ is None else environ
        unknown_setting(overrides)
        kept = {f.name for f in dataclasses.fields(cls)}
        if (misplaced := next((n for n in overrides if n not in kept), None)) is not None:
            raise ConfigurationError(
                f"{misplaced!r} is an argument of Emitter(...) and setup(...), not an EmitterConfig "
                "setting: pass it there"
            )
        given = {k: v for k, v in overrides.items() if v is not None}

        def pick(key: str, *names: str) -> Any:
            if key in given:
                return given[key]
            for name in names:
                if env.get(name):
                    return env[name]
            return None

        cluster = pick("cluster_name", "SDC_CLUSTER_NAME")
        if not cluster:
            raise ConfigurationError(
                "cluster name missing: pass cluster_name= or set SDC_CLUSTER_NAME to the "
                "HyperPod cluster's name"
            )
        if not CLUSTER_NAME_RE.match(str(cluster)):
            raise ConfigurationError(
                f"cluster name {cluster!r} is not a HyperPod cluster name "
                "(letters, digits and hyphens, at most 63 characters)"
            )
        deadline_raw = pick("deadline", "SDC_DEADLINE_SECONDS")
        try:
            deadline = DEFAULT_DEADLINE_SECONDS if deadline_raw is None else float(deadline_raw)
        except ValueError:
            raise ConfigurationError(
                f"deadline {deadline_raw!r} (SDC_DEADLINE_SECONDS) is not a number of seconds"
            ) from None
        if not (math.isfinite(deadline) and 0 < deadline <= 60):
            raise ConfigurationError(f"deadline {deadline!r} must be more than 0 and at most 60 s")
        sink = _sink_name(pick("sink", "SDC_SINK") or SinkName.AWS)
        region = pick("region", "AWS_REGION", "AWS_DEFAULT_REGION")
        if sink is SinkName.AWS and not region:
            raise ConfigurationError(
                "no AWS region: pass region= or set AWS_REGION (the region of the deployed pipeline)"
            )
        namespace = str(pick("namespace", "SDC_NAMESPACE") or NAMESPACE)
        if (problem := namespace_problem(namespace)) is not None:
            raise ConfigurationError(f"namespace {namespace!r} (SDC_NAMESPACE) {problem}")
        endpoint = pick("endpoint_url", "SDC_ENDPOINT_URL")
        if endpoint is not None and not re.match(r"^https?://", str(endpoint)):
            raise ConfigurationError(
                f"endpoint URL {endpoint!r} must start with http:// or https://"
            )
        spool_dir = pick("spool_dir", "SDC_SPOOL_DIR")
        tokens_per_step = _tokens_per_step(pick("tokens_per_step", "SDC_TOKENS_PER_STEP"))
        return cls(
            cluster_name=str(cluster),
            job_name=pick("job_name", "SDC_JOB_NAME"),
            region=region,
            endpoint_url=endpoint,
            namespace=namespace,
            deadline=deadline,
            spool_dir=Path(spool_dir) if spool_dir else Path(spool.default_spool_dir()),
            sink=sink,
            event_bus=str(pick("event_bus", "SDC_EVENT_BUS") or "default"),
            tokens_per_step=tokens_per_step,
        )


def setting_names() -> tuple[str, ...]:
    """Every keyword `Emitter(...)` and `setup(...)` take: the `EmitterConfig` settings and the
    emitter's own arguments."""
    return (*(f.name for f in dataclasses.fields(EmitterConfig)), *EMITTER_ARGUMENTS)


def unknown_setting(given: Mapping[str, Any]) -> None:
    """ConfigurationError naming the first keyword that is no setting, and the nearest one that
    is: a misspelled setting (`dead_line=5`) would otherwise be dropped without a word."""
    valid = setting_names()
    for name in given:
        if name in valid:
            continue
        nearest = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
        hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
        raise ConfigurationError(
            f"unknown setting {name!r}{hint} (the settings: {', '.join(valid)})"
        )


def namespace_problem(namespace: str) -> str | None:
    """Why CloudWatch would refuse `namespace` for the emitter's metrics, or None."""
    if not 1 <= len(namespace) <= 255:
        return "must be 1 to 255 characters long"
    if not NAMESPACE_RE.match(namespace):
        odd = sorted({c for c in namespace if not NAMESPACE_RE.match(c)})
        return (
            f"holds {', '.join(map(repr, odd))}: a CloudWatch namespace holds only letters, "
            "digits, period, hyphen, underscore, slash, hash, colon and space"
        )
    if namespace.startswith(":"):
        return "starts with a colon, which CloudWatch refuses"
    if not namespace.strip():
        return "is blank"
    if namespace.startswith(RESERVED_NAMESPACE_PREFIX):
        return f"is in {RESERVED_NAMESPACE_PREFIX!r}, the namespaces AWS keeps for its services"
    return None


def _tokens_per_step(value: object) -> int | None:
    """A whole number of tokens from 1 to MAX_EXACT_INTEGER (an argument, or the text of
    SDC_TOKENS_PER_STEP), or None when not given."""
    if value is None:
        return None
    tokens: object = value
    if isinstance(value, str):
        try:
            tokens = int(value.strip())
        except ValueError:
            tokens = value
    if (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or not 1 <= tokens <= MAX_EXACT_INTEGER
    ):
        raise ConfigurationError(
            f"tokens per step {value!r} (SDC_TOKENS_PER_STEP) must be a whole number of tokens "
            f"from 1 to {MAX_EXACT_INTEGER}: the global batch size times the sequence length"
        )
    return tokens


def _sink_name(value: object) -> SinkName:
    try:
        return SinkName(str(value))
    except ValueError:
        raise ConfigurationError(
            f"sink {value!r} (SDC_SINK) is not one of {', '.join(SinkName)}"
        ) from None


@dataclass
class ReportResult:
    """What `report()` did. `delivered` is True when every part arrived and the metrics held at
    least one datapoint; nothing sent is never delivered (`report(None)`, where `sent` and
    `pending` are both empty, or an alarm whose ranks map to no instance: its event may arrive,
    but no alarm can fire on it, and `errors` says why). Otherwise `spooled` says whether the
    complete report is safe on disk at `spool_path`."""

    report_id: str
    detail: dict[str, Any]
    datapoints: list[Datapoint]
    sent: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    spooled: bool = False
    spool_path: Path | None = None
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def delivered(self) -> bool:
        return bool(self.datapoints) and spool.METRICS_PART in self.sent and not self.pending

    @property
    def lost(self) -> bool:
        """True only if a part neither arrived nor reached the spool."""
        return bool(self.pending) and not self.spooled


class Emitter:
    def __init__(
        self,
        config: EmitterConfig | None = None,
        *,
        rank_map: RankMap | Iterable[RankInfo | Mapping[str, Any]] | None = None,
        rank: int | None = None,
        sink: Sink | str | None = None,
        **settings: Any,
    ) -> None:
        """Build from `config`, or from keyword settings and the environment (see EmitterConfig).

        `sink`: a sink name (as the `sink` setting) or an object with the `Sink` methods.
        `rank_map`: the job's all-gathered map, a list of entries, or None to learn it now
        (all-gathered when torch.distributed is initialized, otherwise this rank alone).
        `rank`: this process's global rank; by default torch.distributed's, else the launcher's
        (`process_rank`)."""
        if isinstance(sink, str):
            if config is not None:
                raise ConfigurationError(
                    f"sink {sink!r} names a sink while config= is given: set EmitterConfig.sink"
                )
            settings["sink"], sink = sink, None
        elif sink is not None and (problem := sink_problem(sink)) is not None:
            raise ConfigurationError(problem)
        if config is not None and settings:
            unknown_setting(settings)
            raise ConfigurationError(
                f"settings {', '.join(sorted(settings))} given with config=: set them on the "
                "EmitterConfig (they would be ignored)"
            )
        self.config = config or EmitterConfig.resolve(**settings)
        if rank_map is None:
            local = local_rank_info(rank)
            rank_map, rank = gather_rank_map(local), local.rank
        self.rank_map = rank_map if isinstance(rank_map, RankMap) else RankMap(rank_map)
        self.rank = rank if rank is not None else process_rank()
        self.sink: Sink = sink or self._make_sink()
        self.spool_path = spool.spool_file(spool.ensure_spool_dir(self.config.spool_dir), self.rank)

    def _make_sink(self) -> Sink:
        name = _sink_name(self.config.sink)  # an EmitterConfig built by hand is checked here
        if name is SinkName.EMF:
            return EmfSink()
        if name is SinkName.MEMORY:
            return MemorySink()
        # Each attempt is bounded so that retries fit inside the deadline; the deadline itself is
        # enforced around the whole delivery in report().
        per_attempt = max(self.config.deadline / 3, 0.2)
        return AwsSink(
            region=self.config.region,
            endpoint_url=self.config.endpoint_url,
            event_bus=self.config.event_bus,
            connect_timeout=per_attempt,
            read_timeout=per_attempt,
            max_attempts=3,
        )

    def build(self, alarm: object) -> Report:
        """The report for `alarm` without sending it (what `report()` would send)."""
        return build_report(
            alarm,
            self.rank_map,
            cluster_name=self.config.cluster_name,
            job_name=self.config.job_name,
            namespace=self.config.namespace,
            report_id=str(uuid.uuid4()),
            now=datetime.now(UTC),
            reporting_rank=self.rank,
            tokens_per_step=self.config.tokens_per_step,
        )

    def report(self, alarm: object) -> ReportResult:
        """Publish `alarm`; never raises, never blocks past the configured deadline.

        `None` (no check fired this step) is a no-op: no call, no datapoint, no event, so the
        training loop may pass whatever its checks return on every step. Its result says so:
        nothing sent, nothing pending."""
        if alarm is None:
            return ReportResult(report_id="", detail={}, datapoints=[])
        started = time.monotonic()
        try:
            built = self.build(alarm)
        except Exception as exc:  # a bug here must not stop training
            log.exception("sdc report could not be built from the alarm")
            return ReportResult(
                report_id="", detail={}, datapoints=[], errors=[f"report not built: {exc!r}"]
            )
        result = ReportResult(
            report_id=built.report_id,
            detail=built.detail,
            datapoints=built.datapoints,
            errors=built.errors,
        )
        for error in built.errors:
            log.error("sdc alarm problem (report %s): %s", built.report_id, error)
        try:
            self._deliver(built, result, started)
        except Exception as exc:
            log.exception("sdc report %s delivery raised", built.report_id)
            result.errors.append(f"delivery raised: {exc!r}")
            result.pending = [p for p in _parts(built) if p not in result.sent]
            self._spool(built, result, f"delivery raised: {exc!r}")
        result.elapsed = time.monotonic() - started
        return result

    def _deliver(self, built: Report, result: ReportResult, started: float) -> None:
        outcome = _Delivery(self.sink, self.config.namespace, built)
        worker = threading.Thread(target=outcome.run, name="sdc-report", daemon=True)
        worker.start()
        # A tenth of the deadline stays for building the spool line and writing it.
        budget = self.config.deadline * 0.9
        worker.join(max(budget - (time.monotonic() - started), 0.0))
        sent, failure = outcome.finish()
        result.sent = sent
        result.pending = [p for p in _parts(built) if p not in sent]
        if not result.pending and not built.datapoints:
            reason = "no datapoint: no rank of the alarm maps to an instance"
            result.errors.append(f"not delivered: {reason}; only the event was sent")
            log.error(
                "sdc report %s NOT delivered: %s; only the event was sent", built.report_id, reason
            )
            return
        if not result.pending:
            log.info(
                "sdc report %s delivered: %d datapoints, 1 event",
                built.report_id,
                len(built.datapoints),
            )
            return
        reason = failure or f"deadline of {self.config.deadline:g} s passed"
        result.errors.append(reason)
        self._spool(built, result, reason)

    def _spool(self, built: Report, result: ReportResult, reason: str) -> None:
        try:
            spool.append(self.spool_path, built, self.config.namespace, result.pending, reason)
        except Exception as exc:
            log.error(
                "sdc report %s NOT delivered (%s) and NOT spooled (%s): %s",
                built.report_id,
                reason,
                exc,
                built.detail,
            )
            result.errors.append(f"spool write failed: {exc!r}")
            return
        result.spooled = True
        result.spool_path = self.spool_path
        log.warning(
            "sdc report %s not delivered (%s); spooled to %s, re-send with sdc-replay-spool",
            built.report_id,
            reason,
            self.spool_path,
        )


def _parts(built: Report) -> list[str]:
    """The parts of `built` to send: the metrics only when there is a datapoint to put."""
    return [p for p in spool.PARTS if p != spool.METRICS_PART or built.datapoints]


class _Delivery:
    """One report's delivery on a worker thread. Once the caller stops waiting, the worker starts
    no further part, so a part is either sent or spooled, never both."""

    def __init__(self, sink: Sink, namespace: str, built: Report) -> None:
        self._sink, self._namespace, self._built = sink, namespace, built
        self._lock = threading.Lock()
        self._abandoned = False
        self._sent: list[str] = []
        self._failure: str | None = None

    def run(self) -> None:
        steps = {
            spool.METRICS_PART: lambda: self._sink.put_metrics(
                self._namespace, self._built.datapoints
            ),
            spool.EVENT_PART: lambda: self._sink.put_event(self._built.detail),
        }
        for part in _parts(self._built):
            send = steps[part]
            with self._lock:
                if self._abandoned:
                    return
            try:
                send()
            except DeliveryError as exc:
                with self._lock:
                    self._failure = self._failure or str(exc)
                continue
            except Exception as exc:  # an unexpected error is a failed part, not a crash
                with self._lock:
                    self._failure = self._failure or f"{part}: {exc!r}"
                continue
            with self._lock:
                if not self._abandoned:
                    self._sent.append(part)

    def finish(self) -> tuple[list[str], str | None]:
        with self._lock:
            self._abandoned = True
            return list(self._sent), self._failure


_default: Emitter | None = None


def setup(**settings: Any) -> Emitter:
    """Build the process-wide emitter (call once at job start, after init_process_group)."""
    global _default
    _default = Emitter(**settings)
    return _default


def report(alarm: object) -> ReportResult:
    """Report `alarm` with the emitter from `setup()`, or one built from the environment."""
    emitter = _default or setup()
    return emitter.report(alarm)
