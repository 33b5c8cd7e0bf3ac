"""What each loader takes to resume from the safe checkpoint instead of the newest one.

Each call reads the directory once (`safe_checkpoint`) and returns the value the loader takes, or
raises `NoSafeCheckpoint` with the reason: every loader below treats "nothing given" as "the
newest", which after an alarm is the wrong one, so no value is never returned.

| loader                          | call                          | pass it as                      |
|---------------------------------|-------------------------------|---------------------------------|
| torch.distributed.checkpoint    | `dcp_step(directory)`         | the step your loop loads        |
| torchtitan                      | `torchtitan_load_step(dir)`   | `--checkpoint.load_step`        |
| NeMo (AutoResume)               | `nemo_resume_path(directory)` | `AutoResume(resume_from_path=)` |

A DCP checkpoint is finished when its folder holds `.metadata` (DCP writes it last); a
candidate without it on a local or FSx path is passed over for the next older safe one.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainer_emitter.checkpoints.manifest import Manifest
from trainer_emitter.checkpoints.safe import safe_checkpoint
from trainer_emitter.checkpoints.store import Store

DCP_METADATA = ".metadata"


def dcp_step(directory: str | os.PathLike[str] | Store) -> int:
    """The step of the newest safe, finished DCP checkpoint: load the folder saved at it."""
    return safe_checkpoint(directory, accept=_finished_dcp).require().step


def torchtitan_load_step(directory: str | os.PathLike[str] | Store) -> int:
    """torchtitan's `checkpoint.load_step`: it loads `<checkpoint folder>/step-<N>` instead of
    the newest `step-*` with `.metadata`."""
    return safe_checkpoint(directory, accept=_finished_dcp).require().step


def nemo_resume_path(directory: str | os.PathLike[str] | Store) -> str:
    """NeMo's `AutoResume(resume_from_path=...)`: the safe checkpoint's location, so that NeMo
    does not take the newest `*last` one."""
    location = safe_checkpoint(directory, accept=_has_location).require().location
    assert location is not None  # _has_location accepted it
    return location


def _finished_dcp(manifest: Manifest) -> str | None:
    location = manifest.location
    if location is None or "://" in location:
        return None  # a step is what the loader takes; a remote folder is its own to check
    if not (Path(location) / DCP_METADATA).is_file():
        return f"{location} has no {DCP_METADATA}: the save did not finish"
    return None


def _has_location(manifest: Manifest) -> str | None:
    if manifest.location is None:
        return "its manifest has no location (the save function returned none)"
    if "://" not in manifest.location and not Path(manifest.location).exists():
        return f"{manifest.location} does not exist"
    return None
