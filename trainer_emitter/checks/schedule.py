"""When each check runs. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Schedule:
    """Which steps audit, check weights and save a checkpoint (step numbers as the loop counts).

    | field               | meaning                                                          |
    |---------------------|------------------------------------------------------------------|
    | audit_every         | ring replay every N steps (0: only when check 1 fires)           |
    | deterministic_audits| audit steps run under `deterministic()` and compare gradient     |
    |                     | fingerprints too (otherwise the loss bits alone)                 |
    | check_every         | weight fingerprints every N steps (0: only on checkpoint steps)  |
    | ckpt_every          | the driver calls `save` every N steps (0: never)                 |
    | peer_offset         | rank r replays rank r+offset; None: the ranks per node, so the   |
    |                     | replayer sits on the next node                                   |
    | check_on_checkpoint | a weight check before every save; a save happens only after it   |
    |                     | passes                                                           |
    | verify_on_start     | compare the replicas' weights before the first step the driver   |
    |                     | is given (after a load, before any update is built on it); the   |
    |                     | step is not taken when they differ                               |
    | confirm_checkpoints | audit and check the weights on the step after each save too, so  |
    |                     | that the save's manifest is clean one step later rather than at  |
    |                     | the next scheduled checks (`trainer_emitter.checkpoints`)        |
    """

    audit_every: int = 100
    deterministic_audits: bool = True
    check_every: int = 100
    ckpt_every: int = 0
    peer_offset: int | None = None
    check_on_checkpoint: bool = True
    verify_on_start: bool = True
    confirm_checkpoints: bool = False

    def __post_init__(self) -> None:
        for name in ("audit_every", "check_every", "ckpt_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"Schedule.{name} must be an integer >= 0 (0: never), not {value!r}"
                )
        for flag in ("verify_on_start", "confirm_checkpoints"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(
                    f"Schedule.{flag} must be True or False, not {getattr(self, flag)!r}"
                )
        offset = self.peer_offset
        if offset is not None and (
            isinstance(offset, bool) or not isinstance(offset, int) or offset < 1
        ):
            raise ValueError(
                f"Schedule.peer_offset must be an integer >= 1 or None, not {offset!r}"
            )

    def is_audit(self, step: int) -> bool:
        return _every(self.audit_every, step) or self._confirms(step)

    def is_checkpoint(self, step: int) -> bool:
        return _every(self.ckpt_every, step)

    def is_weight_check(self, step: int) -> bool:
        return (
            _every(self.check_every, step)
            or (self.check_on_checkpoint and self.is_checkpoint(step))
            or self._confirms(step)
        )

    def _confirms(self, step: int) -> bool:
        """The step after a save, when saves are confirmed."""
        return self.confirm_checkpoints and step > 1 and self.is_checkpoint(step - 1)


def _every(period: int, step: int) -> bool:
    return period > 0 and step % period == 0
