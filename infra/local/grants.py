"""Grants proven sufficient: every AWS call a function makes in a local run, checked against
that function's role in the synthesized template.

moto does not enforce IAM, so a missing grant would only show as AccessDenied in a user's
account. The local run records each call a handler makes (`CallRecorder`): botocore's
`before-call` event gives the service, operation and parameters of every SDK call, and the fake
HyperPod reports its operations the same way (the functions' HyperPod calls reach it instead of
botocore). `required` maps a call to the IAM action(s) and resource ARN(s) AWS evaluates, and
`denials` evaluates them against the statements of the function's role (its inline and attached
`AWS::IAM::Policy` documents, intrinsic functions resolved against the local account): a call
no Allow statement covers, or that a Deny covers, is a `Denial` naming the function, the action
and the resource.

The Slurm controllers' commands are recorded as SSM calls (`SendCommand`, `GetCommandInvocation`)
by the local Run Command stand-in (infra/local/run_command.py), as the fake HyperPod records its.

Not recorded, because no IAM action stands behind them: Kubernetes API requests (authorized by
the EKS access entry and RBAC, infra/stack/node_isolation.py), the presigned `sts:GetCallerIdentity`
inside an EKS token (never denied), the Prometheus query (SigV4-signed HTTP, granted as
`aps:QueryMetrics` on the workspace and checked by tests/infra) and CloudWatch Logs writes of
the Lambda runtime.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.infra.stack.template import ACCOUNT, REGION, Resolver, TemplateError


@dataclass(frozen=True)
class Call:
    function: str
    """The handler module that made it (`open_incident`)."""
    service: str
    """The IAM service prefix (`dynamodb`, `sagemaker`, ...)."""
    operation: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Need:
    action: str
    resource: str
    context: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Condition keys of the request IAM would see (`dynamodb:LeadingKeys`: the item's
    partition key value)."""


@dataclass(frozen=True)
class Denial:
    function: str
    action: str
    resource: str

    def __str__(self) -> str:
        return f"{self.function}: {self.action} on {self.resource} is not allowed by its role"


class GrantsInsufficient(AssertionError):
    """A function made a call its role in the synthesized template does not allow: on AWS it
    would have been AccessDenied."""

    def __init__(self, denied: Sequence[Denial]) -> None:
        super().__init__(
            "calls the deployed roles would refuse:\n" + "\n".join(f"  {d}" for d in denied)
        )
        self.denied = list(denied)


@dataclass
class CallRecorder:
    """The calls made inside handler invocations; calls outside (a test's own setup, the CLI)
    are not the functions' and are left out. `current_handler`: the handler the calling thread
    runs (`sdc_remediation.infra.local.routing.invocation_handler`)."""

    current_handler: Callable[[], str | None] = lambda: None
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        handler = self.current_handler()
        if handler is None:
            return
        module = handler.rsplit(".", 2)[-2]
        with self._lock:
            self.calls.append(Call(module, service, operation, dict(params)))

    def botocore_hook(self) -> Callable[..., None]:
        """For `session.events.register(BOTOCORE_EVENT, hook)`: every SDK call's parameters,
        as the caller gave them."""

        def hook(model: Any, params: Mapping[str, Any], **_: Any) -> None:
            signing = model.service_model.signing_name or model.service_model.endpoint_prefix
            self.record(IAM_PREFIXES.get(signing, signing), model.name, params)

        return hook


BOTOCORE_EVENT = "before-parameter-build"
"""Emitted by every SDK call before its request is built, with the operation and its
parameters."""
IAM_PREFIXES = {"monitoring": "cloudwatch"}
"""Signing names that differ from the IAM service prefix."""


# -- calls → what IAM evaluates -----------------------------------------------------------------

FREE_ACTIONS = frozenset({"sts:GetCallerIdentity"})
"""Allowed to every principal; no policy can deny it."""

_TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def required(
    call: Call, cluster_arns: Mapping[str, str], hash_keys: Mapping[str, str] | None = None
) -> list[Need]:
    """The IAM action(s) and resource(s) AWS evaluates for `call`. `cluster_arns`: HyperPod
    cluster name → its ARN (IAM names clusters by id: the deployment's `sdc:clusters`);
    `hash_keys`: table name → its partition key attribute (for `dynamodb:LeadingKeys`)."""
    arn = _arn_builder(call.service)
    p = call.params
    if call.service == "dynamodb":
        return _dynamodb(call, arn, hash_keys or {})
    if call.service == "logs":
        group = str(p.get("logGroupName", ""))
        if call.operation == "PutLogEvents":
            return [
                Need(
                    "logs:PutLogEvents",
                    arn(f"log-group:{group}:log-stream:{p.get('logStreamName')}"),
                )
            ]
        # a log group as IAM names it (its ARN ends in `:*`)
        return [Need(f"logs:{call.operation}", arn(f"log-group:{group}:*"))]
    if call.service == "sagemaker":
        cluster = str(p.get("ClusterName", ""))
        return [
            Need(
                f"sagemaker:{call.operation}", cluster_arns.get(cluster, arn(f"cluster/{cluster}"))
            )
        ]
    if call.service == "sns":
        return [Need(f"sns:{call.operation}", str(p.get("TopicArn") or p.get("TargetArn")))]
    if call.service == "states":
        target = p.get("stateMachineArn") or p.get("executionArn")
        if call.operation in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
            target = "task-token"  # evaluated against the token's state machine: resolved later
        return [Need(f"states:{call.operation}", str(target))]
    if call.service == "ssm" and call.operation == "SendCommand":
        # the document (AWS's own has no account in its ARN) and every target instance
        document = str(p.get("DocumentName", ""))
        owner = "" if document.startswith("AWS-") else ACCOUNT
        return [
            Need("ssm:SendCommand", f"arn:aws:ssm:{REGION}:{owner}:document/{document}"),
            *(
                Need("ssm:SendCommand", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance}")
                for instance in p.get("InstanceIds") or []
            ),
        ]
    if call.service == "ssm" and call.operation == "GetCommandInvocation":
        return [Need("ssm:GetCommandInvocation", "*")]  # it takes no resource
    if call.service == "ssm":
        name = str(p.get("Name", "")).lstrip("/")
        return [Need(f"ssm:{call.operation}", arn(f"parameter/{name}"))]
    if call.service == "eks":
        return [Need(f"eks:{call.operation}", arn(f"cluster/{p.get('name')}"))]
    if call.service == "events" and call.operation == "PutEvents":
        # one need per entry: its bus, and the `events:source` condition key it sets
        return [
            Need(
                "events:PutEvents",
                arn(f"event-bus/{entry.get('EventBusName') or 'default'}"),
                (("events:source", (str(entry.get("Source", "")),)),),
            )
            for entry in p.get("Entries") or []
        ]
    if call.service == "cloudwatch" and call.operation == "PutMetricData":
        return [Need("cloudwatch:PutMetricData", "*")]
    return [Need(f"{call.service}:{call.operation}", "*")]


def _arn_builder(service: str) -> Callable[[str], str]:
    return lambda resource: f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


def _dynamodb(call: Call, arn: Callable[[str], str], hash_keys: Mapping[str, str]) -> list[Need]:
    p = call.params

    def table(name: Any, index: Any = None) -> str:
        return arn(f"table/{name}" + (f"/index/{index}" if index else ""))

    def leading(body: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        key = hash_keys.get(str(body.get("TableName")))
        values = body.get("Item") or body.get("Key") or {}
        found = values.get(key) if key else None
        if not isinstance(found, dict) or not found:
            return ()
        return (("dynamodb:LeadingKeys", (str(next(iter(found.values()))),)),)

    if call.operation in ("TransactWriteItems", "TransactGetItems"):
        needs = []
        for item in p.get("TransactItems", []):
            ((kind, body),) = item.items()
            needs.append(
                Need(
                    f"dynamodb:{_TRANSACT_ITEM_ACTIONS[kind]}",
                    table(body["TableName"]),
                    leading(body),
                )
            )
        return needs
    if call.operation in ("BatchWriteItem", "BatchGetItem"):
        return [
            Need(f"dynamodb:{call.operation}", table(name)) for name in p.get("RequestItems", {})
        ]
    return [
        Need(
            f"dynamodb:{call.operation}", table(p.get("TableName"), p.get("IndexName")), leading(p)
        )
    ]


# -- the roles in the template ------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditional: bool
    conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def function_statements(
    template: Mapping[str, Any], resolve: Resolver
) -> dict[str, list[Statement]]:
    """Handler module → the statements of its function's role (inline and attached policies),
    resources resolved against the local account."""
    resources: Mapping[str, Any] = template.get("Resources", {})
    by_role: dict[str, list[Statement]] = {}
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                by_role.setdefault(logical, []).extend(
                    _statements(policy["PolicyDocument"], resolve)
                )
        elif resource["Type"] == "AWS::IAM::Policy":
            for role in resource["Properties"].get("Roles", []):
                if isinstance(role, dict) and "Ref" in role:
                    by_role.setdefault(role["Ref"], []).extend(
                        _statements(resource["Properties"]["PolicyDocument"], resolve)
                    )
    functions: dict[str, list[Statement]] = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        role = props.get("Role", {}).get("Fn::GetAtt", [None])[0]
        module = str(props.get("Handler", "")).rsplit(".", 2)[-2]
        functions[module] = by_role.get(str(role), [])
    return functions


def managed_policy_statements(
    template: Mapping[str, Any], resolve: Resolver
) -> dict[str, list[Statement]]:
    """Logical id of each managed policy of the template (the approvers' `ApproverPolicy`) →
    its statements, resources resolved against the local account."""
    return {
        logical: _statements(resource["Properties"]["PolicyDocument"], resolve)
        for logical, resource in template.get("Resources", {}).items()
        if resource["Type"] == "AWS::IAM::ManagedPolicy"
    }


def _statements(document: Mapping[str, Any], resolve: Resolver) -> list[Statement]:
    found = []
    for raw in _as_list(document.get("Statement")):
        try:
            resources = tuple(str(r) for r in _as_list(resolve(raw.get("Resource", "*"))))
        except (TemplateError, KeyError):
            continue  # names something the local account lacks: allows nothing here
        found.append(
            Statement(
                effect=str(raw.get("Effect", "Allow")),
                actions=tuple(str(a) for a in _as_list(raw.get("Action"))),
                resources=resources,
                conditional=bool(raw.get("Condition")),
                conditions=dict(raw.get("Condition") or {}),
            )
        )
    return found


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _matches(patterns: Iterable[str], value: str) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), p.lower()) for p in patterns)


def _covers(statement: Statement, need: Need) -> bool:
    return _matches(statement.actions, need.action) and _matches(statement.resources, need.resource)


def conditions_hold(statement: Statement, need: Need) -> bool | None:
    """Whether the statement's conditions hold for the request (None: a condition this check
    cannot evaluate). Evaluated: StringEquals / StringLike and their negations StringNotEquals /
    StringNotLike, with ForAnyValue: / ForAllValues:, on the request's own keys
    (`Need.context`). As in IAM, a negated operator holds for a value that matches none of
    its patterns, and for a key the request lacks (unless ForAnyValue:)."""
    context = dict(need.context)
    for operator, tests in statement.conditions.items():
        qualifier, _, base = operator.rpartition(":")
        if base not in _STRING_OPERATORS:
            return None
        negated = "Not" in base
        for key, expected in tests.items():
            patterns = [str(e) for e in _as_list(expected)]
            values = context.get(key)
            if values is None:
                if qualifier == "ForAllValues" or (negated and qualifier != "ForAnyValue"):
                    continue  # no values: vacuously true
                return False
            matches = [_string_matches(base, v, patterns) != negated for v in values]
            if not (all(matches) if qualifier == "ForAllValues" else any(matches)):
                return False
    return True


_STRING_OPERATORS = ("StringEquals", "StringLike", "StringNotEquals", "StringNotLike")


def _string_matches(operator: str, value: str, patterns: Sequence[str]) -> bool:
    """Whether `value` matches one of `patterns` (`*`, `?` for the Like operators)."""
    like = operator.endswith("Like")
    return any(fnmatch.fnmatchcase(value, p) if like else value == p for p in patterns)


def allowed(statements: Sequence[Statement], need: Need) -> bool:
    """IAM's answer for one need: an explicit Deny whose conditions hold (or cannot be
    evaluated) wins; else an Allow whose conditions hold."""
    if need.action in FREE_ACTIONS:
        return True
    for s in statements:
        if s.effect == "Deny" and _covers(s, need) and conditions_hold(s, need) is not False:
            return False
    return any(
        s.effect == "Allow" and _covers(s, need) and conditions_hold(s, need) is True
        for s in statements
    )


def table_hash_keys(template: Mapping[str, Any], resolve: Resolver) -> dict[str, str]:
    """Table name → its partition key attribute (what `dynamodb:LeadingKeys` reads)."""
    keys: dict[str, str] = {}
    for logical, resource in template.get("Resources", {}).items():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        try:
            name = str(resolve({"Ref": logical}))
        except TemplateError:
            continue
        for element in resource["Properties"].get("KeySchema", []):
            if element.get("KeyType") == "HASH":
                keys[name] = str(element["AttributeName"])
    return keys


def encrypted_topics(template: Mapping[str, Any], resolve: Resolver) -> dict[str, list[Need]]:
    """Topic ARN → what publishing to it also needs on its KMS key (SNS asks KMS for a data key
    as the publisher): `kms:GenerateDataKey` and `kms:Decrypt` on the key."""
    implied: dict[str, list[Need]] = {}
    for logical, resource in template.get("Resources", {}).items():
        key = resource.get("Properties", {}).get("KmsMasterKeyId")
        if resource["Type"] != "AWS::SNS::Topic" or not key:
            continue
        try:
            topic = str(resolve({"Ref": logical}))
            key_arn = str(resolve(key))
        except TemplateError:
            continue
        if not key_arn.startswith("arn:"):
            key_arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key_arn}"
        implied[topic] = [Need(a, key_arn) for a in ("kms:GenerateDataKey", "kms:Decrypt")]
    return implied


def denials(
    calls: Iterable[Call],
    statements: Mapping[str, Sequence[Statement]],
    *,
    cluster_arns: Mapping[str, str],
    task_token_machine: str,
    implied: Mapping[str, Sequence[Need]] | None = None,
    hash_keys: Mapping[str, str] | None = None,
) -> list[Denial]:
    """Every (function, action, resource) of `calls` its role does not allow, once each.
    `task_token_machine`: the state machine whose task tokens the functions answer;
    `implied`: resource → what a call on it also needs (`encrypted_topics`)."""
    found: dict[tuple[str, str, str], Denial] = {}
    for call in calls:
        needs = required(call, cluster_arns, hash_keys)
        needs += [extra for need in needs for extra in (implied or {}).get(need.resource, ())]
        for need in needs:
            if need.resource == "task-token":
                need = Need(need.action, task_token_machine, need.context)
            if not allowed(statements.get(call.function, ()), need):
                key = (call.function, need.action, need.resource)
                found.setdefault(key, Denial(*key))
    return list(found.values())


def calls_per_function(
    calls: Iterable[Call], cluster_arns: Mapping[str, str]
) -> dict[str, list[str]]:
    """Handler module → the IAM actions its calls needed, sorted."""
    table: dict[str, set[str]] = {}
    for call in calls:
        for need in required(call, cluster_arns):
            if need.action not in FREE_ACTIONS:
                table.setdefault(call.function, set()).add(need.action)
    return {function: sorted(actions) for function, actions in sorted(table.items())}
