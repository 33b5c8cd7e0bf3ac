"""The one stack: it only composes the constructs and declares the outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, Stack
from constructs import Construct

from infra.stack.alarms import ContributorAlarms
from infra.stack.approval import ApprovalWorkflow
from infra.stack.asset import LambdaAsset
from infra.stack.audit_anchor import AuditAnchorLog
from infra.stack.dashboard import PipelineDashboard, pipeline_metric
from infra.stack.functions import Functions
from infra.stack.node_isolation import NodeIsolationAccess
from infra.stack.notifications import Notifications
from infra.stack.pause import PauseSwitch
from infra.stack.reconciliation import (
    CARDS_UNDELIVERED_ALARM,
    CARDS_UNDELIVERED_WHAT_TO_DO,
    NEEDS_PERSON_ALARM,
    NEEDS_PERSON_WHAT_TO_DO,
    Reconciliation,
)
from infra.stack.routing import Routing
from infra.stack.settings import Settings
from infra.stack.storage import Storage
from infra.stack.training_access import TrainingAccess
from infra.stack.workflow import (
    RemediationWorkflow,
    approval_name,
    remediation_name,
    state_machine_arn,
)
from lambdas.metric_names import PipelineMetric as M

REFUSES_BY_RAISING = frozenset({"decide"})
"""Functions whose errors are a designed answer: decide raises DecisionRefused so that a refused
approval fails its approval execution and the approver sees why. Their errors are on the
dashboard; they stay off the function-errors alarm, which would otherwise page for a typo."""


def console_url(state_machine_arn: str) -> str:
    return (
        f"https://{Aws.REGION}.console.aws.amazon.com/states/home?region={Aws.REGION}"
        f"#/statemachines/view/{state_machine_arn}"
    )


class SdcRemediationStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code_asset: LambdaAsset,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="SDC remediation: contributor alarms → incident → deep health check → "
            "human approval → node replacement → audit log",
            **kwargs,
        )

        storage = Storage(self, "Storage")
        audit_anchor = AuditAnchorLog(self, "AuditAnchor", settings=settings)
        notifications = Notifications(self, "Notifications", settings=settings)
        pause_switch = PauseSwitch(self, "PauseSwitch", settings=settings)
        remediation_arn = state_machine_arn(self, remediation_name(settings))
        approval_arn = state_machine_arn(self, approval_name(settings))

        functions = Functions(
            self,
            "Functions",
            settings=settings,
            code_asset=code_asset,
            storage=storage,
            audit_anchor=audit_anchor,
            notifications=notifications,
            pause_switch=pause_switch,
            remediation_arn=remediation_arn,
            approval_arn=approval_arn,
            remediation_name=remediation_name(settings),
        )
        if settings.node_isolation:
            NodeIsolationAccess(
                self,
                "NodeIsolation",
                settings=settings,
                roles=functions.kubernetes_roles,
                readers=functions.kubernetes_readers,
            )
        remediation = RemediationWorkflow(
            self,
            "Remediation",
            settings=settings,
            functions=functions.by_module,
            approval_state_machine_arn=approval_arn,
        )
        approval = ApprovalWorkflow(
            self,
            "Approval",
            settings=settings,
            decide=functions.decide,
            incidents_table_arn=storage.incidents.table_arn,
        )
        alarms = ContributorAlarms(self, "Alarms", settings=settings)
        routing = Routing(
            self,
            "Routing",
            alarm_names=alarms.alarm_names,
            open_incident=functions.open_incident,
            store_report=functions.store_report,
        )
        reconciliation = Reconciliation(
            self, "Reconciliation", reconcile=functions.by_module["reconcile"]
        )
        pipeline_alarms = [
            notifications.alarm_when_not_empty(
                "UndeliveredEventsAlarm",
                routing.dead_letter_queue,
                "EventBridge could not deliver an SDC event to its function.",
            ),
            notifications.alarm_when_not_empty(
                "FailedInvocationsAlarm",
                functions.failure_queue,
                "open_incident or store_report failed on an event after all retries "
                "(malformed event or a bug).",
            ),
            notifications.alarm_on_failed_executions(
                "RemediationFailedAlarm", remediation.state_machine, settings
            ),
            notifications.alarm_on_metric(
                "CardsUndeliveredAlarm",
                pipeline_metric(M.CARDS_UNDELIVERED),
                f"{settings.stack_name}-{CARDS_UNDELIVERED_ALARM}",
                CARDS_UNDELIVERED_WHAT_TO_DO,
            ),
            notifications.alarm_on_metric(
                "ReconcileNeedsPersonAlarm",
                pipeline_metric(M.RECONCILE_NEEDS_PERSON),
                f"{settings.stack_name}-{NEEDS_PERSON_ALARM}",
                NEEDS_PERSON_WHAT_TO_DO,
            ),
            audit_anchor.check_on_schedule(
                self, functions.verify_audit, notifications.topic, settings
            ),
            *notifications.alarm_on_function_errors(
                "FunctionErrorsAlarm",
                {m: fn for m, fn in functions.by_module.items() if m not in REFUSES_BY_RAISING},
                settings,
            ),
        ]
        dashboard = PipelineDashboard(
            self,
            "Dashboard",
            settings=settings,
            functions=functions.by_module,
            remediation=remediation.state_machine,
            approval=approval.state_machine,
            queues={
                "undelivered events (EventBridge)": routing.dead_letter_queue,
                "failed invocations (open_incident, store_report)": functions.failure_queue,
            },
            alarms=pipeline_alarms,
        )
        training = TrainingAccess(self, "TrainingAccess", namespace=settings.namespace)

        CfnOutput(
            self,
            "RemediationStateMachineConsole",
            description="Pending remediations; the waiting RequestApproval state shows the "
            "approval input to paste",
            value=console_url(remediation.state_machine.state_machine_arn),
        )
        CfnOutput(
            self,
            "ApprovalStateMachineConsole",
            description="Approve or reject: start an execution here",
            value=console_url(approval.state_machine.state_machine_arn),
        )
        CfnOutput(
            self,
            "ApprovalStateMachineArn",
            description="Grant approvers states:StartExecution on this ARN",
            value=approval.state_machine.state_machine_arn,
        )
        CfnOutput(
            self,
            "ApproverPolicyArn",
            description="Attach to approvers: StartExecution on the approval state machine "
            "(limited to sdc:approvers when set)",
            value=approval.approver_policy.managed_policy_arn,
        )
        CfnOutput(
            self,
            "AuditAnchorLogGroupName",
            description="Every audit entry's hash, append-only for the functions: "
            "sdc audit verify checks the audit table against it",
            value=audit_anchor.name,
        )
        CfnOutput(
            self,
            "DashboardUrl",
            description="The pipeline's CloudWatch dashboard: detection, incidents, approvals, "
            "errors",
            value=dashboard.url,
        )
        CfnOutput(
            self,
            "ReconcileFunctionName",
            description="Settles stuck incidents; runs on a schedule, sdc reconcile runs it now",
            value=reconciliation.function_name,
        )
        CfnOutput(self, "IncidentsTableName", value=storage.incidents.table_name)
        CfnOutput(self, "AuditTableName", value=storage.audit.table_name)
        CfnOutput(self, "NotificationTopicArn", value=notifications.topic.topic_arn)
        CfnOutput(
            self,
            "PauseParameterName",
            description="The pause switch: set it to true to hold new incidents (no deploy)",
            value=pause_switch.name,
        )
        CfnOutput(
            self,
            "DryRun",
            description="true: replacements are only recorded as would-replace (sdc:dryRun)",
            value="true" if settings.dry_run else "false",
        )
        CfnOutput(
            self,
            "UndeliveredEventsQueueUrl",
            description="Dead-letter queue of the EventBridge targets (sdc status counts it)",
            value=routing.dead_letter_queue.queue_url,
        )
        CfnOutput(
            self,
            "FailedInvocationsQueueUrl",
            description="Failed asynchronous invocations of open_incident and store_report",
            value=functions.failure_queue.queue_url,
        )
        CfnOutput(
            self,
            "TrainingPolicyArn",
            description="Attach to the training jobs' role(s): what the SDC emitter needs",
            value=training.policy.managed_policy_arn,
            export_name=f"{self.stack_name}-TrainingPolicyArn",
        )
