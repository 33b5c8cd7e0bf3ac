"""The HyperPod, Step Functions and SNS adapters: request shapes and error translation.

moto implements neither StartClusterHealthCheck nor BatchReplaceClusterNodes, so the SageMaker
adapter is checked with botocore's Stubber (which validates every request against the service
model); Step Functions and SNS run on moto where moto is faithful.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.stub import Stubber

from sdc_remediation.lambdas.adapters.hyperpod import SageMakerHyperPod
from sdc_remediation.lambdas.adapters.sns import SnsNotifier
from sdc_remediation.lambdas.adapters.stepfunctions import StepFunctionsWorkflow, execution_arn
from sdc_remediation.lambdas.models.errors import (
    ClusterNotFound,
    DependencyFailed,
    NodeNotFound,
    SettingsError,
    TaskNotWaiting,
    Throttled,
)
from sdc_remediation.lambdas.models.hyperpod import MAX_DESCRIBED, MAX_EVENTS, BatchFailure
from sdc_remediation.lambdas.models.notices import ChatNotification, NoticeKind
from tests.integration.conftest import ROLE, SESSION, TRIVIAL_DEFINITION

CLUSTER = "ml-cluster-1"
INSTANCE = "i-0abc1234def567890"
META = {"ResponseMetadata": {"RequestId": "req-123", "HTTPStatusCode": 200}}


@pytest.fixture
def sagemaker():
    client = SESSION.client(
        "sagemaker", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def node_details(status: str = "Running") -> dict:
    return {
        "NodeDetails": {
            "InstanceGroupName": "gpu-workers",
            "InstanceId": INSTANCE,
            "NodeLogicalId": "gpu-workers-0001",
            "InstanceStatus": {"Status": status, "Message": "ok"},
            "InstanceType": "ml.p5.48xlarge",
        },
        **META,
    }


def node_summary(instance_id: str, host: str | None) -> dict:
    summary = {
        "InstanceGroupName": "gpu-workers",
        "InstanceId": instance_id,
        "InstanceType": "ml.p5.48xlarge",
        "LaunchTime": "2026-11-30T08:00:00Z",
        "InstanceStatus": {"Status": "Running"},
    }
    if host:
        summary["PrivateDnsHostname"] = f"{host}.us-west-2.compute.internal"
    return summary


def test_the_instance_with_a_slurm_host_is_found_across_listed_pages(sagemaker):
    client, stubber = sagemaker
    first = {"ClusterName": CLUSTER, "MaxResults": 100}
    stubber.add_response(
        "list_cluster_nodes",
        {
            "ClusterNodeSummaries": [node_summary("i-0aa00000000000001", "ip-10-1-0-1")],
            "NextToken": "page-2",
            **META,
        },
        first,
    )
    stubber.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": [node_summary(INSTANCE, "ip-10-1-2-3")], **META},
        {**first, "NextToken": "page-2"},
    )

    assert SageMakerHyperPod(lambda: client).instance_with_host(CLUSTER, "ip-10-1-2-3") == INSTANCE


def test_a_host_no_node_of_the_cluster_has_gives_no_instance(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": [node_summary(INSTANCE, None)], **META},
        {"ClusterName": CLUSTER, "MaxResults": 100},
    )

    assert SageMakerHyperPod(lambda: client).instance_with_host(CLUSTER, "ip-10-1-2-3") is None


def test_describe_node_reads_group_status_and_logical_id(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "describe_cluster_node", node_details(), {"ClusterName": CLUSTER, "NodeId": INSTANCE}
    )

    node = SageMakerHyperPod(lambda: client).describe_node(CLUSTER, INSTANCE)

    assert (node.instance_group, node.status, node.logical_id) == (
        "gpu-workers",
        "Running",
        "gpu-workers-0001",
    )
    assert node.request_id == "req-123"


def test_an_unknown_node_is_node_not_found_with_the_request_id(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error(
        "describe_cluster_node",
        service_error_code="ResourceNotFound",
        service_message="Node not found",
        response_meta={"RequestId": "req-404"},
    )

    with pytest.raises(NodeNotFound) as err:
        SageMakerHyperPod(lambda: client).describe_node(CLUSTER, INSTANCE)

    assert (err.value.code, err.value.request_id) == ("ResourceNotFound", "req-404")
    assert err.value.operation == "DescribeClusterNode"


def test_an_unknown_cluster_is_cluster_not_found(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error("describe_cluster", service_error_code="ResourceNotFound")

    with pytest.raises(ClusterNotFound):
        SageMakerHyperPod(lambda: client).describe_cluster(CLUSTER)


def test_describe_cluster_reads_node_recovery_and_groups(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "describe_cluster",
        {
            "ClusterArn": f"arn:aws:sagemaker:us-west-2:111122223333:cluster/{CLUSTER}",
            "ClusterName": CLUSTER,
            "ClusterStatus": "InService",
            "InstanceGroups": [{"InstanceGroupName": "gpu-workers"}],
            "NodeRecovery": "Automatic",
            **META,
        },
        {"ClusterName": CLUSTER},
    )

    info = SageMakerHyperPod(lambda: client).describe_cluster(CLUSTER)

    assert (info.node_recovery, info.instance_groups) == ("Automatic", ("gpu-workers",))


def test_throttling_is_translated_to_throttled(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error("describe_cluster_node", service_error_code="ThrottlingException")

    with pytest.raises(Throttled):
        SageMakerHyperPod(lambda: client).describe_node(CLUSTER, INSTANCE)


def test_any_other_error_is_a_dependency_failure_naming_the_code(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error("describe_cluster_node", service_error_code="AccessDeniedException")

    with pytest.raises(DependencyFailed, match="AccessDeniedException"):
        SageMakerHyperPod(lambda: client).describe_node(CLUSTER, INSTANCE)


def test_health_check_request_names_group_instances_and_checks(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "start_cluster_health_check",
        {"ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/x", **META},
        {
            "ClusterName": CLUSTER,
            "DeepHealthCheckConfigurations": [
                {
                    "InstanceGroupName": "gpu-workers",
                    "InstanceIds": [INSTANCE],
                    "DeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                }
            ],
        },
    )

    request_id = SageMakerHyperPod(lambda: client).start_health_check(
        CLUSTER, "gpu-workers", [INSTANCE], ["InstanceStress", "InstanceConnectivity"]
    )

    assert request_id == "req-123"


def test_replace_keeps_every_failed_entry_of_a_200_answer(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "batch_replace_cluster_nodes",
        {
            "Successful": ["i-0aaa1234def567890"],
            "Failed": [
                {"NodeId": INSTANCE, "ErrorCode": "InstanceIdInUse", "Message": "busy"},
                {
                    "NodeId": "i-0bbb1234def567890",
                    "ErrorCode": "InternalServerError",
                    "Message": "x",
                },
            ],
            **META,
        },
        {
            "ClusterName": CLUSTER,
            "NodeIds": [INSTANCE, "i-0aaa1234def567890", "i-0bbb1234def567890"],
        },
    )

    result = SageMakerHyperPod(lambda: client).replace_nodes(
        CLUSTER, [INSTANCE, "i-0aaa1234def567890", "i-0bbb1234def567890"]
    )

    assert result.successful == ("i-0aaa1234def567890",)
    assert [(f.node_id, f.code) for f in result.failed] == [
        (INSTANCE, "InstanceIdInUse"),
        ("i-0bbb1234def567890", "InternalServerError"),
    ]
    assert result.failure_for(INSTANCE).message == "busy"


@pytest.mark.parametrize(
    "code",
    ["InstanceIdNotFound", "InvalidInstanceStatus", "InstanceIdInUse", "InternalServerError"],
)
def test_reboot_sends_the_node_ids_and_keeps_each_documented_failed_code(sagemaker, code):
    client, stubber = sagemaker
    other = "i-0aaa1234def567890"
    stubber.add_response(
        "batch_reboot_cluster_nodes",
        {
            "Successful": [other],
            "Failed": [{"NodeId": INSTANCE, "ErrorCode": code, "Message": "why"}],
            **META,
        },
        {"ClusterName": CLUSTER, "NodeIds": [INSTANCE, other]},
    )

    result = SageMakerHyperPod(lambda: client).reboot_nodes(CLUSTER, [INSTANCE, other])

    assert result.successful == (other,)
    assert result.failure_for(INSTANCE) == BatchFailure(INSTANCE, code, "why")
    assert result.request_id == "req-123"


def test_reboot_of_an_unknown_cluster_is_cluster_not_found(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error(
        "batch_reboot_cluster_nodes",
        service_error_code="ResourceNotFound",
        http_status_code=404,
        expected_params={"ClusterName": "nope", "NodeIds": [INSTANCE]},
    )

    with pytest.raises(ClusterNotFound) as err:
        SageMakerHyperPod(lambda: client).reboot_nodes("nope", [INSTANCE])

    assert err.value.operation == "BatchRebootClusterNodes"


def test_the_sagemaker_client_is_built_on_first_use_only():
    built = []

    adapter = SageMakerHyperPod(lambda: built.append("client") or object())

    assert built == []
    adapter.client  # noqa: B018
    adapter.client  # noqa: B018
    assert built == ["client"]


# -- Step Functions -----------------------------------------------------------------------------


@pytest.fixture
def state_machine(aws_env) -> str:
    sfn = SESSION.client("stepfunctions")
    return sfn.create_state_machine(
        name="sdc-remediation", definition=TRIVIAL_DEFINITION, roleArn=ROLE
    )["stateMachineArn"]


def test_start_execution_names_the_execution_and_passes_the_input(state_machine):
    sfn = SESSION.client("stepfunctions")

    started = StepFunctionsWorkflow(state_machine, lambda: sfn).start_execution(
        "sdc-1", {"incident_id": "sdc-1"}
    )

    assert started.arn == execution_arn(state_machine, "sdc-1")
    described = sfn.describe_execution(executionArn=started.arn)
    assert (described["name"], json.loads(described["input"])) == (
        "sdc-1",
        {"incident_id": "sdc-1"},
    )
    assert started.request_id


def test_starting_the_same_name_twice_leaves_one_execution(state_machine):
    sfn = SESSION.client("stepfunctions")
    workflow = StepFunctionsWorkflow(state_machine, lambda: sfn)

    first = workflow.start_execution("sdc-1", {"incident_id": "sdc-1"})
    second = workflow.start_execution("sdc-1", {"incident_id": "sdc-1"})

    assert first.arn == second.arn
    assert len(sfn.list_executions(stateMachineArn=state_machine)["executions"]) == 1


def test_execution_already_exists_is_reported_as_the_existing_execution():
    sfn = SESSION.client("stepfunctions", aws_access_key_id="t", aws_secret_access_key="t")
    arn = "arn:aws:states:us-west-2:111122223333:stateMachine:sdc-remediation"
    with Stubber(sfn) as stubber:
        stubber.add_client_error("start_execution", service_error_code="ExecutionAlreadyExists")

        started = StepFunctionsWorkflow(arn, lambda: sfn).start_execution("sdc-1", {})

    assert started.already_existed
    assert started.arn == "arn:aws:states:us-west-2:111122223333:execution:sdc-remediation:sdc-1"


@pytest.mark.parametrize("code", ["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"])
def test_a_token_nobody_waits_for_is_task_not_waiting(code):
    sfn = SESSION.client("stepfunctions", aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(sfn) as stubber:
        stubber.add_client_error("send_task_success", service_error_code=code)

        with pytest.raises(TaskNotWaiting) as err:
            StepFunctionsWorkflow(None, lambda: sfn).send_task_success(
                "tok", {"decision": "approve"}
            )

    assert err.value.code == code


def test_send_task_success_sends_the_decision_as_json_output():
    sfn = SESSION.client("stepfunctions", aws_access_key_id="t", aws_secret_access_key="t")
    output = {"decision": "reject", "comment": "c", "approval_execution_arn": "arn:x"}
    with Stubber(sfn) as stubber:
        stubber.add_response(
            "send_task_success",
            META,
            {"taskToken": "tok", "output": json.dumps(output, sort_keys=True)},
        )

        StepFunctionsWorkflow(None, lambda: sfn).send_task_success("tok", output)


def test_starting_without_a_state_machine_arn_is_a_settings_error():
    with pytest.raises(SettingsError, match="STATE_MACHINE_ARN"):
        StepFunctionsWorkflow(None, lambda: None).start_execution("sdc-1", {})


# -- SNS ----------------------------------------------------------------------------------------


def topic_with_inbox() -> tuple[Any, Any, str, str]:
    """`(sns, sqs, topic ARN, queue URL)`: a topic with an SQS queue subscribed, as a reader."""
    sns, sqs = SESSION.client("sns"), SESSION.client("sqs")
    topic = sns.create_topic(Name="sdc")["TopicArn"]
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return sns, sqs, topic, queue


def test_a_notification_reaches_subscribers_with_subject_and_attributes(aws_env):
    sns, sqs, topic, queue = topic_with_inbox()

    request_id = SnsNotifier(topic, lambda: sns).publish(
        "SDC: subject", "body", {"incident_id": "sdc-1", "kind": "closed"}
    )

    body = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    assert (body["Subject"], body["Message"]) == ("SDC: subject", "body")
    assert body["MessageAttributes"]["incident_id"]["Value"] == "sdc-1"
    assert request_id


CHAT = ChatNotification(NoticeKind.CLOSED, "sdc-1", "SDC: subject", "body in chat")


def test_with_a_chat_notification_the_email_text_stays_the_text_and_https_gets_the_json():
    client = SESSION.client("sns", aws_access_key_id="testing", aws_secret_access_key="testing")
    topic = "arn:aws:sns:us-west-2:111122223333:sdc"
    with Stubber(client) as stubber:
        stubber.add_response(
            "publish",
            {"MessageId": "m-1", **META},
            {
                "TopicArn": topic,
                "Subject": "SDC: subject",
                "Message": json.dumps(
                    {
                        "default": "the card",
                        "https": json.dumps(CHAT.to_json()),
                    }
                ),
                "MessageStructure": "json",
                "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "closed"}},
            },
        )

        SnsNotifier(topic, lambda: client).publish(
            "SDC: subject", "the card", {"kind": "closed"}, CHAT
        )

        stubber.assert_no_pending_responses()


def test_an_sqs_subscriber_of_a_structured_notice_gets_the_text(aws_env):
    sns, sqs, topic, queue = topic_with_inbox()

    SnsNotifier(topic, lambda: sns).publish("SDC: subject", "the card", {"kind": "closed"}, CHAT)

    body = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    assert body["Message"] == "the card"


# -- HyperPod's events: the fake's answers are the API's shapes, and the adapter reads them -----


def fake_with_events(**options):
    """The fake HyperPod after a failed deep health check with automatic node recovery: its
    events, in the shapes ListClusterEvents and DescribeClusterEvent answer."""
    from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
    from sdc_remediation.lambdas.models.hyperpod import NodeRecovery

    start = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    moments = iter(start + timedelta(minutes=m) for m in range(1000))
    fake = FakeHyperPod(health_check_polls=0, replacement_polls=0, now=lambda: next(moments))
    fake.add_cluster(CLUSTER, node_recovery=NodeRecovery.AUTOMATIC, instance_groups=["g"])
    node = fake.add_node(CLUSTER, "g", INSTANCE, health_check_passes=False)
    for minute in range(options.get("extra", 0)):
        fake.add_event(CLUSTER, node, f"note {minute}")
    fake.start_health_check(CLUSTER, "g", [node], ["InstanceStress"])
    fake.advance(2)  # the check fails, HyperPod replaces the node
    return fake, start


def stub_events_from(fake, stubber, after, before) -> None:
    """Queue the fake's own answers on the Stubber, which validates each request and answer
    against botocore's SageMaker model."""
    token = None
    pages = []
    while True:
        params = {
            "ClusterName": CLUSTER,
            "NodeId": INSTANCE,
            "EventTimeAfter": after,
            "EventTimeBefore": before,
            "SortBy": "EventTime",
            "SortOrder": "Descending",
            "MaxResults": MAX_EVENTS + 1,
            **({"NextToken": token} if token else {}),
        }
        answer = fake.list_cluster_events_answer(**params)
        pages.append(answer)
        stubber.add_response("list_cluster_events", {**answer, **META}, params)
        token = answer.get("NextToken")
        if not token or sum(len(p["Events"]) for p in pages) > MAX_EVENTS:
            break
    kept = [e for page in pages for e in page["Events"]][:MAX_EVENTS]
    loud = [e["EventId"] for e in kept if e.get("EventLevel") in ("Warn", "Error")]
    for event_id in loud[:MAX_DESCRIBED]:
        params = {"ClusterName": CLUSTER, "EventId": event_id}
        stubber.add_response(
            "describe_cluster_event",
            {**fake.describe_cluster_event_answer(**params), **META},
            params,
        )


def test_the_fakes_events_are_the_apis_shapes_and_the_adapter_reads_them_as_the_fake_does(
    sagemaker,
):
    client, stubber = sagemaker
    fake, start = fake_with_events()
    after, before = start - timedelta(hours=1), start + timedelta(hours=1)
    stub_events_from(fake, stubber, after, before)

    page = SageMakerHyperPod(lambda: client).cluster_events(CLUSTER, INSTANCE, after, before)

    assert page == fake.cluster_events(CLUSTER, INSTANCE, after, before)
    assert [(e.level, e.description) for e in page.events] == [
        ("Info", "Deep health check started: InstanceStress"),
        ("Error", "Deep health check failed"),
        ("Warn", "Node replacement started by HyperPod (NodeRecovery Automatic)"),
        ("Info", f"Node replaced by {fake.replaced_by[INSTANCE]}"),
    ]
    assert page.events[1].failure == "InstanceStress: GPU stress test failed"


def test_the_adapter_pages_through_the_events_and_keeps_the_newest(sagemaker):
    client, stubber = sagemaker
    fake, start = fake_with_events(extra=MAX_EVENTS + 3)
    after, before = start - timedelta(hours=1), start + timedelta(days=1)
    stub_events_from(fake, stubber, after, before)

    page = SageMakerHyperPod(lambda: client).cluster_events(CLUSTER, INSTANCE, after, before)

    assert page.more and len(page.events) == MAX_EVENTS
    assert page.events[-1].description == f"Node replaced by {fake.replaced_by[INSTANCE]}"
    assert page == fake.cluster_events(CLUSTER, INSTANCE, after, before)


def test_a_cluster_without_continuous_provisioning_is_a_validation_failure(sagemaker):
    client, stubber = sagemaker
    stubber.add_client_error(
        "list_cluster_events",
        service_error_code="ValidationException",
        service_message="only supported when NodeProvisioningMode is Continuous",
    )

    with pytest.raises(DependencyFailed) as err:
        SageMakerHyperPod(lambda: client).cluster_events(
            CLUSTER, INSTANCE, datetime(2026, 11, 30, tzinfo=UTC), datetime.now(UTC)
        )

    assert err.value.code == "ValidationException"


def test_an_event_that_cannot_be_described_keeps_its_summary(sagemaker):
    client, stubber = sagemaker
    fake, start = fake_with_events()
    after, before = start - timedelta(hours=1), start + timedelta(hours=1)
    params = {
        "ClusterName": CLUSTER,
        "NodeId": INSTANCE,
        "EventTimeAfter": after,
        "EventTimeBefore": before,
        "SortBy": "EventTime",
        "SortOrder": "Descending",
        "MaxResults": MAX_EVENTS + 1,
    }
    stubber.add_response(
        "list_cluster_events", {**fake.list_cluster_events_answer(**params), **META}, params
    )
    stubber.add_client_error("describe_cluster_event", service_error_code="ThrottlingException")
    stubber.add_client_error("describe_cluster_event", service_error_code="ThrottlingException")

    page = SageMakerHyperPod(lambda: client).cluster_events(CLUSTER, INSTANCE, after, before)

    failed = next(e for e in page.events if e.level == "Error")
    assert failed.description == "Deep health check failed" and failed.failure is None
