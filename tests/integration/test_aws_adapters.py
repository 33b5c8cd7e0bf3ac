"""The HyperPod, Step Functions and SNS adapters: request shapes and error translation.

moto implements neither StartClusterHealthCheck nor BatchReplaceClusterNodes, so the SageMaker
adapter is checked with botocore's Stubber (which validates every request against the service
model); Step Functions and SNS run on moto where moto is faithful.
"""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber

from lambdas.adapters.hyperpod import SageMakerHyperPod
from lambdas.adapters.sns import SnsNotifier
from lambdas.adapters.stepfunctions import StepFunctionsWorkflow, execution_arn
from lambdas.models.errors import (
    ClusterNotFound,
    DependencyFailed,
    NodeNotFound,
    SettingsError,
    TaskNotWaiting,
    Throttled,
)
from lambdas.models.hyperpod import BatchFailure
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


def test_a_notification_reaches_subscribers_with_subject_and_attributes(aws_env):
    sns, sqs = SESSION.client("sns"), SESSION.client("sqs")
    topic = sns.create_topic(Name="sdc")["TopicArn"]
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)

    request_id = SnsNotifier(topic, lambda: sns).publish(
        "SDC: subject", "body", {"incident_id": "sdc-1", "kind": "closed"}
    )

    body = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    assert (body["Subject"], body["Message"]) == ("SDC: subject", "body")
    assert body["MessageAttributes"]["incident_id"]["Value"] == "sdc-1"
    assert request_id
