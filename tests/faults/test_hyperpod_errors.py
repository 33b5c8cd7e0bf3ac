"""Every documented HyperPod error code, and throttling on every call: retried where that is
safe, otherwise a visible end state with the cause, never a silent hang.

Three tables:
- the adapter: each HyperPod operation x each error code → the domain error (and whether the
  state machine retries it), through botocore's Stubber (the service model validates requests);
- the steps: each handler x each HyperPod call it makes x each error, on moto with the fake
  HyperPod: a retryable error leaves the incident as it was and the retried step acts once; any
  other error fails the incident with the code as its cause (or skips / ends it as gone where
  the code means exactly that);
- BatchReplaceClusterNodes' documented `Failed[]` codes → the status the state machine follows.
One end-to-end run proves the state machine retries a throttled step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.stub import Stubber

from sdc_remediation.infra.local.run import LocalRun
from sdc_remediation.infra.stack.asl import RETRYABLE_STEP_ERRORS
from sdc_remediation.lambdas.adapters.hyperpod import SageMakerHyperPod
from sdc_remediation.lambdas.handlers import (
    check_health,
    check_replacement,
    close_incident,
    open_incident,
    replace_node,
    start_health_check,
)
from sdc_remediation.lambdas.models.errors import (
    AwsError,
    ClusterNotFound,
    DependencyFailed,
    NodeNotFound,
    ServiceUnavailable,
    Throttled,
)
from sdc_remediation.lambdas.models.hyperpod import BatchErrorCode
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.integration.conftest import INSTANCE, SESSION, Aws, invoke
from tests.integration.drive import decided, opened

CLUSTER = "ml-cluster-1"

# -- the adapter ----------------------------------------------------------------------------------

OPERATIONS: dict[str, tuple[str, Callable[[SageMakerHyperPod], Any]]] = {
    "DescribeCluster": ("describe_cluster", lambda hp: hp.describe_cluster(CLUSTER)),
    "DescribeClusterNode": (
        "describe_cluster_node",
        lambda hp: hp.describe_node(CLUSTER, INSTANCE),
    ),
    "DescribeClusterNode by logical id": (
        "describe_cluster_node",
        lambda hp: hp.describe_node_by_logical_id(CLUSTER, "gpu-workers-0001"),
    ),
    "StartClusterHealthCheck": (
        "start_cluster_health_check",
        lambda hp: hp.start_health_check(CLUSTER, "gpu-workers", [INSTANCE], ["InstanceStress"]),
    ),
    "BatchReplaceClusterNodes": (
        "batch_replace_cluster_nodes",
        lambda hp: hp.replace_nodes(CLUSTER, [INSTANCE]),
    ),
}
NOT_FOUND = {
    "DescribeCluster": ClusterNotFound,
    "DescribeClusterNode": NodeNotFound,
    "DescribeClusterNode by logical id": NodeNotFound,
    "StartClusterHealthCheck": ClusterNotFound,
    "BatchReplaceClusterNodes": ClusterNotFound,
}
CODES: dict[str, tuple[int, type[AwsError] | None]] = {
    # code: (HTTP status, domain error; None = the operation's not-found error)
    "ResourceNotFound": (400, None),  # the one error the SageMaker model documents for each
    "ThrottlingException": (400, Throttled),
    "InternalFailure": (500, ServiceUnavailable),
    "ServiceUnavailable": (503, ServiceUnavailable),
    "ValidationException": (400, DependencyFailed),
    "AccessDeniedException": (400, DependencyFailed),
}


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_adapter_turns_every_error_code_into_a_domain_error_with_its_cause(operation, code):
    method, call = OPERATIONS[operation]
    status, expected = CODES[code]
    expected = expected or NOT_FOUND[operation]
    client = SESSION.client("sagemaker", aws_access_key_id="t", aws_secret_access_key="t")

    with Stubber(client) as stubber:
        stubber.add_client_error(
            method,
            service_error_code=code,
            http_status_code=status,
            response_meta={"RequestId": "req-1"},
        )
        with pytest.raises(AwsError) as raised:
            call(SageMakerHyperPod(lambda: client))

    err = raised.value
    record("HyperPod error codes, adapter", f"{type(err).__name__} (retried: {err.retryable})")
    assert type(err) is expected
    assert (err.code, err.request_id) == (code, "req-1")
    assert err.retryable == (type(err).__name__ in RETRYABLE_STEP_ERRORS)


# -- the steps ------------------------------------------------------------------------------------


def approved(aws: Aws) -> str:
    return decided(aws, "approve")


def replacing(aws: Aws) -> str:
    incident_id = approved(aws)
    invoke(replace_node, {"incident_id": incident_id})
    return incident_id


@dataclass(frozen=True)
class Step:
    name: str
    module: Any
    before: Callable[[Aws], str | None]
    """Walks an incident to just before the step; None: the step opens it (open_incident)."""
    calls: tuple[str, ...]
    """The HyperPod operations the step makes."""
    acting: str | None = None
    """The operation that changes the cluster: it must have been accepted exactly once."""


STEPS = [
    Step(
        "open_incident", open_incident, lambda aws: None, ("DescribeCluster", "DescribeClusterNode")
    ),
    Step(
        "start_health_check",
        start_health_check,
        opened,
        ("DescribeClusterNode", "StartClusterHealthCheck"),
        acting="StartClusterHealthCheck",
    ),
    Step(
        "check_health",
        check_health,
        lambda aws: _started(aws),
        ("DescribeClusterNode",),
    ),
    Step(
        "replace_node",
        replace_node,
        approved,
        ("DescribeClusterNode", "BatchReplaceClusterNodes"),
        acting="BatchReplaceClusterNodes",
    ),
    Step("check_replacement", check_replacement, replacing, ("DescribeClusterNode",)),
]


def _started(aws: Aws) -> str:
    incident_id = opened(aws)
    invoke(start_health_check, {"incident_id": incident_id})
    return incident_id


ERRORS: dict[str, Callable[[str], AwsError]] = {
    "throttled": lambda op: Throttled(
        f"{op}: Rate exceeded", operation=op, code="ThrottlingException"
    ),
    "service failure": lambda op: ServiceUnavailable(
        f"{op}: InternalFailure", operation=op, code="InternalFailure"
    ),
    "validation": lambda op: DependencyFailed(
        f"{op}: bad request", operation=op, code="ValidationException"
    ),
    "access denied": lambda op: DependencyFailed(
        f"{op}: not authorized", operation=op, code="AccessDeniedException"
    ),
    "resource not found": lambda op: (
        NodeNotFound if op == "DescribeClusterNode" else ClusterNotFound
    )(f"{op}: not found", operation=op, code="ResourceNotFound"),
}
CASES = [(step, op, error) for step in STEPS for op in step.calls for error in ERRORS]


def _invoke(step: Step, incident_id: str | None) -> Any:
    if incident_id is None:
        return invoke(step.module, load_fixture("events", "contributor_alarm"))
    return invoke(step.module, {"incident_id": incident_id})


@pytest.mark.parametrize(
    ("step", "operation", "error"),
    CASES,
    ids=[f"{s.name}-{op}-{e}" for s, op, e in CASES],
)
def test_every_step_survives_every_hyperpod_error_on_every_call(aws, step, operation, error):
    incident_id = step.before(aws)
    before = aws.incident(incident_id).state if incident_id else None
    fault = ERRORS[error](operation)
    aws.hyperpod.fail_next(operation, fault)

    try:
        first = _invoke(step, incident_id)
        raised = None
    except AwsError as err:  # anything else is a crash and fails the test
        first, raised = None, err

    outcome = _judge(aws, step, incident_id, before, fault, raised, first)
    record("HyperPod errors, steps on moto", outcome)


def _judge(
    aws: Aws,
    step: Step,
    incident_id: str | None,
    before: Any,
    fault: AwsError,
    raised: AwsError | None,
    first: Any,
) -> str:
    if raised is None:
        # The step absorbed the error: only "not found" means something on its own.
        assert fault.code == "ResourceNotFound", first
        if incident_id is None:
            assert first["action"] == "skipped", first
            return "skipped (not a node of the cluster)"
        return "node gone (ends as replaced_by_hyperpod or checked)"
    assert raised is fault
    if fault.retryable:
        if incident_id is None:
            assert aws.items("INCIDENT#") == []
            assert "open_failed" in aws.actions(
                f"event#{load_fixture('events', 'contributor_alarm')['id']}"
            )
        else:
            # Left open as it was (replace_node may already have entered `replacing`).
            assert aws.incident(incident_id).state in (before, "replacing"), "changed state"
            assert aws.actions(incident_id)[-1] == "step_error_retryable"
        again = _invoke(step, incident_id)  # what the state machine's Retry does
        assert again is not None
        if step.acting:
            accepted = len(aws.hyperpod.calls_to(step.acting)) - (step.acting == fault.operation)
            assert accepted == 1, f"{step.acting} accepted {accepted} times"
        return "retried, then acted once"
    if incident_id is None:
        assert aws.items("INCIDENT#") == []
        return "refused, audited, dead-lettered after retries"
    failed = aws.incident(incident_id)
    assert failed.state == "failed"
    assert failed.error.details["code"] == fault.code
    closed = invoke(
        close_incident,
        {
            "incident_id": incident_id,
            "outcome": "failed",
            "error": {"Error": type(fault).__name__, "Cause": str(fault)},
        },
    )
    assert closed["state"] == "failed"
    assert "closed: failed" in aws.messages()[-1]["Subject"]
    return "failed with the cause, closed, notified"


# -- BatchReplaceClusterNodes Failed[] --------------------------------------------------------------

FAILED_CODES = {
    BatchErrorCode.INSTANCE_ID_NOT_FOUND: "gone",
    BatchErrorCode.INVALID_INSTANCE_STATUS: "retry",
    BatchErrorCode.INSTANCE_ID_IN_USE: "in_progress",
    BatchErrorCode.INTERNAL_SERVER_ERROR: "retry",
}


@pytest.mark.parametrize("code", list(BatchErrorCode))
def test_every_documented_failed_code_has_a_state_machine_status(aws, code):
    incident_id = approved(aws)
    aws.hyperpod.inject_replace_failure(INSTANCE, code.value, "injected")

    result = invoke(replace_node, {"incident_id": incident_id})

    record("BatchReplaceClusterNodes Failed[] codes", f"{code.value} → {result['status']}")
    assert result == {"status": FAILED_CODES[code]}
    entry = aws.audit(incident_id)[-1]
    assert entry.details["code"] == code.value


# -- the state machine retries a throttled step -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.synth
def test_the_state_machine_retries_a_throttled_health_check_start_and_goes_on():
    with LocalRun.open() as run:
        run.hyperpod.fail_next("StartClusterHealthCheck", Throttled("Rate exceeded"))
        (delivery,) = run.put_event(_event_for("i-0bb00000000000002"))
        incident_id = delivery.response["incident_id"]

        incident = run.wait_for(incident_id, "awaiting_approval", timeout=60)

        assert incident.health_check.started is True
        attempts = run.hyperpod.calls_to("StartClusterHealthCheck")
        assert len(attempts) == 2  # the throttled one, then the retry
        actions = [e.action for e in run.audit(incident_id)]
        assert actions.count("step_error_retryable") == 1
        assert actions.count("health_check_started") == 1
        record("HyperPod errors, state machine", "throttled once → retried → awaiting approval")


def _event_for(instance_id: str) -> dict[str, Any]:
    event = load_fixture("events", "contributor_alarm")
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    return event
