"""The checkpoint hook: what the job writes beside its checkpoints as it trains.

    ledger = CheckpointLedger("/fsx/ckpt")                 # or "s3://bucket/run-7/ckpt"
    checks = SdcChecks(ddp, optimizer, loss_fn, schedule, save=save, ledger=ledger)

The driver calls it on one rank (the reporter rank) only: `saved` after each save (a manifest
with the step, the time, the passes, the weights' fingerprint), `passed` after each step whose
checks passed (the manifests of earlier saves that a later audit and weight check now cover get
`clean_through`), `alarm` when a check fires (the alarm marker with the suspect window, written
before the step returns, so before the job can exit), and `resumed` once at start when the job
says which step it resumed from. A loop without the driver makes the same four calls.

Nothing here raises into training: a write that fails is logged and the step goes on (the
checkpoint then has no manifest, or stays unconfirmed, and `safe_checkpoint` never proposes it).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainer_emitter.checkpoints.manifest import (
    AlarmMarker,
    Manifest,
    ManifestError,
    manifest_name,
    manifest_step,
    marker_name,
    marker_step,
    read_manifest,
    read_marker,
)
from trainer_emitter.checkpoints.store import Store, open_store

log = logging.getLogger("trainer_emitter.checkpoints")

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Directory:
    """What a checkpoint directory holds, as far as it can be trusted."""

    manifests: dict[int, Manifest] = field(default_factory=dict)
    markers: dict[int, AlarmMarker] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    """`"<where>: <why>"` for each manifest left out: torn, foreign, malformed."""
    unreadable_markers: list[str] = field(default_factory=list)
    """`"<where>: <why>"` for each alarm marker that cannot be read: nothing is safe then."""


def read_directory(store: Store) -> Directory:
    """Every manifest and alarm marker in the directory; a manifest that cannot be trusted is
    left out with a warning, an alarm marker that cannot be read is listed as such."""
    directory = Directory()
    for name in store.names():
        if manifest_step(name) is not None:
            try:
                manifest = read_manifest(name, store.read(name))
            except (ManifestError, OSError) as err:
                directory.ignored.append(f"{store.where(name)}: {err}")
                log.warning("sdc checkpoint manifest ignored, not trusted: %s: %s", name, err)
                continue
            directory.manifests[manifest.step] = manifest
        elif marker_step(name) is not None:
            try:
                marker = read_marker(name, store.read(name))
            except (ManifestError, OSError) as err:
                directory.unreadable_markers.append(f"{store.where(name)}: {err}")
                log.error("sdc alarm marker unreadable: %s: %s", name, err)
                continue
            directory.markers[marker_step(name) or 0] = marker
    return directory


class CheckpointLedger:
    """The manifests and alarm markers of one checkpoint directory, written by one rank."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | Store,
        *,
        clock: Clock | None = None,
        run: str | None = None,
    ) -> None:
        self.store = open_store(directory)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.run = run or secrets.token_hex(8)
        """This run's id, in every file it writes."""
        self._pending: dict[int, Manifest] = {}
        """Manifests this run wrote that no later passing check covers yet."""

    def saved(
        self,
        step: int,
        tags: Mapping[str, Any],
        *,
        location: str | None = None,
        fingerprint: str | None = None,
    ) -> Manifest | None:
        """Write the manifest of the checkpoint just saved at `step` (after its checks)."""
        manifest = Manifest(
            step=step,
            saved_at=self._now(),
            location=location,
            last_audit_pass=_step_or_none(tags.get("last_audit_pass")),
            last_weight_check_pass=_step_or_none(tags.get("last_weight_check_pass")),
            fingerprint=fingerprint,
            clean_through=None,
            run=self.run,
        )
        if not self._write(manifest_name(step), manifest.to_bytes()):
            return None
        self._pending[step] = manifest
        return manifest

    def passed(
        self, last_audit_pass: int | None, last_weight_check_pass: int | None
    ) -> list[Manifest]:
        """The checks stand at these last passes: mark clean every checkpoint this run saved
        that both now follow. Returns the manifests marked."""
        marked = []
        for step, manifest in sorted(self._pending.items()):
            if not manifest.confirmed(last_audit_pass, last_weight_check_pass):
                continue
            assert last_audit_pass is not None and last_weight_check_pass is not None
            clean = manifest.clean(last_audit_pass, last_weight_check_pass)
            if self._write(manifest_name(step), clean.to_bytes()):
                del self._pending[step]
                marked.append(clean)
        return marked

    def alarm(self, alarm: Mapping[str, Any]) -> AlarmMarker | None:
        """Write the alarm marker: the alarm's step, check and suspect window. Every checkpoint
        this run saved and no check confirmed stays unconfirmed for good."""
        step = _step_or_none(alarm.get("step"))
        window = alarm.get("suspect_window")
        marker = AlarmMarker(
            step=step,
            check=alarm.get("check") if isinstance(alarm.get("check"), str) else None,
            suspect_window=_window(window),
            detected_at=self._now(),
            run=self.run,
        )
        self._pending.clear()
        return marker if self._write(marker_name(step or 0), marker.to_bytes()) else None

    def resumed(self, step: int) -> None:
        """This run resumed from the checkpoint of `step`: the manifests of later steps describe
        a run that was abandoned (they are removed; the checkpoints themselves are the job's),
        and alarm markers whose window starts after `step` are marked resolved. A marker whose
        window holds `step` stays: this run started from a state in question."""
        try:
            directory = read_directory(self.store)
        except Exception as err:  # never into training
            log.error("sdc checkpoint directory not readable on resume: %s", err)
            return
        for later in (s for s in directory.manifests if s > step):
            try:
                self.store.delete(manifest_name(later))
            except Exception as err:
                log.error("sdc manifest of abandoned step %d not removed: %s", later, err)
        for at, marker in directory.markers.items():
            window = marker.suspect_window
            if marker.resolved is None and window is not None and window[0] > step:
                self._write(marker_name(at), marker.resolve(step, self._now()).to_bytes())

    def _write(self, name: str, data: bytes) -> bool:
        try:
            self.store.write(name, data)
        except Exception as err:  # a failed write never stops training
            log.error("sdc checkpoint file not written: %s: %s", self.store.where(name), err)
            return False
        return True

    def _now(self) -> str:
        return self.clock().isoformat()


def _window(value: object) -> tuple[int, int] | None:
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(_step_or_none(v) is not None for v in value)
        and value[0] <= value[1]
    ):
        return (value[0], value[1])
    return None


def _step_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
