"""Resume from the right checkpoint: manifests beside each save, alarm markers, one call on restart.

    from trainer_emitter.checkpoints import CheckpointLedger, safe_checkpoint

    ledger = CheckpointLedger(CKPT)              # the driver's checkpoint hook writes beside saves
    checks = SdcChecks(ddp, optimizer, loss_fn, schedule, save=save, ledger=ledger)
    ...
    safe = safe_checkpoint(CKPT)                 # on restart: clean, before every suspect window
    print(safe.reason)
    ...                                          # load it, then:
    safe.verify_loaded(weights_fingerprint(model.parameters()))  # the bytes vouched for

`manifest` holds the file formats, `store` the atomic writes (local, FSx, S3), `ledger` the hook,
`safe` the choice, `loaders` the value torch DCP, torchtitan and NeMo each take. No torch here.
"""

from __future__ import annotations

from trainer_emitter.checkpoints.ledger import CheckpointLedger, read_directory
from trainer_emitter.checkpoints.loaders import dcp_step, nemo_resume_path, torchtitan_load_step
from trainer_emitter.checkpoints.manifest import AlarmMarker, Manifest, ManifestError
from trainer_emitter.checkpoints.safe import (
    CheckpointMismatch,
    NoSafeCheckpoint,
    SafeCheckpoint,
    safe_checkpoint,
)
from trainer_emitter.checkpoints.store import LocalStore, S3Store, Store, open_store

__all__ = [
    "AlarmMarker",
    "CheckpointLedger",
    "CheckpointMismatch",
    "LocalStore",
    "Manifest",
    "ManifestError",
    "NoSafeCheckpoint",
    "S3Store",
    "SafeCheckpoint",
    "Store",
    "dcp_step",
    "nemo_resume_path",
    "open_store",
    "read_directory",
    "safe_checkpoint",
    "torchtitan_load_step",
]
