"""The two small files the job writes beside its checkpoints, and how they are read. Pure.

A checkpoint manifest (`sdc-checkpoint-<step>.json`), one per save:

    {"schema": "sdc.checkpoint-manifest", "version": 1, "step": 30,
     "saved_at": "2026-12-05T12:00:00+00:00", "location": "/fsx/ckpt/step-30",
     "last_audit_pass": 30, "last_weight_check_pass": 30,
     "fingerprint": "sha256:…", "clean_through": 31, "run": "…"}

`last_audit_pass` and `last_weight_check_pass` are the passes at save time (the checkpoint's
tags); `fingerprint` digests the saved weights' fingerprints (`checks.weights_fingerprint`);
`clean_through` is None until an audit and a weight check both pass at a later step than the
save, then the older of those two steps: the checks vouch for the training up to there. The
passes at save time never make a checkpoint clean (they record that a check passed, not that
the state saved after it is sound).

An alarm marker (`sdc-alarm-<step>.json`), one per alarm the job raised:

    {"schema": "sdc.alarm-marker", "version": 1, "step": 36, "check": "weights",
     "suspect_window": [32, 36], "detected_at": "…", "run": "…", "resolved": null}

`resolved` is set when a later run resumes from a step before the window
(`{"resumed_from": 30, "at": "…"}`): its checkpoints are no longer in question.

Reading is strict: a file that is not JSON, names another schema or version, or misses or
mistypes a field raises `ManifestError` with the reason; callers ignore such a manifest (a torn
write, a foreign file) with a warning and never trust it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Final, TypeGuard

MANIFEST_SCHEMA: Final = "sdc.checkpoint-manifest"
MARKER_SCHEMA: Final = "sdc.alarm-marker"
VERSION: Final = 1
"""The version these readers understand; a file of any other version is foreign."""

_MANIFEST_NAME = re.compile(r"^sdc-checkpoint-(\d{12})\.json$")
_MARKER_NAME = re.compile(r"^sdc-alarm-(\d{12})\.json$")


class ManifestError(ValueError):
    """A manifest or marker that cannot be trusted: torn, foreign, or malformed."""


def manifest_name(step: int) -> str:
    return f"sdc-checkpoint-{step:012d}.json"


def marker_name(step: int) -> str:
    return f"sdc-alarm-{step:012d}.json"


def manifest_step(name: str) -> int | None:
    """The step a manifest's file name says, or None for any other name."""
    match = _MANIFEST_NAME.match(name)
    return int(match.group(1)) if match else None


def marker_step(name: str) -> int | None:
    """The step an alarm marker's file name says, or None for any other name."""
    match = _MARKER_NAME.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class Manifest:
    step: int
    saved_at: str
    location: str | None
    last_audit_pass: int | None
    last_weight_check_pass: int | None
    fingerprint: str | None
    clean_through: int | None
    run: str

    def tags(self) -> dict[str, int | None]:
        """The tags saved with the checkpoint, as `SdcChecks(resume_tags=...)` takes them."""
        return {
            "last_audit_pass": self.last_audit_pass,
            "last_weight_check_pass": self.last_weight_check_pass,
        }

    def entry(self) -> dict[str, Any]:
        """The checkpoint as an alarm carries it (`SdcChecks(checkpoints=[...])`)."""
        return {"step": self.step, **self.tags(), "location": self.location}

    def confirmed(self, last_audit_pass: int | None, last_weight_check_pass: int | None) -> bool:
        """Both checks passed at a step after this save."""
        return (
            last_audit_pass is not None
            and last_weight_check_pass is not None
            and min(last_audit_pass, last_weight_check_pass) > self.step
        )

    def clean(self, last_audit_pass: int, last_weight_check_pass: int) -> Manifest:
        return replace(self, clean_through=min(last_audit_pass, last_weight_check_pass))

    def to_bytes(self) -> bytes:
        return _dump({"schema": MANIFEST_SCHEMA, "version": VERSION, **asdict(self)})


@dataclass(frozen=True, slots=True)
class AlarmMarker:
    step: int | None
    check: str | None
    suspect_window: tuple[int, int] | None
    """None: the alarm named no window; nothing can be placed before it."""
    detected_at: str
    run: str
    resolved: dict[str, Any] | None = None

    def resolve(self, resumed_from: int, at: str) -> AlarmMarker:
        return replace(self, resolved={"resumed_from": resumed_from, "at": at})

    def to_bytes(self) -> bytes:
        body = asdict(self)
        window = self.suspect_window
        body["suspect_window"] = list(window) if window is not None else None
        return _dump({"schema": MARKER_SCHEMA, "version": VERSION, **body})


def read_manifest(name: str, data: bytes) -> Manifest:
    """The manifest in `data` (read from the file `name`); raises ManifestError when it cannot
    be trusted, the step in its name included."""
    body = _load(data, MANIFEST_SCHEMA)
    step = _step(body, "step")
    if step is None or manifest_step(name) != step:
        raise ManifestError(f"{name}: its step {body.get('step')!r} is not the one its name says")
    clean_through = _step(body, "clean_through", optional=True)
    if clean_through is not None and clean_through <= step:
        raise ManifestError(f"{name}: clean_through {clean_through} is not after step {step}")
    return Manifest(
        step=step,
        saved_at=_text(body, "saved_at"),
        location=_text(body, "location", optional=True),
        last_audit_pass=_step(body, "last_audit_pass", optional=True),
        last_weight_check_pass=_step(body, "last_weight_check_pass", optional=True),
        fingerprint=_text(body, "fingerprint", optional=True),
        clean_through=clean_through,
        run=_text(body, "run"),
    )


def read_marker(name: str, data: bytes) -> AlarmMarker:
    """The alarm marker in `data`; raises ManifestError when it cannot be trusted."""
    body = _load(data, MARKER_SCHEMA)
    step = _step(body, "step", optional=True)
    if marker_step(name) != (step or 0):
        raise ManifestError(f"{name}: its step {body.get('step')!r} is not the one its name says")
    window = body.get("suspect_window")
    if window is not None and not (
        isinstance(window, list)
        and len(window) == 2
        and all(_is_step(v) for v in window)
        and window[0] <= window[1]
    ):
        raise ManifestError(f"{name}: suspect_window {window!r} is no [first, last] of steps")
    resolved = body.get("resolved")
    if resolved is not None and not (
        isinstance(resolved, dict) and _is_step(resolved.get("resumed_from"))
    ):
        raise ManifestError(f"{name}: resolved {resolved!r} names no step resumed from")
    check = body.get("check")
    if check is not None and not isinstance(check, str):
        raise ManifestError(f"{name}: check {check!r} is no string")
    return AlarmMarker(
        step=step,
        check=check,
        suspect_window=(window[0], window[1]) if window is not None else None,
        detected_at=_text(body, "detected_at"),
        run=_text(body, "run"),
        resolved=resolved,
    )


def _dump(body: Mapping[str, Any]) -> bytes:
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def _load(data: bytes, schema: str) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ManifestError(f"not JSON (a torn write?): {err}") from None
    if not isinstance(body, dict):
        raise ManifestError(f"not a JSON object but {type(body).__name__}")
    if body.get("schema") != schema:
        raise ManifestError(f"schema {body.get('schema')!r}, not {schema!r}")
    if body.get("version") != VERSION:
        raise ManifestError(f"version {body.get('version')!r}, this reader knows {VERSION}")
    return body


def _step(body: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not _is_step(value):
        raise ManifestError(f"{key} {value!r} is no step (an integer >= 0)")
    return value


def _text(body: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{key} {value!r} is no text")
    return value


def _is_step(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
