"""The output every `SdcRemediation` construct publishes its addresses under, for `sdc`.

Inside a team's stack CDK gives each `CfnOutput` a key that carries a hash of the construct's
path (`SdcIncidentsTableName7ABD01B1`); this one sets its key, so it is the same in every stack:
its value is every address of the construct (output name → value) as one JSON object. A stack
holds one construct, so the stack's name finds it. Standard library only: the operator CLI
imports it without the CDK.
"""

from __future__ import annotations

from typing import Final

DEPLOYMENT_OUTPUT: Final = "SdcDeployment"

INCIDENTS_TABLE: Final = "IncidentsTableName"
AUDIT_TABLE: Final = "AuditTableName"
APPROVAL_STATE_MACHINE: Final = "ApprovalStateMachineArn"
APPROVAL_CONSOLE: Final = "ApprovalStateMachineConsole"
REMEDIATION_CONSOLE: Final = "RemediationStateMachineConsole"
APPROVER_POLICY: Final = "ApproverPolicyArn"
TRAINING_POLICY: Final = "TrainingPolicyArn"
NOTIFICATION_TOPIC: Final = "NotificationTopicArn"
PAUSE_PARAMETER: Final = "PauseParameterName"
DRY_RUN: Final = "DryRun"
DASHBOARD_URL: Final = "DashboardUrl"
RECONCILE_FUNCTION: Final = "ReconcileFunctionName"
AUDIT_ANCHOR: Final = "AuditAnchorLogGroupName"
UNDELIVERED_EVENTS_QUEUE: Final = "UndeliveredEventsQueueUrl"
FAILED_INVOCATIONS_QUEUE: Final = "FailedInvocationsQueueUrl"
FAILED_REPORTS_QUEUE: Final = "FailedReportsQueueUrl"
DEAD_LETTER_QUEUES: Final = {
    UNDELIVERED_EVENTS_QUEUE: "undelivered events",
    FAILED_INVOCATIONS_QUEUE: "failed alarms",
    FAILED_REPORTS_QUEUE: "failed reports",
}
"""The dead-letter queues' URL outputs, and what `sdc status` calls them."""
OUTPUT_NAMES: Final = frozenset(
    {
        INCIDENTS_TABLE,
        AUDIT_TABLE,
        APPROVAL_STATE_MACHINE,
        APPROVAL_CONSOLE,
        REMEDIATION_CONSOLE,
        APPROVER_POLICY,
        TRAINING_POLICY,
        NOTIFICATION_TOPIC,
        PAUSE_PARAMETER,
        DRY_RUN,
        DASHBOARD_URL,
        RECONCILE_FUNCTION,
        AUDIT_ANCHOR,
        *DEAD_LETTER_QUEUES,
    }
)
"""The construct's CfnOutput ids, one per address (`SdcRemediation._outputs` publishes them)."""
