"""Stand the synthesized CloudFormation template up in a moto account.

The local run deploys what `cdk synth` wrote, not a hand-made copy: tables, topic, queues,
functions and state machines come from the template's resources, and every `Ref`,
`Fn::GetAtt`, `Fn::Join` and `Fn::Sub` in function environments and state machine definitions
is resolved against the moto resources created here. Alarms and rules are kept as data: moto
never evaluates alarms, and rules with Lambda targets are routed by `sdc_remediation.infra.local.routing`.
Dashboards are put into the account with their references resolved (the drill's judge reads
them).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.stack.template import ACCOUNT, REGION, Resolver, TemplateError


@dataclass
class Function:
    logical_id: str
    name: str
    arn: str
    handler: str
    environment: dict[str, str]
    dead_letter_arn: str | None = None
    """Where a failed asynchronous invocation goes: the function's DLQ or on-failure destination."""
    async_retries: int = 0
    """How often Lambda retries a failed asynchronous invocation (EventInvokeConfig)."""


@dataclass
class StateMachine:
    logical_id: str
    name: str
    arn: str
    definition: str


@dataclass
class Rule:
    logical_id: str
    pattern: dict[str, Any]
    targets: list[dict[str, Any]]


@dataclass
class LocalStack:
    """What the template became in the moto account, by logical id."""

    template: dict[str, Any]
    tables: dict[str, str] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    queues: dict[str, dict[str, str]] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    state_machines: dict[str, StateMachine] = field(default_factory=dict)
    rules: dict[str, Rule] = field(default_factory=dict)
    schedules: dict[str, Rule] = field(default_factory=dict)
    resolve: Resolver | None = None
    """The intrinsic functions of the template, resolved against this account."""
    """Scheduled rules (no pattern): their targets, invoked on demand in the local run."""
    alarms: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Dashboard bodies (parsed) by logical id; also put into the account."""
    outputs: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    """SSM parameter names by logical id (the pause switch)."""

    def function_by_handler(self, module: str) -> Function:
        for function in self.functions.values():
            if function.handler == f"sdc_remediation.lambdas.handlers.{module}.handler":
                return function
        raise TemplateError(f"the template has no function with handler module {module!r}")

    def state_machine(self, fragment: str) -> StateMachine:
        found = [
            m for m in self.state_machines.values() if fragment.lower() in m.logical_id.lower()
        ]
        if len(found) != 1:
            names = sorted(self.state_machines)
            raise TemplateError(f"{len(found)} state machines match {fragment!r} among {names}")
        return found[0]


def stand_up(template: dict[str, Any], session: Any) -> LocalStack:
    """Create the template's resources in the moto account `session` talks to."""
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    resolve = Resolver(template)
    stack = LocalStack(template=template, resolve=resolve)
    by_type: dict[str, list[str]] = {}
    for logical, resource in resources.items():
        by_type.setdefault(resource["Type"], []).append(logical)

    iam = session.client("iam")
    role_arn = iam.create_role(
        RoleName="local-run",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    for logical in by_type.get("AWS::IAM::Role", []):
        resolve.refs[logical] = "local-run"
        resolve.attrs[(logical, "Arn")] = role_arn
    for logical in by_type.get("AWS::KMS::Key", []):
        key = session.client("kms").create_key()["KeyMetadata"]
        resolve.refs[logical] = key["KeyId"]
        resolve.attrs[(logical, "Arn")] = key["Arn"]
    for logical in by_type.get("AWS::Logs::LogGroup", []):
        name = resources[logical].get("Properties", {}).get("LogGroupName") or f"/local/{logical}"
        name = resolve(name)
        logs = session.client("logs")
        # The audit anchor is written to; the functions' own groups only exist.
        with suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_group(logGroupName=name)
        resolve.refs[logical] = name
        resolve.attrs[(logical, "Arn")] = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"

    _tables(session, resources, by_type, resolve, stack)
    _queues_and_topics(session, resources, by_type, resolve, stack)
    _parameters(session, resources, by_type, resolve, stack)
    # Functions first without environment (state machine ARNs are not known yet), then machines,
    # then the environments, so that references in either direction resolve.
    for logical in by_type.get("AWS::Lambda::Function", []):
        name = resolve(resources[logical]["Properties"].get("FunctionName")) or logical
        arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        resolve.refs[logical] = name
        resolve.attrs[(logical, "Arn")] = arn
    for logical in by_type.get("AWS::StepFunctions::StateMachine", []):
        name = resolve(resources[logical]["Properties"].get("StateMachineName")) or logical
        arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        resolve.refs[logical] = arn
        resolve.attrs[(logical, "Arn")] = arn
        resolve.attrs[(logical, "Name")] = name

    lam = session.client("lambda")
    for logical in by_type.get("AWS::Lambda::Function", []):
        props = resources[logical]["Properties"]
        environment = resolve(props.get("Environment", {}).get("Variables", {}))
        name = resolve.refs[logical]
        lam.create_function(
            FunctionName=name,
            Runtime=props.get("Runtime", "python3.12"),
            Role=role_arn,
            Handler=props["Handler"],
            Code={"ZipFile": _empty_zip()},
            Environment={"Variables": {k: str(v) for k, v in environment.items()}},
            Timeout=int(props.get("Timeout", 30)),
        )
        stack.functions[logical] = Function(
            logical,
            name,
            resolve.attrs[(logical, "Arn")],
            props["Handler"],
            {k: str(v) for k, v in environment.items()},
            resolve((props.get("DeadLetterConfig") or {}).get("TargetArn")),
        )
    for logical in by_type.get("AWS::Lambda::EventInvokeConfig", []):
        props = resources[logical]["Properties"]
        target = resolve(props["FunctionName"])
        on_failure = resolve(
            ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        )
        for function in stack.functions.values():
            if target in (function.name, function.arn):
                function.async_retries = int(props.get("MaximumRetryAttempts", 2))
                if on_failure:
                    function.dead_letter_arn = on_failure

    sfn = session.client("stepfunctions")
    for logical in by_type.get("AWS::StepFunctions::StateMachine", []):
        props = resources[logical]["Properties"]
        definition = props.get("DefinitionString")
        if definition is None:
            raise TemplateError(f"state machine {logical} has no DefinitionString")
        text = resolve(definition)
        name = resolve.attrs[(logical, "Name")]
        created = sfn.create_state_machine(
            name=name,
            definition=text,
            roleArn=role_arn,
            type=props.get("StateMachineType", "STANDARD"),
        )
        if created["stateMachineArn"] != resolve.refs[logical]:
            raise TemplateError(f"state machine {logical} got ARN {created['stateMachineArn']}")
        stack.state_machines[logical] = StateMachine(
            logical, name, created["stateMachineArn"], text
        )

    for logical in by_type.get("AWS::Events::Rule", []):
        props = resources[logical]["Properties"]
        if "EventPattern" not in props:  # a schedule: LocalRun.run_scheduled invokes its targets
            stack.schedules[logical] = Rule(logical, {}, resolve(props.get("Targets", [])))
            continue
        stack.rules[logical] = Rule(
            logical, resolve(props["EventPattern"]), resolve(props.get("Targets", []))
        )
    for logical in by_type.get("AWS::CloudWatch::Alarm", []):
        props = resolve(resources[logical]["Properties"])
        name = props.get("AlarmName") or logical
        arn = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}"
        stack.alarms[logical] = {**props, "AlarmName": name, "AlarmArn": arn}
        resolve.refs[logical] = name
        resolve.attrs[(logical, "Arn")] = arn
    cloudwatch = session.client("cloudwatch")
    for logical in by_type.get("AWS::CloudWatch::Dashboard", []):
        props = resources[logical]["Properties"]
        name = resolve(props.get("DashboardName")) or logical
        body = resolve(props["DashboardBody"])
        cloudwatch.put_dashboard(DashboardName=name, DashboardBody=body)
        stack.dashboards[logical] = json.loads(body)
        resolve.refs[logical] = name
    for name, output in template.get("Outputs", {}).items():
        try:
            stack.outputs[name] = resolve(output.get("Value"))
        except TemplateError:
            stack.outputs[name] = None
    return stack


def create_tables(session: Any, template: Mapping[str, Any]) -> dict[str, str]:
    """Create only the template's DynamoDB tables in the moto account `session` talks to, the
    way `stand_up` does (key schema, attribute definitions, global secondary indexes, TTL);
    logical id → table name. For tests that need the deployed schema without the whole stack."""
    resources: dict[str, dict[str, Any]] = dict(template.get("Resources", {}))
    by_type: dict[str, list[str]] = {}
    for logical, resource in resources.items():
        by_type.setdefault(resource["Type"], []).append(logical)
    stack = LocalStack(template=dict(template))
    _tables(session, resources, by_type, Resolver(template), stack)
    return stack.tables


def _tables(
    session: Any, resources: dict, by_type: dict, resolve: Resolver, stack: LocalStack
) -> None:
    dynamodb = session.client("dynamodb")
    for logical in by_type.get("AWS::DynamoDB::Table", []) + by_type.get(
        "AWS::DynamoDB::GlobalTable", []
    ):
        props = resolve(resources[logical]["Properties"])
        name = props.get("TableName") or logical
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if props.get("GlobalSecondaryIndexes"):
            args["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": g["IndexName"],
                    "KeySchema": g["KeySchema"],
                    "Projection": g["Projection"],
                }
                for g in props["GlobalSecondaryIndexes"]
            ]
        arn = dynamodb.create_table(**args)["TableDescription"]["TableArn"]
        ttl = props.get("TimeToLiveSpecification") or {}
        if ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )
        stack.tables[logical] = name
        resolve.refs[logical] = name
        resolve.attrs[(logical, "Arn")] = arn
        resolve.attrs[(logical, "StreamArn")] = f"{arn}/stream/local"


def _queues_and_topics(
    session: Any, resources: dict, by_type: dict, resolve: Resolver, stack: LocalStack
) -> None:
    sqs = session.client("sqs")
    for logical in by_type.get("AWS::SQS::Queue", []):
        name = resolve(resources[logical].get("Properties", {}).get("QueueName")) or logical
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        stack.queues[logical] = {"url": url, "arn": arn}
        resolve.refs[logical] = url
        resolve.attrs[(logical, "Arn")] = arn
        resolve.attrs[(logical, "QueueName")] = name
    sns = session.client("sns")
    for logical in by_type.get("AWS::SNS::Topic", []):
        arn = sns.create_topic(Name=logical)["TopicArn"]
        stack.topics[logical] = arn
        resolve.refs[logical] = arn
        resolve.attrs[(logical, "TopicArn")] = arn
        resolve.attrs[(logical, "TopicName")] = logical


def _parameters(
    session: Any, resources: dict, by_type: dict, resolve: Resolver, stack: LocalStack
) -> None:
    ssm = session.client("ssm")
    for logical in by_type.get("AWS::SSM::Parameter", []):
        props = resolve(resources[logical]["Properties"])
        ssm.put_parameter(Name=props["Name"], Value=props["Value"], Type=props["Type"])
        stack.parameters[logical] = props["Name"]
        resolve.refs[logical] = props["Name"]
        resolve.attrs[(logical, "Type")] = props["Type"]
        resolve.attrs[(logical, "Value")] = props["Value"]


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "handlers run in-process in the local run\n")
    return buffer.getvalue()
