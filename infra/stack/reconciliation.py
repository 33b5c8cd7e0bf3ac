"""Reconciliation: the `reconcile` function on a schedule, and the alarms for what it and the
notices cannot settle alone (sdc_remediation.lambdas.logic.closing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

RECONCILE_EVERY: Final = Duration.minutes(15)
"""How often the reconcile function runs (an undelivered card waits at most this long once the
topic works again)."""

CARDS_UNDELIVERED_ALARM: Final = "cards-undelivered"
CARDS_UNDELIVERED_WHAT_TO_DO: Final = (
    "An approval card could not be delivered after its retries: nobody was asked to decide. "
    "`sdc status` lists the incident as card_undelivered. Check the notification topic (and its "
    "key policy); reconciliation sends the card again once publishing works. Meanwhile, the "
    "waiting RequestApproval state in the console shows the approval input to paste. "
    'docs/operate.md, "When the pipeline alarms".'
)
CLOSED_UNDECIDED_ALARM: Final = "closed-undecided"
CLOSED_UNDECIDED_WHAT_TO_DO: Final = (
    "An incident closed with no decision on its approval request: the waiting RequestApproval "
    "task was answered outside the approval state machine (someone used its task token, or "
    "its step failed after the card went out). Nothing it said was taken as a decision: the "
    "node stays cordoned and tainted. Read the incident (`sdc show <incident>`, its "
    "closed_undecided audit entry, CloudTrail's SendTaskSuccess/SendTaskFailure), then inspect "
    'the node and lift the cordon by hand. docs/operate.md, "When the pipeline alarms".'
)
NEEDS_PERSON_ALARM: Final = "reconcile-needs-person"
NEEDS_PERSON_WHAT_TO_DO: Final = (
    "Reconciliation found a stuck incident it cannot settle: a node kept cordoned after a "
    "failed close whose reboot or replacement has no outcome, an approval far past its "
    "timeout, or a card that still cannot go out. `sdc reconcile` lists them with the reason; "
    "the incident's audit log has a reconcile_needs_person entry (`sdc status` lists the "
    'nodes kept). docs/operate.md, "When the pipeline alarms".'
)


@dataclass(frozen=True)
class ReconciliationProps:
    reconcile: lambda_.IFunction


class Reconciliation(Construct):
    """An EventBridge schedule that invokes `reconcile` every `RECONCILE_EVERY`."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ReconciliationProps) -> None:
        super().__init__(scope, construct_id)
        reconcile = props.reconcile
        self.function_name = reconcile.function_name
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Settle stuck incidents (sdc_remediation.lambdas.logic.closing)",
            schedule=events.Schedule.rate(RECONCILE_EVERY),
            targets=[targets.LambdaFunction(reconcile, retry_attempts=0)],
        )
