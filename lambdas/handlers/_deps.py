"""The one place handlers get their dependencies from.

`deps()` builds the boto3 adapters from the environment on first use and caches them, so
importing a handler makes no AWS call and needs no environment. Tests and the local drill wire
in their own (a fake HyperPod, moto-backed adapters...) with `set_deps(...)` or the
`override(...)` context manager, given either a `Deps` or a factory of them:

    hyperpod = FakeHyperPod(); hyperpod.add_cluster(...)
    set_deps(build_deps(Settings.from_env(), hyperpod=hyperpod))          # one fixed Deps
    set_deps(lambda: build_deps(Settings.from_env(), hyperpod=hyperpod))  # per invocation

A factory is called on every `deps()`, so each invocation reads the environment it runs with
(the local run gives every function its own environment, as Lambda does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sdc_remediation.lambdas.logic.ports import (
    AuditAnchor,
    AuditLog,
    Clock,
    Deps,
    GuardStore,
    HistoryStore,
    HyperPod,
    IdentityVerifier,
    IncidentStore,
    KubernetesNodes,
    LifecycleEvents,
    NoAuditAnchor,
    NoKubernetes,
    NoLifecycleEvents,
    NoPauseSwitch,
    NoPrometheus,
    NoSlurm,
    Notifier,
    PageDeps,
    PauseSwitch,
    PrometheusQueries,
    ReportStore,
    SlurmControllers,
    SystemClock,
    Workflow,
)
from sdc_remediation.lambdas.models.settings import Settings

if TYPE_CHECKING:
    from boto3.session import Session

DepsSource = Deps | Callable[[], Deps]

_override: DepsSource | None = None
_built: Deps | None = None


def deps() -> Deps:
    """The injected Deps (or what the injected factory makes) if any, else the ones built from
    the environment (once)."""
    global _built
    if isinstance(_override, Deps):
        return _override
    if _override is not None:
        return _override()
    if _built is None:
        _built = build_deps(Settings.from_env())
    return _built


def build_deps(
    settings: Settings,
    *,
    session: Session | None = None,
    hyperpod: HyperPod | None = None,
    incidents: IncidentStore | None = None,
    reports: ReportStore | None = None,
    audit: AuditLog | None = None,
    notifier: Notifier | None = None,
    workflow: Workflow | None = None,
    guard: GuardStore | None = None,
    history: HistoryStore | None = None,
    switch: PauseSwitch | None = None,
    clock: Clock | None = None,
    kubernetes: KubernetesNodes | None = None,
    slurm: SlurmControllers | None = None,
    prometheus: PrometheusQueries | None = None,
    lifecycle: LifecycleEvents | None = None,
    identity: IdentityVerifier | None = None,
    anchor: AuditAnchor | None = None,
) -> Deps:
    """The boto3 adapters for `settings` (clients built lazily, all from one session: `session`
    if given), with any of them replaced by the keyword arguments.

    boto3 and the adapters are imported here rather than with this module, so that importing a
    handler costs less than importing boto3: a function loads them on its first invocation.
    """
    import boto3

    from sdc_remediation.lambdas.adapters._aws import LazyClient, client_factory
    from sdc_remediation.lambdas.adapters.audit_anchor import LogsAuditAnchor
    from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
    from sdc_remediation.lambdas.adapters.dynamodb.guard import DynamoGuardStore
    from sdc_remediation.lambdas.adapters.dynamodb.history import DynamoHistoryStore
    from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
    from sdc_remediation.lambdas.adapters.dynamodb.reports import DynamoReportStore
    from sdc_remediation.lambdas.adapters.eks_token import EksTokens, sts_factory
    from sdc_remediation.lambdas.adapters.events import EventBridgeLifecycleEvents
    from sdc_remediation.lambdas.adapters.hyperpod import SageMakerHyperPod
    from sdc_remediation.lambdas.adapters.identity import StsIdentityVerifier
    from sdc_remediation.lambdas.adapters.kubernetes import EksKubernetesNodes
    from sdc_remediation.lambdas.adapters.prometheus import AmpPrometheus
    from sdc_remediation.lambdas.adapters.slurm import SsmSlurmControllers
    from sdc_remediation.lambdas.adapters.sns import SnsNotifier
    from sdc_remediation.lambdas.adapters.ssm import SsmPauseSwitch
    from sdc_remediation.lambdas.adapters.stepfunctions import StepFunctionsWorkflow

    session = session or boto3.session.Session()
    dynamodb = LazyClient(client_factory("dynamodb", session)).get  # one client for both tables
    table = settings.incidents_table
    return Deps(
        settings=settings,
        hyperpod=hyperpod or SageMakerHyperPod(client_factory("sagemaker", session)),
        incidents=incidents or DynamoIncidentStore(table, dynamodb),
        reports=reports or DynamoReportStore(table, dynamodb),
        audit=audit or DynamoAuditLog(settings.audit_table, dynamodb),
        notifier=notifier or SnsNotifier(settings.topic_arn, client_factory("sns", session)),
        workflow=workflow
        or StepFunctionsWorkflow(
            settings.state_machine_arn, client_factory("stepfunctions", session)
        ),
        guard=guard or DynamoGuardStore(table, dynamodb),
        history=history or DynamoHistoryStore(table, dynamodb),
        switch=switch
        or (
            SsmPauseSwitch(settings.pause_parameter, client_factory("ssm", session))
            if settings.pause_parameter
            else NoPauseSwitch()
        ),
        clock=clock or SystemClock(),
        kubernetes=kubernetes
        or (
            EksKubernetesNodes(client_factory("eks", session), EksTokens(sts_factory(session)))
            if any(c.isolate for c in settings.node_isolation.values())
            else NoKubernetes()
        ),
        slurm=slurm
        or (
            SsmSlurmControllers(client_factory("ssm", session))
            if any(c.slurm_controller for c in settings.node_isolation.values())
            else NoSlurm()
        ),
        prometheus=prometheus
        or (AmpPrometheus(session.get_credentials) if settings.telemetry else NoPrometheus()),
        lifecycle=lifecycle
        or (
            EventBridgeLifecycleEvents(settings.event_bus_name, client_factory("events", session))
            if settings.event_bus_name
            else NoLifecycleEvents()
        ),
        identity=identity or StsIdentityVerifier(),
        anchor=anchor
        or (
            LogsAuditAnchor(settings.audit_anchor_log_group, client_factory("logs", session))
            if settings.audit_anchor_log_group
            else NoAuditAnchor()
        ),
    )


def set_deps(value: DepsSource | None) -> None:
    """Use `value` for every handler from now on; None goes back to the environment."""
    global _override
    _override = value


@contextmanager
def override(value: DepsSource) -> Iterator[DepsSource]:
    """`with override(deps): handler(event, context)`; restores what was there before."""
    global _override
    previous = _override
    _override = value
    try:
        yield value
    finally:
        _override = previous


def reset() -> None:
    """Forget injected and built deps (the next `deps()` reads the environment again)."""
    global _override, _built
    _override = None
    _built = None


def page_deps() -> PageDeps:
    """What the dashboard's page reads (`PageDeps`), built from the environment on every call:
    one table reader, no other client. Tests give it moto's account (its environment names
    the table)."""
    from sdc_remediation.lambdas.adapters._aws import client_factory
    from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoOpenIncidents

    settings = Settings.from_env()
    return PageDeps(
        settings=settings,
        incidents=DynamoOpenIncidents(settings.incidents_table, client_factory("dynamodb")),
    )
