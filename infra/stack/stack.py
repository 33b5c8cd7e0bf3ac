"""The pipeline as one construct, `SdcRemediation`: it only composes the constructs and declares
the outputs; its typed props, `SdcRemediationProps` (every `sdc:*` key); and the standalone
app's one stack, `SdcRemediationStack`, which holds it (infra/construct.py is the library's
entry).

Each construct takes a props object of what it uses (its own module defines it);
`SdcRemediation` builds them from the settings and the constructs made before."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sdc_remediation.infra.stack.alarms import ContributorAlarms, ContributorAlarmsProps
from sdc_remediation.infra.stack.approval import ApprovalWorkflow, ApprovalWorkflowProps
from sdc_remediation.infra.stack.asset import LambdaAsset, build_lambda_asset
from sdc_remediation.infra.stack.audit_anchor import AuditAnchorLog, AuditAnchorLogProps
from sdc_remediation.infra.stack.dashboard import (
    PipelineDashboard,
    PipelineDashboardProps,
    pipeline_metric,
)
from sdc_remediation.infra.stack.functions import SPECS, Functions, FunctionsProps
from sdc_remediation.infra.stack.hardware_alerts import (
    HardwareAlerts,
    HardwareAlertsProps,
    workspace_targets,
)
from sdc_remediation.infra.stack.idle_sweep_schedules import IdleSweeps, IdleSweepsProps
from sdc_remediation.infra.stack.nag import check_construct
from sdc_remediation.infra.stack.no_clusters import refuse_deploying_without_clusters
from sdc_remediation.infra.stack.node_isolation import NodeIsolationAccess, NodeIsolationAccessProps
from sdc_remediation.infra.stack.notifications import (
    INTAKE_ERRORS_ALARM,
    Notifications,
    NotificationsProps,
    intake_errors_what_to_do,
)
from sdc_remediation.infra.stack.outputs import (
    APPROVAL_CONSOLE,
    APPROVAL_STATE_MACHINE,
    APPROVER_POLICY,
    AUDIT_ANCHOR,
    AUDIT_TABLE,
    DASHBOARD_URL,
    DEPLOYMENT_OUTPUT,
    DRY_RUN,
    FAILED_INVOCATIONS_QUEUE,
    FAILED_REPORTS_QUEUE,
    INCIDENTS_TABLE,
    NOTIFICATION_TOPIC,
    PAUSE_PARAMETER,
    RECONCILE_FUNCTION,
    REMEDIATION_CONSOLE,
    TRAINING_POLICY,
    UNDELIVERED_EVENTS_QUEUE,
)
from sdc_remediation.infra.stack.pause import PauseSwitch, PauseSwitchProps
from sdc_remediation.infra.stack.reconciliation import (
    CARDS_UNDELIVERED_ALARM,
    CARDS_UNDELIVERED_WHAT_TO_DO,
    CLOSED_UNDECIDED_ALARM,
    CLOSED_UNDECIDED_WHAT_TO_DO,
    NEEDS_PERSON_ALARM,
    NEEDS_PERSON_WHAT_TO_DO,
    Reconciliation,
    ReconciliationProps,
)
from sdc_remediation.infra.stack.routing import Routing, RoutingProps
from sdc_remediation.infra.stack.settings import CONTEXT_ATTRIBUTES, DeploymentSettings
from sdc_remediation.infra.stack.storage import Storage
from sdc_remediation.infra.stack.training_access import TrainingAccess, TrainingAccessProps
from sdc_remediation.infra.stack.workflow import (
    RemediationWorkflow,
    RemediationWorkflowProps,
    approval_name,
    remediation_name,
    state_machine_arn,
)
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.errors import SettingsError

DESCRIPTION: Final = (
    "SDC remediation: contributor alarms → incident → deep health check → human approval → "
    "node replacement → audit log"
)

REFUSES_BY_RAISING = frozenset({"decide"})
"""Functions whose errors are a designed answer: decide raises DecisionRefused so that a refused
approval fails its approval execution and the approver sees why. Their errors are on the
dashboard; they stay off the function-errors alarm, which would otherwise page for a typo."""
TAKES_UNTRUSTED_INPUT = frozenset(spec.module for spec in SPECS if spec.intake)
"""Functions any training pod (a report, a metric datapoint) or alert sender can make raise:
their errors alarm on their own (`<stack>-intake-errors`), never in the sum a node-action
failure raises, which one malformed report would otherwise keep red."""


def console_url(state_machine_arn: str) -> str:
    return (
        f"https://{Aws.REGION}.console.aws.amazon.com/states/home?region={Aws.REGION}"
        f"#/statemachines/view/{state_machine_arn}"
    )


@dataclass(frozen=True)
class SdcRemediationProps:
    """Every `sdc:*` context key as a field (`CONTEXT_FIELDS` names each field's key), in the
    values the key takes (docs/settings.md); None: the key's default. The props are
    checked when made, by the same parsers and with the same messages as the context keys
    (`sdc_remediation.infra.stack.settings.DeploymentSettings.from_context`): a bad value raises `SettingsError`.

    Used as a construct in a team's own stack, `stack_name` names the pipeline's resources
    (the state machines `<stack_name>-remediation` and `-approval`, the pause switch
    `/<stack_name>/paused`, the training policy's export): give each instance its own."""

    stack_name: str | None = None
    clusters: Mapping[str, str] | None = None
    approval_timeout_seconds: int | None = None
    approver_time_zone: str | None = None
    notification_email: str | None = None
    namespace: str | None = None
    alarm_name_prefix: str | None = None
    health_checks: Sequence[str] | None = None
    health_check_poll_seconds: int | None = None
    health_check_max_polls: int | None = None
    replacement_poll_seconds: int | None = None
    replacement_max_polls: int | None = None
    replace_retry_seconds: int | None = None
    replace_max_retries: int | None = None
    reboot_poll_seconds: int | None = None
    reboot_max_polls: int | None = None
    dry_run: bool | None = None
    acknowledge_no_clusters: bool | None = None
    log_retention_days: int | None = None
    guard_max_open_nodes: int | None = None
    guard_max_open_percent: int | None = None
    storm_threshold: int | None = None
    storm_window_seconds: int | None = None
    report_openings_per_minute: int | None = None
    job_openings_per_minute: int | None = None
    repeat_offender_incidents: int | None = None
    repeat_offender_window_days: int | None = None
    pause_parameter: str | None = None
    node_action_concurrency: int | None = None
    intake_concurrency: int | None = None
    recovery_label_clusters: Sequence[str] | None = None
    node_isolation: Mapping[str, str] | None = None
    job_pods: Mapping[str, str] | None = None
    node_isolation_access: str | None = None
    telemetry: Mapping[str, Mapping[str, str | None]] | None = None
    hardware_alerts: Mapping[str, Any] | None = None
    slurm_controllers: Mapping[str, str] | None = None
    approvals_required: int | None = None
    approvers: Sequence[str] | None = None
    human_session_roles: Sequence[str] | None = None
    require_identity_proof: bool | None = None
    idle_sweep: Mapping[str, Any] | None = None
    code_asset: LambdaAsset | None = None
    """The functions' code (`sdc_remediation.infra.stack.asset.build_lambda_asset`); None: built on demand."""

    def __post_init__(self) -> None:
        self.settings  # noqa: B018 - checked when made, as the context keys are at synth

    @property
    def settings(self) -> DeploymentSettings:
        """The typed settings these props give (raises `SettingsError` on a bad value)."""
        return DeploymentSettings.from_context(self.context())

    def context(self) -> dict[str, Any]:
        """The props as the `sdc:*` context keys they stand for (the given ones only)."""
        return {
            key: _as_context(getattr(self, attr))
            for key, attr in CONTEXT_FIELDS.items()
            if getattr(self, attr) is not None
        }

    @classmethod
    def from_context(
        cls, context: Mapping[str, Any], *, code_asset: LambdaAsset | None = None
    ) -> SdcRemediationProps:
        """The props an app's context gives: its `sdc:*` keys checked whole first (an unknown
        or renamed key is refused, as `cdk synth` refuses it), every other key ignored."""
        DeploymentSettings.from_context(context)
        given = {attr: context.get(key) for key, attr in CONTEXT_FIELDS.items()}
        return cls(**given, code_asset=code_asset)


CONTEXT_FIELDS: Final = CONTEXT_ATTRIBUTES
"""`sdc:*` context key → the `SdcRemediationProps` field that stands for it."""


def _as_context(value: Any) -> Any:
    """A props value as a context value: sequences as lists, mappings as dicts (the parsers
    read JSON's shapes)."""
    if isinstance(value, Mapping):
        return {key: _as_context(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_context(item) for item in value]
    return value


def _refuse_a_second_in_the_stack(construct: Construct) -> None:
    """One construct per stack: its outputs, logical ids and resource names are the stack's
    (`sdc` finds it by the stack's name). A second is refused here, in one line, not deep in the
    CDK (`section 'Resources' already contains 'IncidentsTable'`)."""
    stack = Stack.of(construct)
    others = [
        c.node.path
        for c in stack.node.find_all()
        if isinstance(c, SdcRemediation) and c is not construct
    ]
    if others:
        raise SettingsError(
            f"stack {stack.stack_name} already holds the SdcRemediation construct {others[0]}: "
            f"one stack holds one; put {construct.node.path} in a stack of its own"
        )


class SdcRemediation(Construct):
    """The whole pipeline, in a team's own stack or in the standalone app's
    (`SdcRemediationStack`): the constructs in the order they depend on each other, kept as
    attributes for the pipeline alarms and the outputs; cdk-nag's AwsSolutions checks on this
    construct's tree (`sdc_remediation.infra.stack.nag.check_construct`)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: SdcRemediationProps) -> None:
        super().__init__(scope, construct_id)
        _refuse_a_second_in_the_stack(self)
        settings = props.settings
        code_asset = props.code_asset or build_lambda_asset()
        if settings.refuses_to_deploy:
            refuse_deploying_without_clusters(Stack.of(self))
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
            settings,
            decide=fns.decide,
            page=fns.page,
            incidents_table_arn=self.storage.incidents.table_arn,
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
        self.reconciliation, self.idle_sweeps = self._schedules(settings)
        self.dashboard = PipelineDashboard(
            self, "Dashboard", props=self._dashboard_props(settings, self._pipeline_alarms())
        )
        self.training = TrainingAccess(
            self, "TrainingAccess", props=TrainingAccessProps(settings.namespace)
        )
        self._outputs(settings)
        check_construct(self)

    def _schedules(self, settings: DeploymentSettings) -> tuple[Reconciliation, IdleSweeps | None]:
        """What runs on a schedule: the reconciliation, and each swept cluster's idle sweep
        (`sdc:idleSweep`; none without it)."""
        fns = self.functions
        reconciliation = Reconciliation(
            self, "Reconciliation", props=ReconciliationProps(fns.by_module["reconcile"])
        )
        if settings.idle_sweep is None or fns.sweep is None:
            return reconciliation, None
        sweeps = IdleSweeps(
            self, "IdleSweeps", props=IdleSweepsProps(settings.idle_sweep, fns.sweep)
        )
        return reconciliation, sweeps

    def _hardware_alerts(self, settings: DeploymentSettings) -> HardwareAlerts | None:
        """The rules and alert manager definitions of the telemetry clusters' workspaces."""
        if not settings.telemetry:
            return None
        props = HardwareAlertsProps(
            settings.stack_name,
            workspace_targets(Stack.of(self), settings.telemetry),
            settings.hardware_alerts,
            self.notifications.key,
            settings.log_retention_days,
        )
        return HardwareAlerts(self, "HardwareAlerts", props=props)

    def _functions_props(
        self, settings: DeploymentSettings, code_asset: LambdaAsset, approval_arn: str
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
                {
                    m: fn
                    for m, fn in functions.by_module.items()
                    if m not in REFUSES_BY_RAISING | TAKES_UNTRUSTED_INPUT
                },
            ),
            *notifications.alarm_on_function_errors(
                "IntakeErrorsAlarm",
                {m: fn for m, fn in functions.by_module.items() if m in TAKES_UNTRUSTED_INPUT},
                INTAKE_ERRORS_ALARM,
                intake_errors_what_to_do(TAKES_UNTRUSTED_INPUT),
            ),
        ]

    def _dashboard_props(
        self, settings: DeploymentSettings, alarms: list[cloudwatch.Alarm]
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
            page=self.functions.page,
        )

    def _outputs(self, settings: DeploymentSettings) -> None:
        """What an operator and the CLI read after a deploy: consoles, names, ARNs, URLs; and
        all of them again as one JSON object under the key `SdcDeployment`, which CDK does not
        hash inside a team's stack (the others' keys carry the construct path's hash there):
        `sdc --stack NAME` and `sdc --outputs FILE` find the construct by it."""
        self._published: dict[str, str] = {}
        self._output(
            REMEDIATION_CONSOLE,
            description="Pending remediations; the waiting RequestApproval state shows the "
            "approval input to paste",
            value=console_url(self.remediation.state_machine.state_machine_arn),
        )
        self._output(
            APPROVAL_CONSOLE,
            description="Approve or reject: start an execution here",
            value=console_url(self.approval.state_machine.state_machine_arn),
        )
        self._output(
            APPROVAL_STATE_MACHINE,
            description="Grant approvers states:StartExecution on this ARN",
            value=self.approval.state_machine.state_machine_arn,
        )
        self._output(
            APPROVER_POLICY,
            description="Attach to approvers: StartExecution on the approval state machine "
            "(limited to sdc:approvers when set)",
            value=self.approval.approver_policy.managed_policy_arn,
        )
        self._output(
            AUDIT_ANCHOR,
            description="Every audit entry's hash, append-only for the functions: "
            "sdc audit verify checks the audit table against it",
            value=self.audit_anchor.name,
        )
        self._output(
            DASHBOARD_URL,
            description="The pipeline's CloudWatch dashboard: detection, incidents, approvals, "
            "errors",
            value=self.dashboard.url,
        )
        self._output(
            RECONCILE_FUNCTION,
            description="Settles stuck incidents; runs on a schedule, sdc reconcile runs it now",
            value=self.reconciliation.function_name,
        )
        self._output(INCIDENTS_TABLE, value=self.storage.incidents.table_name)
        self._output(AUDIT_TABLE, value=self.storage.audit.table_name)
        self._output(NOTIFICATION_TOPIC, value=self.notifications.topic.topic_arn)
        self._output(
            PAUSE_PARAMETER,
            description="The pause switch: set it to true to hold new incidents (no deploy)",
            value=self.pause_switch.name,
        )
        self._output(
            DRY_RUN,
            description="true: replacements are only recorded as would-replace (sdc:dryRun)",
            value="true" if settings.dry_run else "false",
        )
        self._output(
            UNDELIVERED_EVENTS_QUEUE,
            description="Dead-letter queue of the EventBridge targets (sdc status counts it)",
            value=self.routing.dead_letter_queue.queue_url,
        )
        self._output(
            FAILED_INVOCATIONS_QUEUE,
            description="Failed asynchronous invocations of open_incident (contributor alarms)",
            value=self.functions.failure_queue.queue_url,
        )
        self._output(
            FAILED_REPORTS_QUEUE,
            description="Failed asynchronous invocations of store_report (SDC reports)",
            value=self.functions.report_failure_queue.queue_url,
        )
        self._output(
            TRAINING_POLICY,
            description="Attach to the training jobs' role(s): what the SDC emitter needs",
            value=self.training.policy.managed_policy_arn,
            export_name=f"{settings.stack_name}-TrainingPolicyArn",
        )
        CfnOutput(
            self,
            "Deployment",
            key=DEPLOYMENT_OUTPUT,
            description=f"Every address above as one JSON object, for sdc ({self.node.path})",
            value=Stack.of(self).to_json_string(self._published),
        )

    def _output(
        self,
        name: str,
        *,
        value: str,
        description: str | None = None,
        export_name: str | None = None,
    ) -> None:
        CfnOutput(self, name, value=value, description=description, export_name=export_name)
        self._published[name] = value


class SdcRemediationStack(Stack):
    """The standalone app's one stack (`cdk.json`, `sdc_remediation.infra.stack.app`): the construct, nothing
    else. Its id `Default` keeps it out of the logical ids, so the template's resources are
    named as they were when the stack held the constructs itself."""

    def __init__(
        self, scope: Construct, construct_id: str, *, props: SdcRemediationProps, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, description=DESCRIPTION, **kwargs)
        self.pipeline = SdcRemediation(self, "Default", props=props)
