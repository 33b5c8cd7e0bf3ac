"""The training watch: hangs and stragglers, reported through the same emitter as the SDC checks.

    from trainer_emitter.watch import Section, TrainingWatch

    watch = TrainingWatch(emitter, store=store)     # once, after init_process_group
    for step, batch in enumerate(loader, start=1):
        with watch.section(Section.FORWARD_BACKWARD):
            loss = train_step(batch)
        watch.step(step)                             # progress, and the step's time

- `hang`: progress marks (steps and named sections), a monitor thread, and, after `timeout`
  seconds without progress, evidence gathered over the rendezvous store (collective sequence
  numbers, Python stacks, seconds since progress) and localised to one instance or called
  spanning (`localise`).
- `straggler`: per-rank step and section times per window, scored against the fastest rank and
  against the rank's own best; a rank below the threshold for k consecutive windows is reported.
- `store`: the side channel (the job's TCPStore, or a dict in memory).

Plain Python: torch is imported only to reach the rendezvous store (`connect_store`) and by
`wrap_collectives`, which counts the collectives of `torch.distributed`.
"""

from __future__ import annotations

from trainer_emitter.watch.hang import (
    DEFAULT_TIMEOUT_SECONDS,
    CollectiveCounter,
    HangWatchdog,
    Section,
    wrap_collectives,
)
from trainer_emitter.watch.localise import HangEvidence, RankState, localise
from trainer_emitter.watch.store import MemoryStore, Store, connect_store
from trainer_emitter.watch.straggler import StragglerScores, WindowScores
from trainer_emitter.watch.training import TrainingWatch

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "CollectiveCounter",
    "HangEvidence",
    "HangWatchdog",
    "MemoryStore",
    "RankState",
    "Section",
    "Store",
    "StragglerScores",
    "TrainingWatch",
    "WindowScores",
    "connect_store",
    "localise",
    "wrap_collectives",
]
