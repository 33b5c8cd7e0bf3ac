"""The pipeline on this machine: the synthesized stack in a moto account, a fake HyperPod.

    with LocalRun.open() as run:
        emitter = run.emitter(rank_map)            # a training rank, publishing into moto
        emitter.report(alarm)
        opened = run.tick()                        # alarms evaluated → contributor events routed
        run.wait_for(incident_id, "awaiting_approval")
        run.decide(incident_id, "approve", "bad GPU, replace")   # the approval state machine
        run.wait_for(incident_id, "replaced")

Everything between the emitter and the fake HyperPod is the deployed code path: the rules'
patterns route events, handlers run in-process with their function's environment, and the
state machine definitions from the template run in moto's interpreter.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Final

import boto3
from moto import mock_aws

from sdc_remediation.infra.local.evaluator import Evaluator
from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.grants import (
    BOTOCORE_EVENT,
    CallRecorder,
    Denial,
    GrantsInsufficient,
    denials,
    encrypted_topics,
    function_statements,
    table_hash_keys,
)
from sdc_remediation.infra.local.identity import MotoIdentityVerifier
from sdc_remediation.infra.local.interpreter import local_interpreter
from sdc_remediation.infra.local.kube_api import KubeApi
from sdc_remediation.infra.local.metrics import EmfCapture
from sdc_remediation.infra.local.moto_keys import remember_response_keys
from sdc_remediation.infra.local.routing import (
    Delivery,
    EventBus,
    InvocationLog,
    handlers_in_process,
    invocation_environment,
    invocation_handler,
    new_event,
)
from sdc_remediation.infra.local.run_command import LocalRunCommand
from sdc_remediation.infra.local.slurm import DRILL_CONTROLLER, LocalSlurm
from sdc_remediation.infra.local.template import LocalStack, stand_up
from sdc_remediation.infra.stack.template import ACCOUNT, REGION
from sdc_remediation.lambdas.adapters._aws import client_factory
from sdc_remediation.lambdas.adapters.eks_token import EksTokens, sts_factory
from sdc_remediation.lambdas.adapters.identity import sign_identity_proof
from sdc_remediation.lambdas.adapters.kubernetes import EksKubernetesNodes
from sdc_remediation.lambdas.adapters.prometheus import AmpPrometheus
from sdc_remediation.lambdas.adapters.slurm import SsmSlurmControllers
from sdc_remediation.lambdas.handlers import _deps
from sdc_remediation.lambdas.handlers._deps import build_deps
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety.decisions import approval_binding
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.lifecycle_event import LIFECYCLE_DETAIL_TYPE, LIFECYCLE_SOURCE
from sdc_remediation.lambdas.models.settings import Settings
from trainer_emitter import Emitter
from trainer_emitter.contract import REPORT_DETAIL_TYPE, REPORT_SOURCE
from trainer_emitter.mapping import Datapoint
from trainer_emitter.sinks import AwsSink

CLUSTER = "ml-cluster-1"
CLUSTER_ID = "ab12cd34ef56"
EKS_CLUSTER = "ml-eks-1"
"""The EKS cluster that orchestrates CLUSTER; its Kubernetes API is the local stand-in."""
SLURM_CONTROLLER = DRILL_CONTROLLER
"""On a Slurm run: the controller instance of CLUSTER, played by a local slurmctld."""
TERMINAL = frozenset(s.value for s in IncidentState if s.terminal)
"""Closed states: a wait for one of them also waits for the closing execution to end (the state
is saved before the node's release, the closing audit entry and the notice)."""

LOCAL_CONTEXT: dict[str, Any] = {
    "sdc:clusters": {CLUSTER: CLUSTER_ID},
    "sdc:nodeIsolation": {CLUSTER: EKS_CLUSTER},
    "sdc:approvalTimeoutSeconds": 600,
    "sdc:healthCheckPollSeconds": 1,
    "sdc:healthCheckMaxPolls": 5,
    "sdc:replacementPollSeconds": 1,
    "sdc:replacementMaxPolls": 10,
    "sdc:replaceRetrySeconds": 1,
    "sdc:replaceMaxRetries": 2,
    "sdc:rebootPollSeconds": 1,
    "sdc:rebootMaxPolls": 10,
}
"""The deployment the local run synthesizes: short waits, so a run takes seconds, not hours."""

WAIT_SCALE = 0.05
"""How long a state machine's second lasts in the local run (`sdc_remediation.infra.local.interpreter`): a poll
every 50 ms instead of every second. The approval timeout stays in real seconds."""
REREAD_SECONDS = 0.5
"""A waiter reads the incident again after each invocation, and at least this often: a change
made outside a handler (a CLI against the served account) is seen within it."""
LOCAL_DEADLINE_SECONDS = 30.0
"""The training emitter's delivery deadline in the local run, where delivering means running the
account's side in-process."""

_MOTO_CONFIG: Any = {
    "lambda": {"use_docker": False},
    "stepfunctions": {"execute_state_machine": True},
}


def synthesized_template(context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The template `cdk synth` writes for the local context (plus `context`), synthesized
    once per context and kept (`sdc_remediation.infra.stack.synth.synthesize_once`)."""
    from sdc_remediation.infra.stack.synth import (
        synthesize_once,  # CDK and jsii load only when a run needs them
    )

    return synthesize_once({**LOCAL_CONTEXT, **(context or {})}).template


LOCAL_OPERATOR = "local-operator"
"""The IAM user whose keys a local run puts in the environment (the `sdc` CLI's caller)."""


def approver_credentials(session: Any, user: str) -> dict[str, str]:
    """An access key of the IAM user `user` in the local account (created on first use)."""
    iam = session.client("iam")
    with suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
    }


@cache
def _session() -> boto3.session.Session:
    """One boto3 session for the local runs of a process: the clients of every run share the
    service models it has read (a fresh session reads them again, half a second a run)."""
    return boto3.session.Session(region_name=REGION)


def default_cluster(
    nodes: Sequence[str] = (), *, node_recovery: str = "None", slurm: bool = False
) -> FakeHyperPod:
    """A 4-node fake HyperPod cluster named like the fixtures' rank map; `slurm`: orchestrated
    by Slurm (each node's host name from `slurm_host_names`), else by the local EKS cluster."""
    hyperpod = FakeHyperPod(region=REGION, account=ACCOUNT)
    hyperpod.add_cluster(
        CLUSTER,
        node_recovery=node_recovery,
        instance_groups=["gpu-workers"],
        eks_cluster=None if slurm else EKS_CLUSTER,
        slurm=slurm,
    )
    instance_ids = nodes or (
        "i-0aa00000000000001",
        "i-0bb00000000000002",
        "i-0cc00000000000003",
        "i-0dd00000000000004",
    )
    hosts = slurm_host_names(instance_ids)
    for instance_id in instance_ids:
        hostname = f"{hosts[instance_id]}.{REGION}.compute.internal" if slurm else None
        hyperpod.add_node(CLUSTER, "gpu-workers", instance_id, hostname=hostname)
    return hyperpod


def slurm_host_names(instance_ids: Sequence[str]) -> dict[str, str]:
    """The Slurm node name of each instance of a local Slurm cluster: its host name, as HyperPod
    names Slurm nodes (`ip-10-1-69-241`, ... in instance id order)."""
    return {
        instance_id: f"ip-10-1-69-{240 + n}"
        for n, instance_id in enumerate(sorted(instance_ids), start=1)
    }


class _LocalSink:
    """The emitter's delivery into the local account: metrics to moto CloudWatch, the report
    event onto the local bus (moto's own bus cannot deliver to Lambda targets)."""

    def __init__(self, run: LocalRun, *, events: bool = True) -> None:
        self._metrics = AwsSink(region=REGION)
        self._run = run
        self._events = events

    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None:
        self._metrics.put_metrics(namespace, datapoints)

    def put_event(self, detail: dict[str, Any]) -> None:
        if not self._events:
            return  # the fast path is optional: a job may publish metrics only
        self._run.put_event(
            new_event(REPORT_DETAIL_TYPE, REPORT_SOURCE, detail, region=REGION, account=ACCOUNT)
        )


@dataclass
class LocalRun:
    session: Any
    stack: LocalStack
    hyperpod: FakeHyperPod
    invocations: InvocationLog
    bus: EventBus
    evaluator: Evaluator
    deps: Deps
    inbox_url: str
    lifecycle_url: str
    """An SQS queue a rule on the default bus fills with the incident lifecycle events."""
    kube_api: KubeApi
    """The EKS cluster's Kubernetes API (the stand-in): its nodes show the cordons."""
    slurm: LocalSlurm | None
    """On a Slurm run: the local slurmctld playing the controller; its nodes show the drains."""
    run_command: LocalRunCommand
    """Run Command's stand-in: the commands sent to the controller."""
    emf: EmfCapture
    """The functions' metrics (EMF), published into the account after each invocation."""
    recorder: CallRecorder = field(default_factory=CallRecorder)
    drained_hosts: set[str] = field(default_factory=set)
    """On a Slurm run: the Slurm nodes the drill saw drained (what it shows again at the end)."""
    """Every AWS call the functions made (infra/local/grants.py)."""
    cluster_arns: dict[str, str] = field(default_factory=dict)
    """HyperPod cluster name → its ARN, as the deployment's roles name it."""
    deliveries: list[Delivery] = field(default_factory=list)
    inbox: list[dict[str, Any]] = field(default_factory=list)
    _server: Any = None
    _decisions: int = 0

    @classmethod
    @contextmanager
    def open(
        cls,
        *,
        context: Mapping[str, Any] | None = None,
        hyperpod: FakeHyperPod | None = None,
        telemetry_endpoints: Mapping[str, str] | None = None,
        wait_scale: float = WAIT_SCALE,
        slurm: LocalSlurm | None = None,
    ) -> Iterator[LocalRun]:
        """`telemetry_endpoints`: workspace id → the base URL of a local Prometheus that plays
        that workspace of `sdc:telemetry` (the adapter's local-only override); `wait_scale`:
        the real seconds of a second of the state machines' waits; `slurm`: the local
        controller that plays SLURM_CONTROLLER (with SLURM_CONTEXT), reached through the local
        Run Command stand-in."""
        template = synthesized_template(context)
        remember_response_keys()
        hyperpod = hyperpod or default_cluster()
        recorder = CallRecorder(invocation_handler)
        hook = recorder.botocore_hook()
        hyperpod.observers.append(
            lambda operation, params: recorder.record("sagemaker", operation, params)
        )
        run_command = LocalRunCommand(
            {SLURM_CONTROLLER: slurm} if slurm else {},
            observers=[lambda operation, params: recorder.record("ssm", operation, params)],
        )
        slurm_controllers = (
            SsmSlurmControllers(lambda: run_command, sleep=lambda _: None) if slurm else None
        )
        saved = {
            k: os.environ.get(k)
            for k in (
                "POWERTOOLS_TRACE_DISABLED",
                "AWS_DEFAULT_REGION",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
            )
        }
        os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"  # no X-Ray daemon here
        os.environ["AWS_DEFAULT_REGION"] = REGION
        try:
            with mock_aws(config=_MOTO_CONFIG), local_interpreter(wait_scale):
                session = _session()
                session.events.register(BOTOCORE_EVENT, hook)
                stack = stand_up(template, session)
                # Whoever runs `sdc` against this account is an IAM user moto knows, so that
                # the identity proof `sdc approve` signs is redeemed (moto's STS names the
                # caller by its access key).
                os.environ.update(approver_credentials(session, LOCAL_OPERATOR))
                os.environ.pop("AWS_SESSION_TOKEN", None)
                opener = stack.function_by_handler("open_incident")
                settings = Settings.from_env(opener.environment)
                kube_api = _kubernetes(session, hyperpod)
                with kube_api.serve() as base_url:
                    # The local-only escape: the EKS endpoint is the stand-in, over plain http.
                    # One adapter per function, as each function's own process has: what one
                    # caches (the cluster's endpoint) another must ask for itself.
                    kubernetes_of: dict[str | None, EksKubernetesNodes] = {}

                    def kubernetes() -> EksKubernetesNodes:
                        handler = invocation_handler()
                        if handler not in kubernetes_of:
                            kubernetes_of[handler] = EksKubernetesNodes(
                                client_factory("eks", session),
                                EksTokens(sts_factory(session)),
                                endpoint_overrides={EKS_CLUSTER: base_url},
                            )
                        return kubernetes_of[handler]

                    prometheus = (
                        AmpPrometheus(
                            session.get_credentials, endpoint_overrides=telemetry_endpoints
                        )
                        if telemetry_endpoints
                        else None
                    )

                    def per_invocation() -> Deps:
                        # Each invocation sees its own function's environment, as on AWS.
                        env = invocation_environment()
                        built = build_deps(
                            Settings.from_env(env),
                            session=session,
                            hyperpod=hyperpod,
                            kubernetes=kubernetes(),
                            slurm=slurm_controllers,
                            prometheus=prometheus,
                            identity=MotoIdentityVerifier(),
                        )
                        # A step's waits (between a notice's attempts) scale as the
                        # state machines' do.
                        return dataclasses.replace(
                            built, sleep=lambda seconds: time.sleep(seconds * wait_scale)
                        )

                    _deps.set_deps(per_invocation)
                    with (
                        EmfCapture(session).installed() as emf,
                        handlers_in_process(stack, emf=emf) as invocations,
                        _stopping_executions(session, stack),
                    ):
                        run = cls(
                            session=session,
                            stack=stack,
                            hyperpod=hyperpod,
                            invocations=invocations,
                            bus=EventBus(stack, session),
                            evaluator=Evaluator(stack, session),
                            deps=build_deps(
                                settings,
                                session=session,
                                hyperpod=hyperpod,
                                identity=MotoIdentityVerifier(),
                            ),
                            inbox_url=_subscribe_inbox(session, settings.topic_arn),
                            lifecycle_url=_route_lifecycle(session),
                            kube_api=kube_api,
                            slurm=slurm,
                            run_command=run_command,
                            emf=emf,
                            recorder=recorder,
                            cluster_arns=_cluster_arns({**LOCAL_CONTEXT, **(context or {})}),
                        )
                        try:
                            yield run
                        finally:
                            if run._server is not None:
                                run._server.stop()
                        denied = run.grant_denials()
                        if denied:
                            raise GrantsInsufficient(denied)
        finally:
            _session().events.unregister(BOTOCORE_EVENT, hook)
            _deps.reset()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    # -- serving the account to other processes (the sdc CLI) -------------------------------

    def serve(self, port: int, request_log: str | None = None) -> str:
        """Serve this moto account on 127.0.0.1:`port` (0: a free port) until the run ends, and
        give its address (the one it already has, if served); the server shares the
        in-process account, so a CLI in another shell sees and changes the same incidents.
        `request_log`: the file its HTTP request log goes to (appended), never the terminal."""
        if self._server is None:
            from moto.server import ThreadedMotoServer

            if request_log is not None:
                log_requests_to(request_log)
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            self._server.start()
        host, bound = self._server.get_host_and_port()
        return f"http://{host}:{bound}"

    def write_outputs(self, path: str) -> str:
        """The stack outputs as the CLI's --outputs file expects them (name → value)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({k: v for k, v in self.stack.outputs.items() if v}, indent=2))
        return str(target)

    # -- the training side ------------------------------------------------------------------

    def emitter(
        self, rank_map: Sequence[Mapping[str, Any]], *, report_events: bool = True, **settings: Any
    ) -> Emitter:
        """A training rank's emitter into this account; `report_events=False`: metrics only,
        the report event (the optional fast path) never arrives. The sink runs this whole
        account in-process (metrics, alarms, the report's handlers), so the deadline is
        `LOCAL_DEADLINE_SECONDS` rather than the one meant for a network call: on a loaded
        machine the report would otherwise be spooled and no incident opened."""
        return Emitter(
            cluster_name=CLUSTER,
            region=REGION,
            rank=0,
            rank_map=rank_map,
            sink=_LocalSink(self, events=report_events),
            **{"job_name": "llama-pretrain", "deadline": LOCAL_DEADLINE_SECONDS, **settings},
        )

    # -- the AWS side -----------------------------------------------------------------------

    def put_event(self, event: dict[str, Any]) -> list[Delivery]:
        delivered = self.bus.put(event)
        self.deliveries.extend(delivered)
        return delivered

    def tick(self, now: datetime | None = None) -> list[Delivery]:
        """One alarm evaluation: contributor events for every state change, routed by the rules."""
        delivered: list[Delivery] = []
        for event in self.evaluator.evaluate(now or datetime.now(UTC)):
            delivered.extend(self.put_event(event))
        return delivered

    def incident(self, incident_id: str) -> Incident | None:
        return self.deps.incidents.get(incident_id)

    def audit(self, incident_id: str) -> list[AuditEntry]:
        return self.deps.audit.entries(incident_id)

    def wait_for(self, incident_id: str, *states: str, timeout: float = 60.0) -> Incident:
        """Until the incident reaches one of `states`; a terminal state that is not one of them
        ends the wait early with an error naming it."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            ended = len(self.invocations.calls)
            incident = self.incident(incident_id)
            seen = incident.state.value if incident else None
            if incident is not None and seen in states:
                if seen in TERMINAL and incident.execution_arn:
                    # The state is saved before the closing step's last audit entry and notice:
                    # a closed incident is settled once its execution has ended.
                    self.wait_for_execution(
                        incident_id, timeout=max(deadline - time.monotonic(), 1)
                    )
                    return self.incident(incident_id) or incident
                return incident
            if seen in TERMINAL:
                break
            self.invocations.wait_past(
                ended, timeout=min(REREAD_SECONDS, max(deadline - time.monotonic(), 0))
            )
        raise TimeoutError(f"incident {incident_id} is {seen!r}, not one of {states}")

    def execution(self, incident_id: str) -> dict[str, Any]:
        machine = self.stack.state_machine("Remediation")
        arn = machine.arn.replace(":stateMachine:", ":execution:") + f":{incident_id}"
        return self.session.client("stepfunctions").describe_execution(executionArn=arn)

    def wait_for_execution(self, incident_id: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            execution = self.execution(incident_id)
            if execution["status"] != "RUNNING" or time.monotonic() > deadline:
                return execution
            time.sleep(0.1)

    def operator_session(self) -> boto3.session.Session:
        """A session with the local operator's key (the environment's), as `sdc` builds one:
        what it signs, this account's STS accepts."""
        return boto3.session.Session(
            aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            region_name=REGION,
        )

    def decide(
        self, incident_id: str, decision: str, comment: str, *, approver: str | None = None
    ) -> dict[str, Any]:
        """Start the approval state machine, exactly what the console's 'Start execution' does
        (or, with `approver`, what `sdc approve` does as that IAM user: the input carries an
        identity proof signed with the user's key), and wait for it to finish."""
        self._decisions += 1
        machine = self.stack.state_machine("Approval")
        client = self.session.client("stepfunctions")
        payload: dict[str, Any] = {
            "incident_id": incident_id,
            "decision": decision,
            "comment": comment,
        }
        if approver is not None:
            keys = approver_credentials(self.session, approver)
            signer = boto3.session.Session(
                aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
                region_name=REGION,
            ).client("sts", endpoint_url=f"https://sts.{REGION}.amazonaws.com")
            payload["identity_proof"] = sign_identity_proof(
                signer, approval_binding(machine.arn, incident_id, decision)
            )
        started = client.start_execution(
            stateMachineArn=machine.arn,
            name=f"{decision}-{self._decisions}-{int(time.time())}",
            input=json.dumps(payload),
        )
        deadline = time.monotonic() + 30
        while True:
            execution = client.describe_execution(executionArn=started["executionArn"])
            if execution["status"] != "RUNNING" or time.monotonic() > deadline:
                return execution
            time.sleep(0.05)

    def grant_denials(self, template: Mapping[str, Any] | None = None) -> list[Denial]:
        """The calls the functions made that their roles in `template` (default: this run's)
        do not allow; empty when every grant sufficed."""
        assert self.stack.resolve is not None
        template = template or self.stack.template
        statements = function_statements(template, self.stack.resolve)
        return denials(
            self.recorder.calls,
            statements,
            cluster_arns=self.cluster_arns,
            task_token_machine=self.stack.state_machine("Remediation").arn,
            implied=encrypted_topics(template, self.stack.resolve),
            hash_keys=table_hash_keys(template, self.stack.resolve),
        )

    def reconcile(self) -> dict[str, Any]:
        """One run of the reconcile function, as its schedule starts it: what it settled, what
        waits, what needs a person (sdc_remediation.lambdas.logic.closing)."""
        function = self.stack.function_by_handler("reconcile")
        event = new_event("Scheduled Event", "aws.events", {}, region=REGION, account=ACCOUNT)
        response = self.session.client("lambda").invoke(
            FunctionName=function.arn, Payload=json.dumps(event).encode()
        )
        answer: dict[str, Any] = json.loads(response["Payload"].read() or b"null")
        if "FunctionError" in response:
            raise RuntimeError(f"reconcile failed: {answer}")
        return answer

    def sweep(self, cluster_name: str = CLUSTER) -> dict[str, Any]:
        """One run of the cluster's idle sweep, as its schedule starts it: the sweep function
        invoked with the input of the cluster's `AWS::Scheduler::Schedule` in the template."""
        inputs = [
            json.loads(resource["Properties"]["Target"]["Input"])
            for resource in self.stack.template["Resources"].values()
            if resource["Type"] == "AWS::Scheduler::Schedule"
        ]
        (request,) = [i for i in inputs if i.get("cluster_name") == cluster_name]
        function = self.stack.function_by_handler("sweep_idle")
        response = self.session.client("lambda").invoke(
            FunctionName=function.arn, Payload=json.dumps(request).encode()
        )
        answer: dict[str, Any] = json.loads(response["Payload"].read() or b"null")
        if "FunctionError" in response:
            raise RuntimeError(f"the idle sweep failed: {answer}")
        return answer

    def wait_for_notification(self, subject_part: str, timeout: float = 10.0) -> dict[str, Any]:
        """The first notification whose subject contains `subject_part`, waiting for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for notice in self.notifications():
                self.inbox.append(notice)
            for notice in self.inbox:
                if subject_part in (notice["subject"] or ""):
                    return notice
            time.sleep(0.05)
        raise TimeoutError(f"no notification with {subject_part!r} in its subject")

    def lifecycle_events(self) -> list[dict[str, Any]]:
        """The lifecycle events' details the rule routed since the last call."""
        sqs = self.session.client("sqs")
        found: list[dict[str, Any]] = []
        while batch := sqs.receive_message(QueueUrl=self.lifecycle_url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in batch:
                found.append(json.loads(message["Body"])["detail"])
                sqs.delete_message(
                    QueueUrl=self.lifecycle_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return found

    def renderings(self, subject_part: str) -> dict[str, str]:
        """Each protocol's message of the last notice whose subject contains `subject_part`,
        exactly as published (`default`, `email`, `https`; one `default` for a plain one)."""
        from moto.backends import get_backend

        topic = get_backend("sns")[ACCOUNT][REGION].topics[self.deps.settings.topic_arn]
        for _, message, subject, _, _ in reversed(topic.sent_notifications):
            if subject_part in (subject or ""):
                try:
                    structured = json.loads(message)
                except json.JSONDecodeError:
                    return {"default": message}
                return structured if isinstance(structured, dict) else {"default": message}
        raise LookupError(f"no notice with {subject_part!r} in its subject")

    def notifications(self) -> list[dict[str, Any]]:
        """What the topic's subscribers received since the last call (subject, message,
        attributes)."""
        sqs = self.session.client("sqs")
        received: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not batch:
                return received
            for message in batch:
                body = json.loads(message["Body"])
                received.append(
                    {
                        "subject": body.get("Subject"),
                        "message": body.get("Message"),
                        "attributes": {
                            k: v.get("Value") for k, v in body.get("MessageAttributes", {}).items()
                        },
                    }
                )
                sqs.delete_message(QueueUrl=self.inbox_url, ReceiptHandle=message["ReceiptHandle"])


def _cluster_arns(context: Mapping[str, Any]) -> dict[str, str]:
    """Cluster name → the ARN the roles name (`sdc:clusters` gives the id or the ARN)."""
    from sdc_remediation.infra.stack.settings import DeploymentSettings

    arns = {}
    for cluster in DeploymentSettings.from_context(context).clusters:
        value = cluster.arn_or_id
        arns[cluster.name] = (
            value
            if value.startswith("arn:")
            else f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{value}"
        )
    return arns


REQUEST_LOGGER: Final = "werkzeug"
"""The logger moto's server writes its HTTP request log to (werkzeug's); with no handler of its
own it adds one on the terminal."""


def log_requests_to(path: str) -> None:
    """Send the served account's request log to `path` (appended), and nowhere else."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger(REQUEST_LOGGER)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


@contextmanager
def _stopping_executions(session: Any, stack: LocalStack) -> Iterator[None]:
    """Stop whatever still runs when the run ends: an interpreter thread left waiting would
    otherwise invoke the next run's handlers with this run's task tokens."""
    try:
        yield
    finally:
        client = session.client("stepfunctions")
        for machine in stack.state_machines.values():
            running = client.list_executions(stateMachineArn=machine.arn, statusFilter="RUNNING")
            for execution in running["executions"]:
                _stop(client, execution["executionArn"])


def _stop(client: Any, execution_arn: str, patience: float = 10.0) -> None:
    # moto's interpreter parses the definition on the execution's own thread; until it has,
    # the execution cannot be stopped (its environment does not exist yet).
    deadline = time.monotonic() + patience
    while True:
        try:
            client.stop_execution(executionArn=execution_arn, cause="local run ended")
            return
        except AttributeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _kubernetes(session: Any, hyperpod: FakeHyperPod) -> KubeApi:
    """The EKS cluster in moto and its Kubernetes API stand-in, trusting the local account's
    credentials: one node per HyperPod node of CLUSTER, named as HyperPod EKS names them (the
    pipeline still finds them by providerID, and checks a report's node name against it)."""
    session.client("eks").create_cluster(
        name=EKS_CLUSTER,
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/local-eks",
        resourcesVpcConfig={"subnetIds": ["subnet-0local"]},
    )
    credentials = session.get_credentials().get_frozen_credentials()
    api = KubeApi(EKS_CLUSTER, REGION, {credentials.access_key: credentials.secret_key})
    cluster = hyperpod.clusters.get(CLUSTER)
    for instance_id, name in kube_node_names(sorted(cluster.nodes) if cluster else []).items():
        api.add_node(name, instance_id)
    return api


def kube_node_names(instance_ids: Sequence[str]) -> dict[str, str]:
    """The Kubernetes node name of each instance in the local EKS stand-in: `hyperpod-<instance
    id>`, as HyperPod EKS names its nodes and as the local training job's NODE_NAME says (a
    report naming any other node for an instance is a claim the pipeline does not act on)."""
    return {instance_id: f"hyperpod-{instance_id}" for instance_id in sorted(instance_ids)}


def _route_lifecycle(session: Any) -> str:
    """An SQS queue behind a rule on the default bus for the incident lifecycle events (as a
    team's PagerDuty or ticket rule would be)."""
    sqs, events = session.client("sqs"), session.client("events")
    url: str = sqs.create_queue(QueueName="local-lifecycle-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="local-lifecycle-events",
        EventPattern=json.dumps(
            {"source": [LIFECYCLE_SOURCE], "detail-type": [LIFECYCLE_DETAIL_TYPE]}
        ),
    )
    events.put_targets(Rule="local-lifecycle-events", Targets=[{"Id": "queue", "Arn": arn}])
    return url


def _subscribe_inbox(session: Any, topic_arn: str) -> str:
    """An SQS queue subscribed to the notification topic: the approver's inbox."""
    sqs = session.client("sqs")
    url: str = sqs.create_queue(QueueName="local-approver-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    session.client("sns").subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
    return url
