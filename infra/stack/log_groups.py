"""Log groups with the configured retention (functions and state machines alike)."""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct

from sdc_remediation.infra.stack.nag import acknowledge_checkov

_RETENTION: Final = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retained_log_group(scope: Construct, construct_id: str, retention_days: int) -> logs.LogGroup:
    """A log group kept for `retention_days` (`sdc:logRetentionDays`) and retained when the stack
    is deleted (logs of past remediations are evidence)."""
    group = logs.LogGroup(
        scope,
        construct_id,
        retention=_RETENTION[retention_days],
        removal_policy=RemovalPolicy.RETAIN,
    )
    acknowledge_checkov(
        group,
        "CKV_AWS_158",
        "Encrypted at rest by CloudWatch Logs' own keys, no customer managed key: the logs hold "
        "incident and instance ids, evidence and decisions, no secret. A customer managed key "
        "would add a standing cost and a key policy granting the logs service, for no reader "
        "that the log group's IAM does not already stop.",
    )
    return group
