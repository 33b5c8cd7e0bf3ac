"""Outside validators on the synthesized templates: `python -m sdc_remediation.infra.stack.validate` (`make lint`).

Three tools that nobody here wrote judge what `cdk synth` produces:

| validator | judges | finds |
|---|---|---|
| asl-validator (npm, pinned in package.json) | both state machine definitions | Amazon States Language structure, paths, ARNs |
| parliament (requirements-validators.txt) | every IAM policy document: identity policies and the queue, topic and key policies | unknown actions, a resource whose type the action does not take, condition keys the action does not support |
| checkov (requirements-validators.txt, `--skip-download`: offline) | the whole CloudFormation template | security misconfigurations |

Each runs on two templates (`TEMPLATES`): the default `cdk.json` context, which configures no
cluster and so holds none of the HyperPod and EKS grants, and a context with two clusters, node
isolation and recovery through the node health label on one of them and hardware telemetry on
both, which holds every grant the stack can make.

A finding is fixed, or acknowledged next to the code that causes it with a reason
(`sdc_remediation.infra.stack.nag`: checkov reads its own `Metadata.checkov.skip`; parliament's
acknowledgements live under `Metadata.sdc_validators.parliament` of the policy resource).
Anything else is a finding here, and `main` exits 1.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from sdc_remediation.infra.stack.nag import PARLIAMENT_KEY, VALIDATORS_METADATA
from sdc_remediation.infra.stack.synth import synthesize
from sdc_remediation.infra.stack.template import (
    ACCOUNT,
    REGION,
    Resolver,
    resources_of_type,
    state_machine_definitions,
)

REPO: Final = Path(__file__).resolve().parents[2]
ASL_VALIDATOR: Final = REPO / "node_modules" / ".bin" / "asl-validator"
VALIDATORS_BIN: Final = REPO / ".venv" / "validators" / "bin"
PARLIAMENT: Final = VALIDATORS_BIN / "parliament"
CHECKOV: Final = VALIDATORS_BIN / "checkov"

CLUSTER_CONTEXT: Final[dict[str, Any]] = {
    "sdc:clusters": {
        "ml-cluster-1": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/ab12cd34ef56",
        "ml-cluster-2": "0123456789ab",
    },
    "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
    "sdc:recoveryThroughNodeLabel": ["ml-cluster-1"],
    "sdc:notificationEmail": "oncall@example.com",
    "sdc:telemetry": {
        "ml-cluster-1": {
            "workspace": f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77",
            "dashboard": "https://g-1a2b3c4d5e.grafana-workspace.us-west-2.amazonaws.com/d/gpu",
        },
        "ml-cluster-2": {"workspace": "ws-9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"},
    },
}


def cdk_json_context() -> dict[str, Any]:
    """The context a plain `cdk synth` of this checkout uses."""
    return dict(json.loads((REPO / "cdk.json").read_text()).get("context", {}))


TEMPLATES: Final = {
    "default": cdk_json_context,
    "clusters": lambda: {**cdk_json_context(), **CLUSTER_CONTEXT},
}
"""Template name → the context it is synthesized with."""

POLICY_PROPERTIES: Final = {
    "AWS::IAM::Policy": "PolicyDocument",
    "AWS::IAM::ManagedPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
}
"""Resource type → the property that holds its policy document."""

ARN_FORMS: Final = {
    "AWS::DynamoDB::Table": ("dynamodb", "table/{name}"),
    "AWS::Events::Rule": ("events", "rule/{name}"),
    "AWS::IAM::Role": ("iam", "role/{name}"),
    "AWS::IAM::ManagedPolicy": ("iam", "policy/{name}"),
    "AWS::KMS::Key": ("kms", "key/{name}"),
    "AWS::Lambda::Function": ("lambda", "function:{name}"),
    "AWS::Logs::LogGroup": ("logs", "log-group:{name}:*"),
    "AWS::SNS::Topic": ("sns", "{name}"),
    "AWS::SQS::Queue": ("sqs", "{name}"),
    "AWS::SSM::Parameter": ("ssm", "parameter{name}"),
    "AWS::StepFunctions::StateMachine": ("states", "stateMachine:{name}"),
}
"""Resource type → (service, resource part of its ARN); IAM ARNs have no region."""

NAME_PROPERTIES: Final = (
    "TableName",
    "Name",
    "RoleName",
    "FunctionName",
    "LogGroupName",
    "TopicName",
    "QueueName",
    "StateMachineName",
    "ManagedPolicyName",
)
REF_IS_ARN: Final = {
    "AWS::SNS::Topic",
    "AWS::StepFunctions::StateMachine",
    "AWS::IAM::ManagedPolicy",
}


@dataclass(frozen=True)
class Finding:
    """One thing one validator said about one template."""

    validator: str
    template: str
    where: str
    code: str
    detail: str
    actions: tuple[str, ...] = ()
    """The IAM actions the finding is about (parliament); acknowledged only for these."""
    acknowledged: str | None = None
    """The reason the code gives for it, when it acknowledges it."""

    def __str__(self) -> str:
        return f"{self.validator} [{self.template}] {self.where}: {self.code}: {self.detail}"


@dataclass(frozen=True)
class Verdict:
    findings: list[Finding]
    """Unacknowledged: each one fails `make lint`."""
    acknowledged: list[Finding]


# -- references -------------------------------------------------------------------------------


def placeholder_resolver(template: Mapping[str, Any]) -> Resolver:
    """A resolver whose `Ref` and `Fn::GetAtt X.Arn` give names and ARNs of the shape AWS would,
    so that a policy's resources can be judged against the actions that use them."""
    resolver = Resolver(template)
    resources: Mapping[str, Any] = template.get("Resources", {})
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        props = resource.get("Properties", {})
        names = [props[key] for key in NAME_PROPERTIES if isinstance(props.get(key), str)]
        name = names[0] if names else logical_id
        if kind not in ARN_FORMS:
            resolver.refs.setdefault(logical_id, name)
            continue
        service, resource_part = ARN_FORMS[kind]
        if kind == "AWS::KMS::Key":
            name = "0000aaaa-bbbb-cccc-dddd-eeeeffff0000"
        region = "" if service == "iam" else REGION
        arn = f"arn:aws:{service}:{region}:{ACCOUNT}:{resource_part.format(name=name)}"
        resolver.refs[logical_id] = arn if kind in REF_IS_ARN else name
        resolver.attrs[(logical_id, "Arn")] = arn
        resolver.attrs[(logical_id, "QueueName")] = name
    return resolver


def policy_documents(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`<logical id>` (or `<role>/<policy name>` for a role's inline policy) → the resolved
    policy document."""
    resolve = placeholder_resolver(template)
    documents: dict[str, dict[str, Any]] = {}
    for kind, prop in POLICY_PROPERTIES.items():
        for logical_id, resource in resources_of_type(template, kind).items():
            document = resource.get("Properties", {}).get(prop)
            if document:
                documents[logical_id] = resolve(document)
    for logical_id, role in resources_of_type(template, "AWS::IAM::Role").items():
        for inline in role.get("Properties", {}).get("Policies", []):
            documents[f"{logical_id}/{inline['PolicyName']}"] = resolve(inline["PolicyDocument"])
    return documents


# -- the validators ---------------------------------------------------------------------------


def run_asl_validator(name: str, template: Mapping[str, Any], workdir: Path) -> list[Finding]:
    """asl-validator on each state machine definition, exactly as deployed."""
    findings = []
    for logical_id, definition in state_machine_definitions(template).items():
        path = workdir / f"{name}-{logical_id}.asl.json"
        path.write_text(definition)
        done = _run([str(ASL_VALIDATOR), "--json-path", str(path)])
        if done.returncode != 0:
            detail = " ".join((done.stdout + done.stderr).split())
            findings.append(Finding("asl-validator", name, logical_id, "invalid", detail))
    return findings


def run_parliament(name: str, template: Mapping[str, Any], workdir: Path) -> list[Finding]:
    """parliament on every policy document of the template (one run over a folder of them)."""
    folder = workdir / f"{name}-policies"
    folder.mkdir()
    files = {}
    for index, (where, document) in enumerate(policy_documents(template).items()):
        path = folder / f"{index:03d}.json"
        path.write_text(json.dumps(document, indent=1))
        files[str(path)] = where
    done = _run([str(PARLIAMENT), "--directory", str(folder), "--json"])
    if done.returncode not in (0, 1) or done.stderr.strip():
        raise ToolFailed(f"parliament on {name}: {done.stderr.strip() or done.stdout[:2000]}")
    findings = []
    for line in done.stdout.splitlines():
        if not line.strip():
            continue
        issue = json.loads(line)
        location = issue.get("location", {})
        where = files[location["filepath"]]
        actions = _actions(issue.get("detail")) | _actions(location.get("string"))
        detail = json.dumps(issue.get("detail"), sort_keys=True)
        findings.append(
            Finding("parliament", name, where, issue["issue"], detail, tuple(sorted(actions)))
        )
    return findings


ACTION: Final = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9*]+$")


def _actions(detail: Any) -> set[str]:
    """Every IAM action named anywhere in a parliament finding's detail."""
    if isinstance(detail, str):
        words = detail.split()
        return {word for word in words if ACTION.match(word)}
    if isinstance(detail, list):
        return set().union(*(_actions(item) for item in detail)) if detail else set()
    if isinstance(detail, dict):
        return set().union(*(_actions(item) for item in detail.values())) if detail else set()
    return set()


def run_checkov(name: str, template: Mapping[str, Any], workdir: Path) -> list[Finding]:
    """checkov's CloudFormation checks on the template, offline."""
    path = workdir / f"{name}.template.json"
    path.write_text(json.dumps(template, indent=1))
    done = _run(
        [
            str(CHECKOV),
            "--file",
            str(path),
            "--framework",
            "cloudformation",
            "--skip-download",
            "--output",
            "json",
            "--compact",
        ]
    )
    if done.returncode not in (0, 1):
        raise ToolFailed(f"checkov on {name}: {done.stderr.strip() or done.stdout[:2000]}")
    report = json.loads(done.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    findings = []
    for one in reports:
        results = one.get("results", {})
        for check in results.get("failed_checks", []) + results.get("skipped_checks", []):
            where = str(check.get("resource", "")).split(".", 1)[-1]
            result = check.get("check_result") or {}
            skipped = result.get("result") == "SKIPPED"
            findings.append(
                Finding(
                    "checkov",
                    name,
                    where,
                    check["check_id"],
                    check.get("check_name", ""),
                    acknowledged=result.get("suppress_comment") or "" if skipped else None,
                )
            )
    return findings


VALIDATORS: Final = {
    "asl-validator": run_asl_validator,
    "parliament": run_parliament,
    "checkov": run_checkov,
}


class ToolFailed(RuntimeError):
    """A validator did not run (missing, crashed, unreadable output): never taken for a pass."""


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    tool = Path(command[0])
    if not tool.exists():
        raise ToolFailed(f"{tool} is not installed: run `make lint` (it installs the validators)")
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


# -- acknowledgements -------------------------------------------------------------------------


@dataclass(frozen=True)
class IamAcknowledgement:
    """`issue` on the policy `logical_id`, for `actions` only (IAM wildcards allowed: `kms:*`),
    because `reason`."""

    logical_id: str
    issue: str
    actions: frozenset[str]
    reason: str

    def covers(self, finding: Finding) -> bool:
        return (
            finding.validator == "parliament"
            and finding.where.split("/")[0] == self.logical_id
            and finding.code == self.issue
            and bool(finding.actions)
            and all(
                any(fnmatch.fnmatchcase(action, pattern) for pattern in self.actions)
                for action in finding.actions
            )
        )


def iam_acknowledgements(template: Mapping[str, Any]) -> list[IamAcknowledgement]:
    """The IAM linter acknowledgements written into the policies' metadata."""
    return [
        IamAcknowledgement(logical_id, ack["issue"], frozenset(ack["actions"]), ack["reason"])
        for logical_id, resource in template.get("Resources", {}).items()
        for ack in resource.get("Metadata", {}).get(VALIDATORS_METADATA, {}).get(PARLIAMENT_KEY, [])
    ]


def judge(template: Mapping[str, Any], findings: Iterable[Finding]) -> Verdict:
    """Give each parliament finding the reason of the template's acknowledgement that covers it
    (checkov's come acknowledged already: it applies `Metadata.checkov.skip` itself, and reports
    a skipped check with its comment), and split acknowledged from open findings."""
    acks = iam_acknowledgements(template)
    judged = [
        replace(finding, acknowledged=next(ack.reason for ack in covering))
        if (covering := [ack for ack in acks if ack.covers(finding)])
        else finding
        for finding in findings
    ]
    return Verdict(
        [finding for finding in judged if finding.acknowledged is None],
        [finding for finding in judged if finding.acknowledged is not None],
    )


def validate(
    templates: Mapping[str, Mapping[str, Any]], validators: Iterable[str] = tuple(VALIDATORS)
) -> Verdict:
    """Run `validators` on each named template."""
    findings: list[Finding] = []
    acknowledged: list[Finding] = []
    with tempfile.TemporaryDirectory(prefix="sdc-validate-") as tmp:
        for name, template in templates.items():
            raw = [
                finding
                for validator in validators
                for finding in VALIDATORS[validator](name, template, Path(tmp))
            ]
            verdict = judge(template, raw)
            findings += verdict.findings
            acknowledged += verdict.acknowledged
    return Verdict(findings, acknowledged)


def acknowledgement_summary(acknowledged: Iterable[Finding]) -> list[str]:
    """One line per (validator, code, reason): how many resources of which templates."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for finding in acknowledged:
        groups.setdefault((finding.validator, finding.code, finding.acknowledged or ""), []).append(
            finding
        )
    return [
        f"{validator} {code} on {len({f.where for f in group})} resources "
        f"({', '.join(sorted({f.template for f in group}))}): {reason}"
        for (validator, code, reason), group in sorted(groups.items())
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sdc_remediation.infra.stack.validate", description=__doc__
    )
    parser.add_argument("--validator", choices=sorted(VALIDATORS), action="append")
    parser.add_argument("--acknowledged", action="store_true", help="list acknowledgements too")
    args = parser.parse_args(argv)
    templates = {name: synthesize(context()).template for name, context in TEMPLATES.items()}
    verdict = validate(templates, args.validator or tuple(VALIDATORS))
    if args.acknowledged:
        for line in acknowledgement_summary(verdict.acknowledged):
            print(f"acknowledged  {line}")
    for finding in verdict.findings:
        print(f"FINDING  {finding}")
    ran = ", ".join(args.validator or VALIDATORS)
    print(
        f"{ran} on {len(templates)} templates: {len(verdict.findings)} findings, "
        f"{len(verdict.acknowledged)} acknowledged"
    )
    return 1 if verdict.findings else 0


if __name__ == "__main__":
    sys.exit(main())
