"""One call on restart: which checkpoint to resume from.

    safe = safe_checkpoint("/fsx/ckpt")
    if safe.manifest is None:
        raise SystemExit(safe.reason)          # says plainly that none is, and why
    load(step=safe.step)                       # then find_divergent_ranks before the first step

The rule: the newest checkpoint whose manifest is clean (an audit and a weight check both
passed at a later step than the save) and whose step is before every recorded suspect window
that no later resume resolved. Loaders that pick the newest finished checkpoint pick the one
saved inside the window, or one no check ever followed; this picks neither.

A checkpoint is vouched for by its bytes, not its name: a manifest whose location another
manifest names too is never a candidate (the bytes there are whichever save wrote last: a clean
step-30 manifest naming the folder a step-35 save inside the window overwrote would vouch for
step 35's weights). After loading, `verify_loaded` compares the loaded weights' fingerprint
(`checks.weights_fingerprint`) with the one the manifest recorded at save time.

Never trusted: a manifest that is torn or foreign (ignored, with a warning and a line in
`ignored`); a checkpoint without a manifest (not a candidate). An alarm marker that cannot be
read, or that names no window, leaves nothing safe: its window is unknown.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from trainer_emitter.checkpoints.ledger import Directory, read_directory
from trainer_emitter.checkpoints.manifest import AlarmMarker, Manifest
from trainer_emitter.checkpoints.store import Store, open_store

Accept = Callable[[Manifest], str | None]
"""A loader's own test of a candidate: None to accept it, else why not (e.g. unfinished)."""


class NoSafeCheckpoint(LookupError):
    """No checkpoint in the directory is safe to resume from; the message says why."""


class CheckpointMismatch(ValueError):
    """The weights loaded are not the ones the manifest vouched for (their fingerprints
    differ): do not train on them."""


@dataclass(frozen=True)
class SafeCheckpoint:
    manifest: Manifest | None
    """The checkpoint to resume from; None when none is safe."""
    reason: str
    """Why this one, or why none, in one sentence a person can act on."""
    skipped: tuple[str, ...] = ()
    """One line per newer checkpoint passed over, with why."""
    ignored: tuple[str, ...] = ()
    """One line per manifest that could not be trusted."""

    @property
    def step(self) -> int | None:
        return self.manifest.step if self.manifest else None

    @property
    def location(self) -> str | None:
        return self.manifest.location if self.manifest else None

    def verify_loaded(self, fingerprint: str) -> None:
        """Raise CheckpointMismatch unless `fingerprint` (`checks.weights_fingerprint` of the
        weights just loaded, in the order the driver fingerprints them: the module's
        parameters) is the one recorded when the checkpoint was saved. A manifest that
        recorded none cannot be checked this way, and passes."""
        manifest = self.require()
        if manifest.fingerprint is not None and fingerprint != manifest.fingerprint:
            raise CheckpointMismatch(
                f"the weights loaded from step {manifest.step} ({manifest.location}) have "
                f"fingerprint {fingerprint}, not {manifest.fingerprint} as saved: the location "
                "holds another save's bytes; do not train on them"
            )

    def require(self) -> Manifest:
        """The manifest, or NoSafeCheckpoint with the reason."""
        if self.manifest is None:
            raise NoSafeCheckpoint(self.reason)
        return self.manifest


def safe_checkpoint(
    directory: str | os.PathLike[str] | Store, *, accept: Accept | None = None
) -> SafeCheckpoint:
    """The newest clean checkpoint older than every open suspect window in `directory` (a local
    or FSx path, or `s3://bucket/prefix`), with the reason; or none, saying why. `accept`: a
    loader's test of each candidate (finished on disk, has a location)."""
    return choose(read_directory(open_store(directory)), accept)


def choose(directory: Directory, accept: Accept | None = None) -> SafeCheckpoint:
    """`safe_checkpoint` on what a directory holds. Pure."""
    ignored = tuple(directory.ignored)
    if directory.unreadable_markers:
        return SafeCheckpoint(
            None,
            "no checkpoint is safe: an alarm marker cannot be read, so its suspect window is "
            f"unknown ({'; '.join(directory.unreadable_markers)}); look at it before resuming",
            ignored=ignored,
        )
    open_markers = [m for m in directory.markers.values() if m.resolved is None]
    if any(m.suspect_window is None for m in open_markers):
        return SafeCheckpoint(
            None,
            "no checkpoint is safe: an alarm named no suspect window "
            f"({_alarms([m for m in open_markers if m.suspect_window is None])}), so no "
            "checkpoint can be placed before it",
            ignored=ignored,
        )
    first = min((m.suspect_window[0] for m in open_markers if m.suspect_window), default=None)
    skipped: list[str] = []
    for step in sorted(directory.manifests, reverse=True):
        manifest = directory.manifests[step]
        why = (
            _not_safe(manifest, first)
            or _shared(manifest, directory)
            or (accept(manifest) if accept else None)
        )
        if why is not None:
            skipped.append(f"step {step}: {why}")
            continue
        return SafeCheckpoint(
            manifest, _why(manifest, first, open_markers), tuple(skipped), ignored
        )
    return SafeCheckpoint(
        None, _why_none(directory, first, open_markers, skipped), tuple(skipped), ignored
    )


def _not_safe(manifest: Manifest, first: int | None) -> str | None:
    if first is not None and manifest.step >= first:
        return f"at or after step {first}, where a suspect window starts"
    if manifest.clean_through is None:
        return "no audit and weight check passed after it"
    return None


def _shared(manifest: Manifest, directory: Directory) -> str | None:
    """Why `manifest` cannot vouch for its location: another manifest names it too."""
    others = sorted(
        other.step
        for other in directory.manifests.values()
        if other.step != manifest.step
        and other.location is not None
        and other.location == manifest.location
    )
    if not others:
        return None
    steps = ", ".join(str(step) for step in others)
    return (
        f"its location {manifest.location} is also named by the manifest of step {steps}: "
        "the bytes there may be either save's"
    )


def _why(manifest: Manifest, first: int | None, markers: list[AlarmMarker]) -> str:
    where = f" ({manifest.location})" if manifest.location else ""
    text = (
        f"step {manifest.step}{where}: the newest checkpoint an audit and a weight check passed "
        f"after (clean through step {manifest.clean_through})"
    )
    if first is None:
        return (
            text
            + "; no alarm is open (none recorded, or each resolved by a resume before its window)"
        )
    return text + f", and before the suspect window starting at step {first} ({_alarms(markers)})"


def _why_none(
    directory: Directory, first: int | None, markers: list[AlarmMarker], skipped: list[str]
) -> str:
    if not directory.manifests:
        found = f" ({len(directory.ignored)} ignored, not trusted)" if directory.ignored else ""
        return f"no checkpoint is safe: the directory holds no checkpoint manifest{found}"
    before = f" before step {first} ({_alarms(markers)})" if first is not None else ""
    return (
        f"no checkpoint is safe: none of the {len(directory.manifests)} with a manifest is clean"
        f"{before}; resume from an earlier checkpoint you trust, or start over (passed over: "
        f"{'; '.join(skipped)})"
    )


def _alarms(markers: list[AlarmMarker]) -> str:
    return "; ".join(
        f"{m.check or 'unknown'} alarm at step {m.step if m.step is not None else 'unknown'}"
        + (f", window {m.suspect_window[0]}-{m.suspect_window[1]}" if m.suspect_window else "")
        for m in sorted(markers, key=lambda m: m.step or 0)
    )
