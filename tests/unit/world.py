"""A small world for logic tests: the in-memory fakes, the project's fake HyperPod with the
documented contributor event's cluster and instance, and drivers that walk an incident to a
given point of its lifecycle through the logic itself."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.memory import (
    FakeIdentityVerifier,
    FakeKubernetesNodes,
    FakePauseSwitch,
    FakePrometheus,
    FakeWorkflow,
    InMemoryAuditAnchor,
    InMemoryAuditLog,
    InMemoryIncidentStore,
    RecordingLifecycleEvents,
    RecordingNotifier,
    SteppingClock,
)
from sdc_remediation.lambdas.logic import approval, health_check, intake, isolation
from sdc_remediation.lambdas.logic.ports import Deps, NoSlurm, SlurmControllers
from sdc_remediation.lambdas.logic.safety.decisions import approval_binding
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import (
    DecisionRequest,
    IncidentRef,
    parse_approval_request,
)
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import Settings
from tests.conftest import load_fixture

CLUSTER = "ml-cluster-1"
INSTANCE = "i-0abc1234def567890"
GROUP = "gpu-workers"
EKS = "ml-eks-1"
NODE = "ip-10-1-17-42.us-west-2.compute.internal"
"""The Kubernetes node of INSTANCE: named unlike its instance id, as HyperPod EKS nodes may be."""
TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAfake-task-token"
APPROVAL_ARN = "arn:aws:states:us-west-2:111122223333:stateMachine:sdc-approval"
APPROVAL_EXECUTION = "arn:aws:states:us-west-2:111122223333:execution:sdc-approval:a1"
APPROVER_ROLE = "AWSReservedSSO_SdcApprover_0123456789abcdef"
"""An IAM Identity Center permission set's role: its sessions are named by the user."""
ALICE = f"arn:aws:sts::111122223333:assumed-role/{APPROVER_ROLE}/alice"
BOB = "arn:aws:iam::111122223333:user/bob"


def settings(**changes: Any) -> Settings:
    base = Settings(
        incidents_table="incidents",
        audit_table="audit",
        topic_arn="arn:aws:sns:us-west-2:111122223333:sdc",
        allowed_clusters=frozenset({CLUSTER}),
        state_machine_arn="arn:aws:states:us-west-2:111122223333:stateMachine:remediation",
        approval_state_machine_arn=APPROVAL_ARN,
    )
    return dataclasses.replace(base, **changes)


def room_for_a_job(nodes: int = 4) -> Settings:
    """Settings whose blast-radius guard and storm rule leave room for a job-level incident over
    `nodes` nodes of a cluster of more than that (every node counts against both)."""
    return settings(
        guard_max_open_nodes=nodes, guard_max_open_percent=100, storm_threshold=2 * nodes
    )


def alarm_event(**detail_changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(load_fixture("events", "contributor_alarm"))
    event["detail"].update(detail_changes)
    return event


@dataclass
class World:
    hyperpod: FakeHyperPod = field(default_factory=lambda: FakeHyperPod(health_check_polls=2))
    store: InMemoryIncidentStore = field(default_factory=InMemoryIncidentStore)
    audit: InMemoryAuditLog = field(default_factory=InMemoryAuditLog)
    notifier: RecordingNotifier = field(default_factory=RecordingNotifier)
    workflow: FakeWorkflow = field(default_factory=FakeWorkflow)
    clock: SteppingClock = field(default_factory=SteppingClock)
    switch: FakePauseSwitch = field(default_factory=FakePauseSwitch)
    settings: Settings = field(default_factory=settings)
    kube: FakeKubernetesNodes = field(default_factory=FakeKubernetesNodes)
    prometheus: FakePrometheus = field(default_factory=FakePrometheus)
    lifecycle: RecordingLifecycleEvents = field(default_factory=RecordingLifecycleEvents)
    slept: list[float] = field(default_factory=list)
    """The waits a step asked for (between the attempts of a notice): recorded, not slept."""
    identity: FakeIdentityVerifier = field(default_factory=FakeIdentityVerifier)
    anchor: InMemoryAuditAnchor = field(default_factory=InMemoryAuditAnchor)
    eks_cluster: str | None = None
    """The EKS cluster orchestrating CLUSTER (None: not EKS); its node for INSTANCE is NODE."""
    slurm: SlurmControllers = field(default_factory=NoSlurm)
    slurm_hostname: str | None = None
    """Set: CLUSTER is orchestrated by Slurm, INSTANCE's PrivateDnsHostname is this."""

    def __post_init__(self) -> None:
        self.hyperpod.now = lambda: self.clock.current
        self.hyperpod.add_cluster(
            CLUSTER,
            instance_groups=[GROUP],
            eks_cluster=self.eks_cluster,
            slurm=self.slurm_hostname is not None,
        )
        self.hyperpod.add_node(CLUSTER, GROUP, INSTANCE, hostname=self.slurm_hostname)
        if self.eks_cluster:
            self.kube.add_node(self.eks_cluster, NODE, INSTANCE)

    @property
    def deps(self) -> Deps:
        return Deps(
            settings=self.settings,
            hyperpod=self.hyperpod,
            incidents=self.store,
            reports=self.store,
            audit=self.audit,
            notifier=self.notifier,
            workflow=self.workflow,
            guard=self.store,
            history=self.store,
            clock=self.clock,
            switch=self.switch,
            kubernetes=self.kube,
            slurm=self.slurm,
            prometheus=self.prometheus,
            lifecycle=self.lifecycle,
            sleep=self.slept.append,
            identity=self.identity,
            anchor=self.anchor,
        )

    def incident(self, incident_id: str) -> Incident:
        found = self.store.get(incident_id)
        assert found is not None, f"no incident {incident_id}"
        return found

    # -- drivers: each returns the incident id ---------------------------------------------

    def store_fixture_report(self) -> None:
        intake.store_report(parse_report_event(load_fixture("events", "sdc_report")), self.deps)

    def opened(self, event: dict[str, Any] | None = None) -> str:
        result = intake.open_incident(parse_contributor_event(event or alarm_event()), self.deps)
        # "attached" when a stored report naming the instance already opened it
        assert result["action"] in ("opened", "attached"), result
        assert result["incident_id"] is not None
        return result["incident_id"]

    def health_checked(self, incident_id: str | None = None, *, isolated: bool = False) -> str:
        """Opened (or the open `incident_id`, however it was opened) and health-checked, as the
        state machine does; `isolated`: the node cordoned first, as the state machine does where
        node isolation is on."""
        incident_id = incident_id or self.opened()
        ref = IncidentRef(incident_id)
        if isolated:
            isolation.isolate_node(ref, self.deps)
        health_check.start_health_check(ref, self.deps)
        while health_check.check_health(ref, self.deps)["in_progress"]:
            pass
        return incident_id

    def awaiting_approval(self, incident_id: str | None = None, *, isolated: bool = False) -> str:
        """Health-checked (`health_checked`) and asked for approval, as the state machine does."""
        return self.approval_requested(self.health_checked(incident_id, isolated=isolated))

    def approval_requested(self, incident_id: str) -> str:
        """Asked for approval (again, after a reboot's failed check) as the state machine asks."""
        self.workflow.waiting_tokens.add(TOKEN)
        approval.request_approval(
            parse_approval_request({"incident_id": incident_id, "task_token": TOKEN}), self.deps
        )
        return incident_id

    def decided(self, decision: str = "approve", *, isolated: bool = False) -> str:
        incident_id = self.awaiting_approval(isolated=isolated)
        approval.decide(self.decision(incident_id, decision), self.deps)
        return incident_id

    def decision(
        self,
        incident_id: Any,
        decision: Any = "approve",
        comment: Any = "evidence reviewed",
        execution: str = APPROVAL_EXECUTION,
        *,
        principal: str | None = None,
        started: bool = True,
    ) -> DecisionRequest:
        """The decision as decide receives it from the approval state machine; the approval
        execution is started first (`started`) with the same input, and signed by `principal`
        (an identity proof in its input) when one is named."""
        if started:
            payload: dict[str, Any] = {
                "incident_id": incident_id,
                "decision": decision,
                "comment": comment,
            }
            if principal is not None:
                binding = approval_binding(APPROVAL_ARN, str(incident_id), str(decision))
                payload["identity_proof"] = self.identity.sign(principal, binding)
            self.workflow.add_execution(execution, APPROVAL_ARN, payload)
        return DecisionRequest(incident_id, decision, comment, execution)
