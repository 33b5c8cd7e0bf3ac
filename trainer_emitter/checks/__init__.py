"""The three in-training SDC checks for PyTorch DDP (optional: needs the `torch` extra).

    from trainer_emitter.checks import SdcChecks, Schedule

    checks = SdcChecks(ddp_model, optimizer, loss_fn, Schedule(audit_every=100, ckpt_every=1000),
                       max_grad_norm=1.0, save=save_checkpoint)
    for step, batch in enumerate(loader, start=1):
        result = checks.step(step, batch)   # the first compares the replicas before it runs
        if result.alarm:
            checks.report(result.alarm)     # trainer_emitter.report on one rank

A loop without the driver, or a group of full copies other than DDP's, compares the copies after
loading a checkpoint (saved at `ckpt_step`) and before the first step:

    verdict = find_divergent_ranks(model, group, step=ckpt_step + 1, tags=ckpt_tags)
    if verdict.alarm:                       # the same on every member: report from one
        report(verdict.alarm)

`import trainer_emitter` never imports torch; importing this package does, on first use of a name
that needs it (`Schedule`, `Passes` and the ring rules are plain Python).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer_emitter.checks.alarms import Passes
    from trainer_emitter.checks.determinism import deterministic
    from trainer_emitter.checks.driver import SdcChecks, StepResult, job_rank_map
    from trainer_emitter.checks.fingerprint import (
        fingerprint,
        fingerprint_ints,
        fingerprints,
        weights_fingerprint,
    )
    from trainer_emitter.checks.gradients import GradientWatch, comm_hook
    from trainer_emitter.checks.replay import Package, recompute
    from trainer_emitter.checks.replicas import find_divergent_ranks
    from trainer_emitter.checks.ring import Agreement, ReplicaVerdict, TopologyError, check_topology
    from trainer_emitter.checks.schedule import Schedule

_WHERE = {
    "Agreement": "ring",
    "Passes": "alarms",
    "deterministic": "determinism",
    "SdcChecks": "driver",
    "StepResult": "driver",
    "job_rank_map": "driver",
    "fingerprint": "fingerprint",
    "fingerprint_ints": "fingerprint",
    "fingerprints": "fingerprint",
    "weights_fingerprint": "fingerprint",
    "GradientWatch": "gradients",
    "comm_hook": "gradients",
    "find_divergent_ranks": "replicas",
    "Package": "replay",
    "recompute": "replay",
    "ReplicaVerdict": "ring",
    "TopologyError": "ring",
    "check_topology": "ring",
    "Schedule": "schedule",
}

__all__ = [
    "Agreement",
    "GradientWatch",
    "Package",
    "Passes",
    "ReplicaVerdict",
    "Schedule",
    "SdcChecks",
    "StepResult",
    "TopologyError",
    "check_topology",
    "comm_hook",
    "deterministic",
    "find_divergent_ranks",
    "fingerprint",
    "fingerprint_ints",
    "fingerprints",
    "job_rank_map",
    "recompute",
    "weights_fingerprint",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"trainer_emitter.checks.{module}"), name)
