"""What the stack hands back to the person who deployed it."""

from __future__ import annotations

import json

from sdc_remediation.infra.cli.deployment import DEPLOYMENT_OUTPUT, OUTPUT_NAMES
from tests.infra.template_tools import deploy_outputs, resolved

CONSOLE = (
    "https://us-west-2.console.aws.amazon.com/states/home?region=us-west-2#/statemachines/view/"
)


def test_console_links_to_both_state_machines(template):
    outputs = template["Outputs"]
    for output, name in [
        ("RemediationStateMachineConsole", "SdcRemediation-remediation"),
        ("ApprovalStateMachineConsole", "SdcRemediation-approval"),
    ]:
        assert resolved(template, outputs[output]["Value"]) == (
            f"{CONSOLE}arn:aws:states:us-west-2:123456789012:stateMachine:{name}"
        )


def test_tables_topic_and_the_exported_training_policy(template):
    outputs = template["Outputs"]

    assert outputs["IncidentsTableName"]["Value"] == {"Ref": "IncidentsTable"}
    assert outputs["AuditTableName"]["Value"] == {"Ref": "AuditTable"}
    assert outputs["NotificationTopicArn"]["Value"] == {"Ref": "NotificationTopic"}
    training = outputs["TrainingPolicyArn"]
    assert training["Value"]["Ref"].startswith("TrainingAccessEmitterPolicy")
    assert training["Export"]["Name"] == "SdcRemediation-TrainingPolicyArn"


def test_every_address_is_published_again_as_one_json_object_under_a_fixed_key(template):
    # Given the standalone stack's outputs as a deploy writes them
    outputs = deploy_outputs(template)

    # When the one object sdc reads is taken apart
    published = json.loads(outputs[DEPLOYMENT_OUTPUT])

    # Then it holds every address the CLI knows, with the value of its own output
    assert set(published) == OUTPUT_NAMES
    assert published == {name: outputs[name] for name in OUTPUT_NAMES}
