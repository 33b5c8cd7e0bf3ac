"""The watch's evidence as a report carries it (`hang`, `straggler` of schema version 2), read
leniently from the alarm: what is malformed becomes an error line and is left out, the rest
stays; sizes are bounded as the schema bounds them. `None` when there is nothing to carry."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from trainer_emitter.contract import MAX_EXACT_INTEGER, is_instance_id
from trainer_emitter.watch.localise import MAX_FRAME_TEXT, MAX_RANKS_SHOWN, MAX_STACK_FRAMES, Signal
from trainer_emitter.watch.straggler import MAX_SCORES_SHOWN, MAX_SECTIONS_SHOWN

MAX_RANK = 2**31 - 1
MAX_SECONDS = 31622400.0
MAX_NAME = 64


def read_hang(raw: object, errors: list[str]) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        errors.append("'hang' evidence is missing or not a dict; the hang names no rank")
        return None
    waiting = raw.get("waiting_collective")
    seq = waiting.get("seq") if isinstance(waiting, Mapping) else None
    return {
        "timeout_s": _positive(raw.get("timeout_s"), 86400.0, "hang.timeout_s", errors) or 1.0,
        "waiting_collective": (
            {"seq": seq, "name": _name(waiting.get("name"))}
            if isinstance(waiting, Mapping) and _count(seq) and seq >= 1
            else None
        ),
        "missing_ranks": _ranks(raw, "missing_ranks", errors),
        "silent_ranks": _ranks(raw, "silent_ranks", errors),
        "odd_stack_ranks": _ranks(raw, "odd_stack_ranks", errors),
        "named_instances": _instances(raw.get("named_instances"), "hang", errors),
        "localised_instance": _instance(raw.get("localised_instance"), errors),
        "signals": sorted({s for s in raw.get("signals") or () if s in set(Signal)}),
        "ranks": [
            _rank_state(item)
            for item in _list(raw.get("ranks"))[:MAX_RANKS_SHOWN]
            if isinstance(item, Mapping) and _is_rank(item.get("rank"))
        ],
        "ranks_left_out": _nonnegative(raw.get("ranks_left_out")),
    }


def read_straggler(raw: object, errors: list[str]) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        errors.append("'straggler' evidence is missing or not a dict; the report names no rank")
        return None
    threshold = raw.get("threshold")
    if not (_number(threshold) and 0 < threshold <= 1):
        errors.append(f"straggler threshold {threshold!r} is not in (0, 1]; 0.7 shown")
        threshold = 0.7
    return {
        "window": _nonnegative(raw.get("window")),
        "window_steps": min(max(_nonnegative(raw.get("window_steps")), 1), 1_000_000),
        "threshold": threshold,
        "windows_required": min(max(_nonnegative(raw.get("windows_required")), 1), 1000),
        "flagged": _ranks(raw, "flagged", errors),
        "named_instances": _instances(raw.get("named_instances"), "straggler", errors),
        "scores": [
            _score(item)
            for item in _list(raw.get("scores"))[:MAX_SCORES_SHOWN]
            if isinstance(item, Mapping) and _is_rank(item.get("rank"))
        ],
        "ranks_left_out": _nonnegative(raw.get("ranks_left_out")),
    }


def _rank_state(item: Mapping[str, Any]) -> dict[str, Any]:
    stack = item.get("stack")
    return {
        "rank": item["rank"],
        "entered": item["entered"] if _count(item.get("entered")) else None,
        "completed": item["completed"] if _count(item.get("completed")) else None,
        "section": _name(item.get("section")),
        "seconds_since_progress": _seconds(item.get("seconds_since_progress")),
        "stack": (
            [str(frame)[:MAX_FRAME_TEXT] for frame in stack[-MAX_STACK_FRAMES:]]
            if isinstance(stack, list | tuple)
            else None
        ),
    }


def _score(item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "rank": item["rank"],
        "step_seconds": _seconds(item.get("step_seconds")),
        "relative": _fraction(item.get("relative")),
        "individual": _fraction(item.get("individual")),
        "consecutive": min(_nonnegative(item.get("consecutive")), MAX_RANK),
        "sections": [
            {
                "name": _name(section.get("name")) or "unnamed",
                "seconds": _seconds(section.get("seconds")),
                "relative": _fraction(section.get("relative")),
                "individual": _fraction(section.get("individual")),
            }
            for section in _list(item.get("sections"))[:MAX_SECTIONS_SHOWN]
            if isinstance(section, Mapping)
        ],
    }


def _ranks(raw: Mapping[str, Any], key: str, errors: list[str]) -> list[int]:
    kept = []
    for item in _list(raw.get(key)):
        if _is_rank(item):
            kept.append(int(item))
        else:
            errors.append(f"'{key}' holds {item!r:.80}, which is not a rank; left out")
    return sorted(set(kept))


def _instances(raw: object, what: str, errors: list[str]) -> list[str]:
    kept = []
    for item in _list(raw):
        if is_instance_id(item):
            kept.append(str(item))
        else:
            errors.append(f"{what}: {item!r:.80} is not an instance id; left out")
    return sorted(set(kept))[:2048]


def _instance(raw: object, errors: list[str]) -> str | None:
    if raw is None or is_instance_id(raw):
        return raw  # type: ignore[return-value]
    errors.append(f"hang: localised instance {raw!r:.80} is not an instance id; left out")
    return None


def _list(raw: object) -> list[Any]:
    return list(raw) if isinstance(raw, list | tuple) else []


def _is_rank(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK


def _count(value: object) -> TypeGuard[int]:
    return (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_EXACT_INTEGER
    )


def _nonnegative(value: object) -> int:
    return int(value) if _count(value) else 0


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(value: object) -> float | None:
    return round(float(value), 6) if _number(value) and 0 <= value <= MAX_SECONDS else None


def _fraction(value: object) -> float | None:
    return round(float(value), 6) if _number(value) and 0 <= value <= 1 else None


def _positive(value: object, most: float, what: str, errors: list[str]) -> float | None:
    if _number(value) and 0 < value <= most:
        return float(value)
    errors.append(f"'{what}' is {value!r:.80}, not a number of seconds in (0, {most:g}]")
    return None


def _name(value: object) -> str | None:
    return value[:MAX_NAME] if isinstance(value, str) and value else None
