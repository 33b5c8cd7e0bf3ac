"""The one stack: it only composes the constructs and declares the outputs.

Each construct takes a props object of what it uses (its own module defines it); the stack
builds them from the settings and the constructs made before."""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.stack.alarms import ContributorAlarms, ContributorAlarmsProps
from infra.stack.approval import ApprovalWorkflow, ApprovalWorkflowProps
from infra.stack.asset import LambdaAsset
from infra.stack.audit_anchor import AuditAnchorLog, AuditAnchorLogProps
from infra.stack.dashboard import PipelineDashboard, PipelineDashboardProps, pipeline_metric
from infra.stack.functions import Functions, FunctionsProps
from infra.stack.hardware_alerts import HardwareAlerts, HardwareAlertsProps, workspace_targets
from infra.stack.node_isolation import NodeIsolationAccess, NodeIsolationAccessProps
from infra.stack.notifications import Notifications, NotificationsProps
from infra.stack.pause import PauseSwitch, PauseSwitchProps
from infra.stack.reconciliation import (
    CARDS_UNDELIVERED_ALARM,
    CARDS_UNDELIVERED_WHAT_TO_DO,
    CLOSED_UNDECIDED_ALARM,
    CLOSED_UNDECIDED_WHAT_TO_DO,
    NEEDS_PERSON_ALARM,
    NEEDS_PERSON_WHAT_TO_DO,
    Reconciliation,
    ReconciliationProps,
)
from infra.stack.routing import Routing, RoutingProps
from infra.stack.settings import Settings
from infra.stack.storage import Storage
from infra.stack.training_access import TrainingAccess, TrainingAccessProps
from infra.stack.workflow import (
    RemediationWorkflow,
    RemediationWorkflowProps,
    approval_name,
    remediation_name,
    state_machine_arn,
)
from lambdas.metric_names import PipelineMetric as M

DESCRIPTION: Final = (
    "SDC remediation: contributor alarms → incident → deep health check → human approval → "
    "node replacement → audit log"
)

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
    """The constructs in the order they depend on each other; they are kept as attributes for
    the pipeline alarms and the outputs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code_asset: LambdaAsset,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description=DESCRIPTION, **kwargs)
        name = settings.stack_name
        self.storage = Storage(self, "Storage")
        self.audit_anchor = AuditAnchorLog(self, "AuditAnchor", props=AuditAnchorLogProps(name))
        self.notifications = Notifications(
            self, "Notifications", props=NotificationsProps(name, settings.notification_email)
        )
        self.pause_switch = PauseSwitch(
            self, "PauseSwitch", props=PauseSwitchProps(settings.pause_parameter_name)
        )
        self.hardware_alerts = self._hardware_alerts(settings)
        approval_arn = state_machine_arn(self, approval_name(name))
        self.functions = fns = Functions(
            self, "Functions", props=self._functions_props(settings, code_asset, approval_arn)
        )
        if self.hardware_alerts:
            self.hardware_alerts.deliver_to(fns.store_report)
        if settings.node_isolation:
            roles = (fns.kubernetes_roles, fns.recovery_roles, fns.kubernetes_readers)
            isolation = NodeIsolationAccessProps.from_settings(settings, *roles)
            NodeIsolationAccess(self, "NodeIsolation", props=isolation)
        remediation = RemediationWorkflowProps.from_settings(
            settings, functions=fns.by_module, approval_state_machine_arn=approval_arn
        )
        self.remediation = RemediationWorkflow(self, "Remediation", props=remediation)
        approval = ApprovalWorkflowProps.from_settings(
            settings, decide=fns.decide, incidents_table_arn=self.storage.incidents.table_arn
        )
        self.approval = ApprovalWorkflow(self, "Approval", props=approval)
        self.contributor_alarms = ContributorAlarms(
            self,
            "Alarms",
            props=ContributorAlarmsProps(settings.namespace, settings.alarm_name_prefix),
        )
        self.routing = Routing(
            self,
            "Routing",
            props=RoutingProps(
                self.contributor_alarms.alarm_names, fns.open_incident, fns.store_report
            ),
        )
        self.reconciliation = Reconciliation(
            self, "Reconciliation", props=ReconciliationProps(fns.by_module["reconcile"])
        )
        self.dashboard = PipelineDashboard(
            self, "Dashboard", props=self._dashboard_props(settings, self._pipeline_alarms())
        )
        self.training = TrainingAccess(
            self, "TrainingAccess", props=TrainingAccessProps(settings.namespace)
        )
        self._outputs(dry_run=settings.dry_run)

    def _hardware_alerts(self, settings: Settings) -> HardwareAlerts | None:
        """The rules and alert manager definitions of the telemetry clusters' workspaces."""
        if not settings.telemetry:
            return None
        props = HardwareAlertsProps(
            settings.stack_name,
            workspace_targets(self, settings.telemetry),
            settings.hardware_alerts,
            self.notifications.key,
            settings.log_retention_days,
        )
        return HardwareAlerts(self, "HardwareAlerts", props=props)

    def _functions_props(
        self, settings: Settings, code_asset: LambdaAsset, approval_arn: str
    ) -> FunctionsProps:
        return FunctionsProps.from_settings(
            self,
            settings,
            code_asset=code_asset,
            storage=self.storage,
            audit_anchor=self.audit_anchor,
            notifications=self.notifications,
            pause_switch=self.pause_switch,
            remediation_arn=state_machine_arn(self, remediation_name(settings.stack_name)),
            approval_arn=approval_arn,
        )

    def _pipeline_alarms(self) -> list[cloudwatch.Alarm]:
        """The alarms on the pipeline itself, all publishing to the notification topic: the
        dead-letter queues, failed executions, undelivered cards, incidents reconciliation cannot
        settle, broken audit chains (checked on a schedule), function errors."""
        notifications, functions = self.notifications, self.functions
        return [
            notifications.alarm_when_not_empty(
                "UndeliveredEventsAlarm",
                self.routing.dead_letter_queue,
                "EventBridge could not deliver an SDC event to its function.",
            ),
            notifications.alarm_when_not_empty(
                "FailedInvocationsAlarm",
                functions.failure_queue,
                "open_incident failed on a contributor alarm after all retries (malformed "
                "event or a bug): a suspect node may have no incident.",
            ),
            notifications.alarm_when_not_empty(
                "FailedReportsAlarm",
                functions.report_failure_queue,
                "store_report failed on an SDC report after all retries (a malformed or "
                "forged report, one dated ahead, or a bug).",
            ),
            notifications.alarm_on_failed_executions(
                "RemediationFailedAlarm", self.remediation.state_machine
            ),
            notifications.alarm_on_metric(
                "CardsUndeliveredAlarm",
                pipeline_metric(M.CARDS_UNDELIVERED),
                CARDS_UNDELIVERED_ALARM,
                CARDS_UNDELIVERED_WHAT_TO_DO,
            ),
            notifications.alarm_on_metric(
                "ClosedUndecidedAlarm",
                pipeline_metric(M.CLOSED_UNDECIDED),
                CLOSED_UNDECIDED_ALARM,
                CLOSED_UNDECIDED_WHAT_TO_DO,
            ),
            notifications.alarm_on_metric(
                "ReconcileNeedsPersonAlarm",
                pipeline_metric(M.RECONCILE_NEEDS_PERSON),
                NEEDS_PERSON_ALARM,
                NEEDS_PERSON_WHAT_TO_DO,
            ),
            self.audit_anchor.check_on_schedule(self, functions.verify_audit, notifications.topic),
            *notifications.alarm_on_function_errors(
                "FunctionErrorsAlarm",
                {m: fn for m, fn in functions.by_module.items() if m not in REFUSES_BY_RAISING},
            ),
        ]

    def _dashboard_props(
        self, settings: Settings, alarms: list[cloudwatch.Alarm]
    ) -> PipelineDashboardProps:
        return PipelineDashboardProps(
            stack_name=settings.stack_name,
            namespace=settings.namespace,
            functions=self.functions.by_module,
            remediation=self.remediation.state_machine,
            approval=self.approval.state_machine,
            queues={
                "undelivered events (EventBridge)": self.routing.dead_letter_queue,
                "failed alarms (open_incident)": self.functions.failure_queue,
                "failed reports (store_report)": self.functions.report_failure_queue,
            },
            alarms=alarms,
        )

    def _outputs(self, *, dry_run: bool) -> None:
        """What an operator and the CLI read after a deploy: consoles, names, ARNs, URLs."""
        CfnOutput(
            self,
            "RemediationStateMachineConsole",
            description="Pending remediations; the waiting RequestApproval state shows the "
            "approval input to paste",
            value=console_url(self.remediation.state_machine.state_machine_arn),
        )
        CfnOutput(
            self,
            "ApprovalStateMachineConsole",
            description="Approve or reject: start an execution here",
            value=console_url(self.approval.state_machine.state_machine_arn),
        )
        CfnOutput(
            self,
            "ApprovalStateMachineArn",
            description="Grant approvers states:StartExecution on this ARN",
            value=self.approval.state_machine.state_machine_arn,
        )
        CfnOutput(
            self,
            "ApproverPolicyArn",
            description="Attach to approvers: StartExecution on the approval state machine "
            "(limited to sdc:approvers when set)",
            value=self.approval.approver_policy.managed_policy_arn,
        )
        CfnOutput(
            self,
            "AuditAnchorLogGroupName",
            description="Every audit entry's hash, append-only for the functions: "
            "sdc audit verify checks the audit table against it",
            value=self.audit_anchor.name,
        )
        CfnOutput(
            self,
            "DashboardUrl",
            description="The pipeline's CloudWatch dashboard: detection, incidents, approvals, "
            "errors",
            value=self.dashboard.url,
        )
        CfnOutput(
            self,
            "ReconcileFunctionName",
            description="Settles stuck incidents; runs on a schedule, sdc reconcile runs it now",
            value=self.reconciliation.function_name,
        )
        CfnOutput(self, "IncidentsTableName", value=self.storage.incidents.table_name)
        CfnOutput(self, "AuditTableName", value=self.storage.audit.table_name)
        CfnOutput(self, "NotificationTopicArn", value=self.notifications.topic.topic_arn)
        CfnOutput(
            self,
            "PauseParameterName",
            description="The pause switch: set it to true to hold new incidents (no deploy)",
            value=self.pause_switch.name,
        )
        CfnOutput(
            self,
            "DryRun",
            description="true: replacements are only recorded as would-replace (sdc:dryRun)",
            value="true" if dry_run else "false",
        )
        CfnOutput(
            self,
            "UndeliveredEventsQueueUrl",
            description="Dead-letter queue of the EventBridge targets (sdc status counts it)",
            value=self.routing.dead_letter_queue.queue_url,
        )
        CfnOutput(
            self,
            "FailedInvocationsQueueUrl",
            description="Failed asynchronous invocations of open_incident (contributor alarms)",
            value=self.functions.failure_queue.queue_url,
        )
        CfnOutput(
            self,
            "FailedReportsQueueUrl",
            description="Failed asynchronous invocations of store_report (SDC reports)",
            value=self.functions.report_failure_queue.queue_url,
        )
        CfnOutput(
            self,
            "TrainingPolicyArn",
            description="Attach to the training jobs' role(s): what the SDC emitter needs",
            value=self.training.policy.managed_policy_arn,
            export_name=f"{self.stack_name}-TrainingPolicyArn",
        )
