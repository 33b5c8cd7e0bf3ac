"""Turn the alarm dict a training loop returns into datapoints and one `SDC Report` detail.

Pure: no AWS, no clock, no randomness (the caller passes the time and the report id), so the
mapping rules below can be tested exhaustively.

The mapping rules are `Attribution` below, one member per kind of evidence, each named for the
role it gives (`..._CULPRIT`, `..._CONFIRMED_SUSPECT`, `..._INVOLVED`): the emitter maps evidence
to roles only; what the pipeline then does is its decision table's
(`sdc_remediation.lambdas.logic.evidence.policy.Row`), whose rows read like none of these.
README.md ("What a report publishes") shows them as a table (tests/docs/test_tables_drift.py
keeps it to `Attribution`).

The alarm's `checkpoints` (optional) are copied as they are read: an entry without a valid step
or with a tag that is no step number is left out, an invalid location is dropped (the checkpoint
kept), each with an error line; at most MAX_REPORT_CHECKPOINTS, the newest steps.

A rank with several kinds of evidence keeps every metric and its strongest role. Ranks collapse
onto their instance: one datapoint of value 1 per (metric, instance). A report is `ambiguous`
when no rank is a culprit or confirmed suspect: the pipeline then health-checks and proposes no
replacement. Ranks missing from the rank map, or mapped to no instance, appear in `suspects` with
`mapped: false` and get no datapoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, TypeGuard

from trainer_emitter.contract import (
    MAX_CHECKPOINT_LOCATION,
    MAX_EXACT_INTEGER,
    MAX_REPORT_CHECKPOINTS,
    MAX_REPORT_DEPTH,
    UNIT,
    VALUE,
    Check,
    Metric,
    Role,
    VerdictKind,
    report_version,
)
from trainer_emitter.rankmap import RankMap
from trainer_emitter.watch.evidence import read_hang, read_straggler

_ROLE_STRENGTH = {Role.INVOLVED: 0, Role.CONFIRMED_SUSPECT: 1, Role.CULPRIT: 2}

MAX_REASON = 500
"""The most characters of one suspect reason (the report schema's `reasons` items)."""


class Attribution(Enum):
    """Evidence in the alarm → the role of the ranks it names and the metric they publish (the
    member's name ends with the role). A hang's ranks on the instance the watch localised are
    culprits here, whatever the number of signals behind it: the pipeline's table decides
    whether that is enough to act (`MIN_AGREEING_SIGNALS`).

    `evidence` and `scope` are written for people: README.md's table shows every rule in this
    order (evidence | role, with `: <scope>` when the rule names more ranks than the evidence
    does | metric)."""

    NONFINITE_INVOLVED = ("rank in `nonfinite`", Role.INVOLVED, Metric.NONFINITE_GRAD, "")
    RING_PAIRS_CULPRIT = (
        "rank in `culprits` (two mismatched ring pairs)",
        Role.CULPRIT,
        Metric.REPLAY_MISMATCH,
        "",
    )
    VERDICT_CONFIRMED_SUSPECT = (
        '`suspect` of a persistent, transient or "replayer computed wrong" verdict',
        Role.CONFIRMED_SUSPECT,
        Metric.REPLAY_MISMATCH,
        "",
    )
    UNRESOLVED_PAIR_INVOLVED = (
        "both ranks of an unattributable verdict, or of a mismatched pair no culprit or verdict "
        "resolves",
        Role.INVOLVED,
        Metric.REPLAY_MISMATCH,
        "",
    )
    WEIGHTS_MINORITY_CULPRIT = (
        "check `weights`, rank in `suspects`",
        Role.CULPRIT,
        Metric.DIVERGENT_TENSORS,
        "",
    )
    WEIGHTS_NO_MAJORITY_INVOLVED = (
        "check `weights`, `suspects` is None (no strict majority)",
        Role.INVOLVED,
        Metric.DIVERGENT_TENSORS,
        "every rank in the map (every rank in `replicas` when the alarm names the group compared)",
    )
    REDUCED_GRADIENT_INVOLVED = (
        "check `reduced gradient` naming no rank",
        Role.INVOLVED,
        Metric.NONFINITE_GRAD,
        "every rank in the map",
    )
    HANG_ON_NAMED_INSTANCE_CULPRIT = (
        "check `hang`, rank in `missing_ranks`, `silent_ranks` or `odd_stack_ranks` on the "
        "`localised_instance`",
        Role.CULPRIT,
        Metric.HANG,
        "",
    )
    HANG_ELSEWHERE_INVOLVED = (
        "check `hang` localised to no instance: rank in `missing_ranks`, `silent_ranks` or "
        "`odd_stack_ranks`",
        Role.INVOLVED,
        Metric.HANG,
        "every rank in the map when the evidence names none",
    )
    STRAGGLER_ONE_INSTANCE_CULPRIT = (
        "check `straggler`, rank in `flagged`, every flagged rank on one instance",
        Role.CULPRIT,
        Metric.STRAGGLER,
        "",
    )
    STRAGGLER_SPANNING_INVOLVED = (
        "check `straggler`, rank in `flagged`, the flagged ranks on several instances",
        Role.INVOLVED,
        Metric.STRAGGLER,
        "",
    )

    def __init__(self, evidence: str, role: Role, metric: Metric, scope: str) -> None:
        self.evidence = evidence
        self.role = role
        self.metric = metric
        self.scope = scope


_METRIC_ORDER = list(Metric)


@dataclass(frozen=True, slots=True)
class Datapoint:
    metric: Metric
    cluster_name: str
    instance_id: str
    timestamp: datetime
    value: float = VALUE
    unit: str = UNIT

    def to_metric_datum(self) -> dict[str, Any]:
        """The PutMetricData `MetricData` entry: exactly the two contract dimensions."""
        return {
            "MetricName": self.metric.value,
            "Dimensions": [
                {"Name": "ClusterName", "Value": self.cluster_name},
                {"Name": "InstanceId", "Value": self.instance_id},
            ],
            "Timestamp": self.timestamp,
            "Value": self.value,
            "Unit": self.unit,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric.value,
            "cluster_name": self.cluster_name,
            "instance_id": self.instance_id,
            "timestamp": self.timestamp.isoformat(),
            "value": self.value,
            "unit": self.unit,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Datapoint:
        return cls(
            metric=Metric(data["metric"]),
            cluster_name=data["cluster_name"],
            instance_id=data["instance_id"],
            timestamp=datetime.fromisoformat(data["timestamp"]),
            value=float(data.get("value", VALUE)),
            unit=data.get("unit", UNIT),
        )


@dataclass(frozen=True, slots=True)
class Report:
    detail: dict[str, Any]
    datapoints: list[Datapoint]

    @property
    def report_id(self) -> str:
        return str(self.detail["report_id"])

    @property
    def errors(self) -> list[str]:
        return list(self.detail["errors"])


@dataclass
class _Evidence:
    role: Role
    metrics: set[Metric] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)


class _AlarmReader:
    """Reads an alarm dict leniently: what is malformed becomes an error line, the rest stays."""

    def __init__(self, alarm: object) -> None:
        self.errors: list[str] = []
        if isinstance(alarm, Mapping):
            self.alarm: Mapping[str, Any] = alarm
        else:
            self.errors.append(f"alarm is a {type(alarm).__name__}, not a dict; nothing is certain")
            self.alarm = {}

    def step(self, key: str, *, required: bool = False) -> int | None:
        if key not in self.alarm:
            if required:
                self.errors.append(f"'{key}' is missing")
            return None
        value = self.alarm[key]
        if value is None and not required:
            return None
        if _is_index(value):
            return int(value)
        self.errors.append(f"'{key}' is {_show(value)}, not a step number; left out")
        return None

    def check(self) -> Check | None:
        if "check" not in self.alarm:
            self.errors.append("'check' is missing")
            return None
        raw = self.alarm["check"]
        try:
            return Check(raw)
        except ValueError:
            known = ", ".join(repr(c.value) for c in Check)
            self.errors.append(f"'check' is {_show(raw)}, not one of {known}")
            return None

    def ranks(self, key: str, *, nullable: bool = False) -> list[int] | None:
        if key not in self.alarm or (nullable and self.alarm[key] is None):
            return None if nullable else []
        value = self.alarm[key]
        if not isinstance(value, list | tuple):
            self.errors.append(f"'{key}' is {_show(value)}, not a list of ranks; left out")
            return None if nullable else []
        ranks: list[int] = []
        for item in value:
            if _is_index(item):
                ranks.append(int(item))
            else:
                self.errors.append(f"'{key}' holds {_show(item)}, which is not a rank; left out")
        return ranks

    def pairs(self) -> list[tuple[int, int]]:
        pairs: list[tuple[int, int]] = []
        for item in self._list("mismatched_pairs"):
            pair = _pair(item)
            if pair is None:
                self.errors.append(f"'mismatched_pairs' holds {_show(item)}, not a pair of ranks")
            else:
                pairs.append(pair)
        return pairs

    def verdicts(self) -> list[dict[str, Any]]:
        verdicts: list[dict[str, Any]] = []
        for item in self._list("verdicts"):
            if not isinstance(item, Mapping):
                self.errors.append(f"'verdicts' holds {_show(item)}, not a verdict dict")
                continue
            pair = _pair(item.get("pair"))
            kind = VerdictKind.parse(item.get("kind"))
            if pair is None or kind is None:
                what = "pair" if pair is None else "kind"
                self.errors.append(f"verdict {_show(dict(item))} has no valid {what}; left out")
                if pair is not None:  # the pair still mismatched: keep it as involved evidence
                    verdicts.append(
                        {
                            "pair": list(pair),
                            "third": None,
                            "suspect": None,
                            "kind": VerdictKind.UNATTRIBUTABLE.value,
                        }
                    )
                continue
            third = item.get("third")
            suspect = item.get("suspect")
            if third is not None and not _is_index(third):
                self.errors.append(
                    f"verdict on pair {list(pair)}: third {_show(third)} is not a rank"
                )
                third = None
            if kind is not VerdictKind.UNATTRIBUTABLE and not _is_index(suspect):
                self.errors.append(
                    f"verdict {kind.value!r} on pair {list(pair)} names no valid suspect "
                    f"({_show(suspect)}); both ranks kept as involved"
                )
                kind, suspect = VerdictKind.UNATTRIBUTABLE, None
            verdicts.append(
                {
                    "pair": list(pair),
                    "third": None if third is None else int(third),
                    "suspect": (
                        None
                        if suspect is None or kind is VerdictKind.UNATTRIBUTABLE
                        else int(suspect)
                    ),
                    "kind": kind.value,
                }
            )
        return verdicts

    def window(self) -> list[int] | None:
        if "suspect_window" not in self.alarm:
            self.errors.append("'suspect_window' is missing")
            return None
        value = self.alarm["suspect_window"]
        if (
            isinstance(value, list | tuple)
            and len(value) == 2
            and all(_is_index(v) for v in value)
            and value[0] <= value[1]
        ):
            return [int(value[0]), int(value[1])]
        self.errors.append(f"'suspect_window' is {_show(value)}, not [first, last] steps")
        return None

    def checkpoints(self) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        for item in self._list("checkpoints"):
            if not isinstance(item, Mapping):
                self.errors.append(f"'checkpoints' holds {_show(item)}, not a checkpoint dict")
                continue
            step = item.get("step")
            bad_tags = [
                key
                for key in ("last_audit_pass", "last_weight_check_pass")
                if item.get(key) is not None and not _is_index(item.get(key))
            ]
            if not _is_index(step) or bad_tags:
                what = "step" if not _is_index(step) else bad_tags[0]
                self.errors.append(f"checkpoint {_show(dict(item))} has no valid {what}; left out")
                continue
            location = item.get("location")
            if location is not None and not (
                isinstance(location, str) and 0 < len(location) <= MAX_CHECKPOINT_LOCATION
            ):
                self.errors.append(
                    f"checkpoint {step}: location {_show(location)} is not a string of 1 to "
                    f"{MAX_CHECKPOINT_LOCATION} characters; left out"
                )
                location = None
            kept.append(
                {
                    "step": int(step),
                    "last_audit_pass": item.get("last_audit_pass"),
                    "last_weight_check_pass": item.get("last_weight_check_pass"),
                    "location": location,
                }
            )
        kept.sort(key=lambda c: c["step"])
        if len(kept) > MAX_REPORT_CHECKPOINTS:
            dropped = len(kept) - MAX_REPORT_CHECKPOINTS
            self.errors.append(
                f"{dropped} older checkpoints left out (a report carries the newest "
                f"{MAX_REPORT_CHECKPOINTS})"
            )
            kept = kept[dropped:]
        return kept

    def _list(self, key: str) -> list[Any]:
        value = self.alarm.get(key)
        if value is None:
            return []
        if isinstance(value, list | tuple):
            return list(value)
        self.errors.append(f"'{key}' is {_show(value)}, not a list; left out")
        return []


def build_report(
    alarm: object,
    rank_map: RankMap,
    *,
    cluster_name: str,
    job_name: str | None,
    namespace: str,
    report_id: str,
    now: datetime,
    reporting_rank: int | None = None,
    tokens_per_step: int | None = None,
) -> Report:
    """`tokens_per_step` (the emitter's setting) goes into the report only when given: a report
    without it is exactly what emitters before it sent."""
    reader = _AlarmReader(alarm)
    check = reader.check()
    nonfinite = reader.ranks("nonfinite")
    culprits = reader.ranks("culprits")
    pairs = reader.pairs()
    verdicts = reader.verdicts()
    weight_suspects = reader.ranks("suspects", nullable=True)

    evidence: dict[int, _Evidence] = {}

    def add(rank: int, rule: Attribution, reason: str) -> None:
        item = evidence.setdefault(rank, _Evidence(rule.role))
        if _ROLE_STRENGTH[rule.role] > _ROLE_STRENGTH[item.role]:
            item.role = rule.role
        item.metrics.add(rule.metric)
        if reason not in item.reasons:
            item.reasons.append(reason)

    for rank in nonfinite or []:
        add(rank, Attribution.NONFINITE_INVOLVED, "non-finite local gradient")
    for rank in culprits or []:
        add(rank, Attribution.RING_PAIRS_CULPRIT, "in two mismatched ring-replay pairs")
    resolved: set[tuple[int, int]] = set()
    for verdict in verdicts:
        pair = (verdict["pair"][0], verdict["pair"][1])
        resolved.add(pair)
        if verdict["kind"] == VerdictKind.UNATTRIBUTABLE.value:
            for rank in pair:
                add(
                    rank,
                    Attribution.UNRESOLVED_PAIR_INVOLVED,
                    f"pair {list(pair)} mismatched and could not be attributed",
                )
        else:
            add(
                verdict["suspect"],
                Attribution.VERDICT_CONFIRMED_SUSPECT,
                f"{verdict['kind']} verdict on pair {list(pair)}, third rank {verdict['third']}",
            )
    culprit_set = set(culprits or [])
    for pair in pairs:
        if pair in resolved or culprit_set.intersection(pair):
            continue
        for rank in pair:
            add(
                rank,
                Attribution.UNRESOLVED_PAIR_INVOLVED,
                f"pair {list(pair)} mismatched with no culprit or verdict",
            )

    if check is Check.WEIGHTS and "suspects" not in reader.alarm:
        reader.errors.append("'suspects' is missing from a weights alarm; nobody is named")
    elif check is Check.WEIGHTS and reader.alarm["suspects"] is None:
        # `replicas`: the ranks of the one group compared (a group the loop passed); else all
        compared = reader.ranks("replicas", nullable=True)
        for rank in rank_map.ranks() if compared is None else compared:
            add(
                rank,
                Attribution.WEIGHTS_NO_MAJORITY_INVOLVED,
                "weights differ with no strict majority: every replica is in question",
            )
    for rank in weight_suspects or []:
        add(rank, Attribution.WEIGHTS_MINORITY_CULPRIT, "weights differ from the strict majority")
    if check is Check.REDUCED_GRADIENT and not evidence:
        for rank in rank_map.ranks():
            add(
                rank,
                Attribution.REDUCED_GRADIENT_INVOLVED,
                "the reduced gradient is non-finite and no rank is named",
            )

    watch_evidence: dict[str, Any] = {}
    if check is Check.HANG:
        hang = read_hang(reader.alarm.get("hang"), reader.errors)
        if hang is not None:
            watch_evidence["hang"] = hang
        _add_hang(hang, rank_map, add)
    elif check is Check.STRAGGLER:
        straggler = read_straggler(reader.alarm.get("straggler"), reader.errors)
        if straggler is not None:
            watch_evidence["straggler"] = straggler
        _add_straggler(straggler, rank_map, add)

    suspects, instances = _place(evidence, rank_map, reader.errors)
    datapoints = [
        Datapoint(Metric(metric), cluster_name, instance["instance_id"], now)
        for instance in instances
        for metric in instance["metrics"]
    ]
    if not evidence and not reader.errors:
        reader.errors.append("the alarm names no rank and no rule applies: nothing to publish")
    ambiguous = not any(e.role in (Role.CULPRIT, Role.CONFIRMED_SUSPECT) for e in evidence.values())
    detail: dict[str, Any] = {
        "schema_version": report_version(check),
        "report_id": report_id,
        "emitted_at": now.isoformat(),
        "cluster_name": cluster_name,
        "job_name": job_name,
        "namespace": namespace,
        "reporting_rank": reporting_rank,
        "step": reader.step("step", required=True),
        "check": None if check is None else check.value,
        "ambiguous": ambiguous,
        "suspects": suspects,
        "instances": instances,
        "nonfinite": nonfinite or [],
        "mismatched_pairs": [list(p) for p in pairs],
        "culprits": culprits or [],
        "verdicts": verdicts,
        "weight_suspects": weight_suspects,
        "suspect_window": None if check in (Check.HANG, Check.STRAGGLER) else reader.window(),
        "last_audit_pass": reader.step("last_audit_pass"),
        "last_weight_check_pass": reader.step("last_weight_check_pass"),
        "checkpoints": reader.checkpoints(),
        **({} if tokens_per_step is None else {"tokens_per_step": tokens_per_step}),
        **watch_evidence,
        "errors": reader.errors,
        # the watch's evidence is in the detail once, cleaned: the copy of the alarm leaves it out
        "alarm": _finite_copy(
            {
                k: v
                for k, v in reader.alarm.items()
                if k not in _WATCH_EVIDENCE or check not in (Check.HANG, Check.STRAGGLER)
            }
        ),
    }
    return Report(detail=detail, datapoints=datapoints)


_WATCH_EVIDENCE = frozenset({"hang", "straggler"})
"""The keys of the watch's evidence, which a report carries in its own fields, read and cleaned."""


def _add_hang(hang: dict[str, Any] | None, rank_map: RankMap, add: Any) -> None:
    if hang is None:
        return
    named = sorted(
        set(hang["missing_ranks"]) | set(hang["silent_ranks"]) | set(hang["odd_stack_ranks"])
    )
    localised = hang["localised_instance"]
    for rank in named:
        info = rank_map.get(rank)
        on_it = localised is not None and info is not None and info.instance_id == localised
        if on_it:
            add(
                rank,
                Attribution.HANG_ON_NAMED_INSTANCE_CULPRIT,
                f"hang: {_hang_reason(hang, rank)}; localised by " + " and ".join(hang["signals"]),
            )
        else:
            add(rank, Attribution.HANG_ELSEWHERE_INVOLVED, f"hang: {_hang_reason(hang, rank)}")
    if not named:
        for rank in rank_map.ranks():
            add(rank, Attribution.HANG_ELSEWHERE_INVOLVED, "hang: the evidence names no rank")


def _hang_reason(hang: dict[str, Any], rank: int) -> str:
    why = []
    if rank in hang["missing_ranks"]:
        waiting = hang["waiting_collective"] or {}
        name = f" ({waiting['name']})" if waiting.get("name") else ""
        why.append(f"did not enter collective {waiting.get('seq')}{name}")
    if rank in hang["silent_ranks"]:
        why.append("gave no evidence")
    if rank in hang["odd_stack_ranks"]:
        why.append("its stack differs from its peers'")
    return ", ".join(why)


def _add_straggler(straggler: dict[str, Any] | None, rank_map: RankMap, add: Any) -> None:
    if straggler is None:
        return
    flagged = straggler["flagged"]
    instances = {info.instance_id if info else None for info in map(rank_map.get, flagged)}
    rule = (
        Attribution.STRAGGLER_ONE_INSTANCE_CULPRIT
        if len(instances) == 1 and None not in instances
        else Attribution.STRAGGLER_SPANNING_INVOLVED
    )
    scores = {entry["rank"]: entry for entry in straggler["scores"]}
    for rank in flagged:
        relative = (scores.get(rank) or {}).get("relative")
        shown = "unknown" if relative is None else f"{relative:.2f}"
        add(
            rank,
            rule,
            f"straggler: relative score {shown} below {straggler['threshold']:g}; consecutive "
            f"windows below it: {straggler['windows_required']}; steps per window: "
            f"{straggler['window_steps']}",
        )


def _place(
    evidence: dict[int, _Evidence], rank_map: RankMap, errors: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    suspects: list[dict[str, Any]] = []
    by_instance: dict[str, dict[str, Any]] = {}
    for rank in sorted(evidence):
        item = evidence[rank]
        info = rank_map.get(rank)
        metrics = [m.value for m in _METRIC_ORDER if m in item.metrics]
        reasons = list(item.reasons)
        if info is None:
            reasons.append(f"rank {rank} is not in the rank map ({len(rank_map)} ranks)")
            errors.append(
                f"rank {rank} is not in the rank map ({len(rank_map)} ranks); "
                "nothing published for it"
            )
        elif info.instance_id is None:
            why = f": {info.unmapped}" if info.unmapped else ""
            reasons.append(f"node {info.node_name!r} has no known instance id{why}"[:MAX_REASON])
            errors.append(
                f"rank {rank} on node {info.node_name!r} has no known instance id{why} "
                "(set SDC_INSTANCE_ID on that rank); nothing published for it"
            )
        suspects.append(
            {
                "rank": rank,
                "role": item.role.value,
                "mapped": bool(info and info.instance_id),
                "instance_id": info.instance_id if info else None,
                "node_name": info.node_name if info else None,
                "gpu_uuid": info.gpu_uuid if info else None,
                "metrics": metrics,
                "reasons": reasons,
            }
        )
        if info is None or info.instance_id is None:
            continue
        instance = by_instance.setdefault(
            info.instance_id,
            {"instance_id": info.instance_id, "metrics": [], "ranks": [], "role": item.role.value},
        )
        instance["ranks"].append(rank)
        merged = set(instance["metrics"]) | set(metrics)
        instance["metrics"] = [m.value for m in _METRIC_ORDER if m.value in merged]
        if _ROLE_STRENGTH[item.role] > _ROLE_STRENGTH[Role(instance["role"])]:
            instance["role"] = item.role.value
    return suspects, list(by_instance.values())


def _is_index(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _pair(value: object) -> tuple[int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(_is_index(v) for v in value):
        return int(value[0]), int(value[1])
    return None


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _finite_copy(value: Any, depth: int = 2) -> Any:
    """The alarm as JSON and the report schema can carry it: NaN and infinities become None
    (EventBridge and PutMetricData refuse them), an integer beyond +-MAX_EXACT_INTEGER its
    decimal text, anything not JSON-like its repr, and a container nested deeper than
    MAX_REPORT_DEPTH (the alarm is level 2 of the detail) its repr cut short."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INTEGER:
        return str(value)
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_REPORT_DEPTH:
        return _show(value)
    if isinstance(value, Mapping):
        return {str(k): _finite_copy(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_copy(v, depth + 1) for v in value]
    return repr(value)
