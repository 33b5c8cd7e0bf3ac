"""The contract: the names the training side and the AWS side must agree on.

The emitter, the CDK stack and the Lambda functions all import this module; nothing here is
retyped anywhere else. It depends on the standard library only, so the Lambda asset and the
CDK app can import it without pulling in boto3 clients.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, Final

NAMESPACE: Final = "SDC/Training"
"""CloudWatch namespace of the SDC metrics (a deployment may override it, both sides alike)."""

DIMENSIONS: Final = ("ClusterName", "InstanceId")
"""The exact dimension set. Anything else (rank, job, step, verdict) is evidence, not a dimension:
every dimension combination is a billed custom metric and Metrics Insights' SCHEMA() matches the
exact set, so one extra dimension would hide the metric from the alarms."""

UNIT: Final = "Count"
VALUE: Final = 1.0
"""One datapoint of value 1 per suspect instance, only when a check fires (never per-step zeros)."""

PERIOD_SECONDS: Final = 60

REPORT_SOURCE: Final = "sdc.trainer"
REPORT_DETAIL_TYPE: Final = "SDC Report"
REPORT_SCHEMA_VERSION: Final = "1"
"""The version an SDC check's report carries: unchanged, so a pipeline that reads only version 1
keeps reading every SDC report."""
WATCH_REPORT_SCHEMA_VERSION: Final = "2"
"""The version a hang or straggler report carries: version 1 plus the two check kinds and their
evidence (`hang`, `straggler`). A pipeline that knows only version 1 refuses it as malformed (to
its dead-letter queue), never misreads it."""
REPORT_SCHEMA_VERSIONS: Final = (REPORT_SCHEMA_VERSION, WATCH_REPORT_SCHEMA_VERSION)

MAX_REPORT_CHECKPOINTS: Final = 16
"""A report carries at most this many checkpoints (the newest steps): the event stays small
(EventBridge takes at most 256 KB per entry)."""
MAX_REPORT_DEPTH: Final = 32
"""How deep a report's detail may nest (objects and arrays, the detail itself level 1): the
`alarm` it carries is the training loop's dict, free in shape but not in depth."""
MAX_EXACT_INTEGER: Final = 2**53 - 1
"""The largest integer a report may carry anywhere: JSON readers hold integers exactly up to
here (DynamoDB, which stores the report, holds 38 digits)."""
MAX_CHECKPOINT_LOCATION: Final = 1024
"""The longest checkpoint location a report carries, in characters (an S3 key is at most 1024
bytes); a longer one is left out, the checkpoint kept."""


class Metric(StrEnum):
    NONFINITE_GRAD = "sdc_nonfinite_grad"
    REPLAY_MISMATCH = "sdc_replay_mismatch"
    DIVERGENT_TENSORS = "sdc_divergent_tensors"
    HANG = "sdc_hang"
    STRAGGLER = "sdc_straggler"

    @property
    def alarm_name(self) -> str:
        """`sdc-replay-mismatch` for `sdc_replay_mismatch`: the name the deployed alarm carries."""
        return self.value.replace("_", "-")

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: Final = {
    Metric.NONFINITE_GRAD: "A training rank on this instance produced a non-finite gradient.",
    Metric.REPLAY_MISMATCH: "A training rank on this instance failed the ring replay audit.",
    Metric.DIVERGENT_TENSORS: "A replica on this instance holds weights that differ from the "
    "majority.",
    Metric.HANG: "The training job hung, and the hang watchdog's evidence names a rank on this "
    "instance (missing from a collective, silent, or with a stack unlike its peers').",
    Metric.STRAGGLER: "A training rank on this instance ran slower than its peers or its own best "
    "for several consecutive windows.",
}

SDC_METRICS: Final = (Metric.NONFINITE_GRAD, Metric.REPLAY_MISMATCH, Metric.DIVERGENT_TENSORS)
"""The metrics of the three SDC checks: what a version 1 report may name."""


def metric_for_alarm_name(alarm_name: str) -> Metric | None:
    """The metric behind a deployed alarm name, accepting a deployment prefix (`prod-sdc-...`)."""
    for metric in Metric:
        if alarm_name == metric.alarm_name or alarm_name.endswith("-" + metric.alarm_name):
            return metric
    return None


def metrics_insights_query(metric: Metric | str, namespace: str = NAMESPACE) -> str:
    """The Metrics Insights query of the per-instance alarm for `metric`."""
    dims = ", ".join(DIMENSIONS)
    return f'SELECT MAX({Metric(metric).value}) FROM SCHEMA("{namespace}", {dims}) GROUP BY {dims}'


class Check(StrEnum):
    """The `check` field of an alarm dict: which in-training check raised it."""

    COMPUTE = "compute"
    REDUCED_GRADIENT = "reduced gradient"
    WEIGHTS = "weights"
    HANG = "hang"
    """The hang watchdog: no progress anywhere in the job for its timeout (report version 2)."""
    STRAGGLER = "straggler"
    """The straggler scores: a rank slow for several consecutive windows (report version 2)."""


class Role(StrEnum):
    """How strongly the evidence points at a rank."""

    CULPRIT = "culprit"
    """Named directly: in two mismatched ring pairs, or the minority copy of the weights."""
    CONFIRMED_SUSPECT = "confirmed_suspect"
    """An ambiguous ring pair resolved by a third rank (persistent, transient or replayer)."""
    INVOLVED = "involved"
    """Part of an alarm that names nobody: health-check, never propose a replacement."""


class VerdictKind(StrEnum):
    PERSISTENT = "persistent"
    TRANSIENT = "transient"
    REPLAYER = "replayer computed wrong"
    UNATTRIBUTABLE = "unattributable"

    @classmethod
    def parse(cls, raw: object) -> VerdictKind | None:
        if not isinstance(raw, str):
            return None
        key = re.sub(r"[\s_-]+", " ", raw.strip().lower())
        return _VERDICT_ALIASES.get(key)


_VERDICT_ALIASES: Final = {
    "persistent": VerdictKind.PERSISTENT,
    "transient": VerdictKind.TRANSIENT,
    "replayer computed wrong": VerdictKind.REPLAYER,
    "replayer": VerdictKind.REPLAYER,
    "replayer wrong": VerdictKind.REPLAYER,
    "unattributable": VerdictKind.UNATTRIBUTABLE,
}

INSTANCE_ID_RE: Final = re.compile(r"^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
HYPERPOD_NODE_RE: Final = re.compile(r"^hyperpod-(i-(?:[0-9a-f]{8}|[0-9a-f]{17}))$")


def is_instance_id(value: object) -> bool:
    return isinstance(value, str) and bool(INSTANCE_ID_RE.match(value))


def instance_id_from_node_name(node_name: str | None) -> str | None:
    """`i-…` from a HyperPod EKS node name of the form `hyperpod-i-…`; None for any other form
    (`ip-10-1-2-3…` names exist): never guess."""
    if not node_name:
        return None
    match = HYPERPOD_NODE_RE.match(node_name.strip())
    return match.group(1) if match else None


def report_version(check: Check | str | None) -> str:
    """The schema version of a report raised by `check`: 2 for the hang and straggler kinds, 1
    for the SDC checks (and for an alarm whose check is unknown)."""
    if check in (Check.HANG, Check.STRAGGLER):
        return WATCH_REPORT_SCHEMA_VERSION
    return REPORT_SCHEMA_VERSION


@cache
def report_schema(version: str = REPORT_SCHEMA_VERSION) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the `SDC Report` event detail of `version` (one of
    REPORT_SCHEMA_VERSIONS)."""
    if version not in REPORT_SCHEMA_VERSIONS:
        raise ValueError(
            f"report schema version {version!r} is not one of {REPORT_SCHEMA_VERSIONS}"
        )
    text = (
        resources.files("trainer_emitter")
        .joinpath(f"schemas/sdc_report.v{version}.json")
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema
