"""The trail of one claim down the intake's path: each `Stage` it passed, in order, with what it
found (logged as it passes, kept on the step for whoever took the claim), and every audit
entry written meanwhile (the AUDIT stage says which)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.claim import Stage
from sdc_remediation.lambdas.observability import logger


@dataclass(frozen=True, slots=True)
class Passed:
    stage: Stage
    instance_id: str | None
    """The node (None: the claim as a whole, or a job-level incident's nodes)."""
    details: Mapping[str, Any] = field(default_factory=dict)


class IntakeStep(Step):
    """A step that keeps the trail of the claim it takes."""

    def __init__(self, deps: Deps, actor: str) -> None:
        super().__init__(deps, actor)
        self.trail: list[Passed] = []
        self.audited: list[AuditAction] = []
        self.stored: list[str] = []
        """The instances the claim's report was stored under (`intake.keep`)."""

    def audit(
        self,
        subject: str,
        action: AuditAction,
        details: Mapping[str, Any] | None = None,
        request_ids: Iterable[str | None] = (),
        *,
        actor: str | None = None,
    ) -> AuditEntry:
        entry = super().audit(subject, action, details, request_ids, actor=actor)
        self.audited.append(action)
        return entry


def passed(step: Step, stage: Stage, instance_id: str | None = None, **details: Any) -> None:
    """Note that the claim passed `stage` (for `instance_id`), with what it found."""
    logger.info("intake stage", stage=stage, instance_id=instance_id, **details)
    if isinstance(step, IntakeStep):
        step.trail.append(Passed(stage, instance_id, details))


def audited_since(step: Step, mark: int) -> list[AuditAction]:
    """The audit actions the step wrote since `mark` (`len(step.audited)` then)."""
    return list(step.audited[mark:]) if isinstance(step, IntakeStep) else []


def mark(step: Step) -> int:
    return len(step.audited) if isinstance(step, IntakeStep) else 0
