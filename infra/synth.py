"""Synthesize in-process and take the template apart: for tests and the local run.

    template = synth_template({"sdc:approvalTimeoutSeconds": 60})
    template = synthesize_once({"sdc:approvalTimeoutSeconds": 60}).template  # kept in build/synth
    definitions = state_machine_definitions(template)      # placeholder ARNs
    definitions["RemediationStateMachine"]                  # the ASL string, as deployed
    function_handlers(template)["OpenIncidentFunction"]     # "lambdas.handlers.open_incident.handler"

`state_machine_definitions` resolves the template's `Fn::Join` / `Ref` / `Fn::GetAtt` with a
mapping of logical id → ARN (default: `placeholder_arns`, where a function's ARN ends in
`function:<logical id>`), so the strings are exactly what CloudFormation would deploy, with the
ARNs of wherever they run (moto, say). Logical ids of functions and state machines are fixed
(`OpenIncidentFunction`, `RemediationStateMachine`, ...), so the mapping is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from aws_cdk import App

from infra.app import build_app
from infra.asset import REPO_ROOT, LambdaAsset, build_lambda_asset, locked
from infra.settings import Settings

DEFAULT_PARTITION: Final = "aws"
DEFAULT_REGION: Final = "us-east-1"
DEFAULT_ACCOUNT: Final = "123456789012"

DISABLE_ASSET_STAGING: Final = "aws:cdk:disable-asset-staging"
"""CDK context: reference the asset directory in place instead of copying ~50 MB per synth."""

SYNTH_CACHE: Final = REPO_ROOT / "build" / "synth"
"""Where `synthesize_once` keeps what it synthesized, one JSON file per context."""
CDK_LIBRARIES: Final = ("aws-cdk-lib", "constructs", "cdk-nag", "jsii")
"""The installed libraries whose versions a synthesized template depends on."""


class NagViolations(RuntimeError):
    """cdk-nag found violations that no acknowledgment covers; synth failed."""

    def __init__(self, violations: list[str]) -> None:
        super().__init__("cdk-nag violations:\n" + "\n".join(violations))
        self.violations = violations


@dataclass(frozen=True)
class Synthesized:
    """A synthesized stack: its template and cdk-nag's unacknowledged findings of any severity
    (errors fail the synth with NagViolations, so a returned Synthesized has none)."""

    template: dict[str, Any]
    nag_findings: list[str] = field(default_factory=list)


def synthesize(
    context: Mapping[str, Any] | None = None, *, code_asset: LambdaAsset | None = None
) -> Synthesized:
    """Synthesize the app with `context` (over the defaults) into a temporary directory."""
    ctx = {DISABLE_ASSET_STAGING: True, **(context or {})}
    stack_name = Settings.from_context(ctx).stack_name
    with tempfile.TemporaryDirectory(prefix="sdc-cdk-") as outdir:
        app = build_app(
            App(context=ctx, outdir=outdir),
            code_asset=code_asset or build_lambda_asset(),
        )
        try:
            assembly = app.synth()
        except Exception:
            findings = _validation_findings(Path(outdir))
            if findings:
                raise NagViolations(findings) from None
            raise
        template = assembly.get_stack_by_name(stack_name).template
        return Synthesized(
            template=json.loads(json.dumps(template)),
            nag_findings=_validation_findings(Path(outdir)),
        )


def synthesize_once(
    context: Mapping[str, Any] | None = None,
    *,
    code_asset: LambdaAsset | None = None,
    cache_dir: Path = SYNTH_CACHE,
) -> Synthesized:
    """`synthesize`, kept in `cache_dir` under a key of the context and of every input of the
    template, so that each distinct context is synthesized once (about ten seconds each) and
    reused until an input changes. Processes running side by side (test workers) wait for the
    one synthesizing a context instead of synthesizing it too."""
    asset = code_asset or build_lambda_asset()
    inputs = inputs_key(asset)[:16]
    wanted = hashlib.sha256(json.dumps(context or {}, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir / f"{inputs}-{wanted}.json"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with locked(cache_dir / f".{path.stem}.lock"):
        if path.is_file():
            return Synthesized(**json.loads(path.read_text()))
        synthesized = synthesize(context, code_asset=asset)
        for stale in cache_dir.iterdir():
            if inputs not in stale.name:
                stale.unlink(missing_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(asdict(synthesized)))
        partial.replace(path)
        return synthesized


def inputs_key(asset: LambdaAsset) -> str:
    """Hash of what a template is made from besides its context: the sources under `infra/`
    but the local run's (`infra/local/`, which the app never imports), the Lambda asset (its
    key covers `lambdas/` and `trainer_emitter/`, which the app imports too) and the versions
    of the CDK libraries."""
    digest = hashlib.sha256(asset.key.encode())
    for library in CDK_LIBRARIES:
        digest.update(f"\0{library}=={metadata.version(library)}".encode())
    infra = REPO_ROOT / "infra"
    for path in sorted(infra.rglob("*.py")):
        relative = path.relative_to(infra)
        if relative.parts[0] == "local":
            continue
        digest.update(b"\0" + relative.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _validation_findings(outdir: Path) -> list[str]:
    """`<severity> <rule> at <construct path>` for each violation in CDK's validation report."""
    report = outdir / "validation-report.json"
    if not report.is_file():
        return []
    findings = []
    for plugin in json.loads(report.read_text()).get("pluginReports", []):
        for violation in plugin.get("violations", []):
            for construct in violation.get("violatingConstructs", []):
                findings.append(
                    f"{violation.get('severity')} {violation.get('ruleName')} at "
                    f"{construct.get('constructPath')}"
                )
    return findings


def synth_template(
    context: Mapping[str, Any] | None = None, *, code_asset: LambdaAsset | None = None
) -> dict[str, Any]:
    """The synthesized CloudFormation template as a dict."""
    return synthesize(context, code_asset=code_asset).template


def resources_of_type(template: Mapping[str, Any], resource_type: str) -> dict[str, Any]:
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") == resource_type
    }


def function_handlers(template: Mapping[str, Any]) -> dict[str, str]:
    """Lambda logical id → handler string (`lambdas.handlers.<module>.handler`)."""
    return {
        logical_id: resource["Properties"]["Handler"]
        for logical_id, resource in resources_of_type(template, "AWS::Lambda::Function").items()
    }


def placeholder_arns(
    template: Mapping[str, Any],
    *,
    partition: str = DEFAULT_PARTITION,
    region: str = DEFAULT_REGION,
    account: str = DEFAULT_ACCOUNT,
) -> dict[str, str]:
    """ARNs for the functions (`...:function:<logical id>`) and state machines
    (`...:stateMachine:<name>`) of the template."""
    arns = {
        logical_id: f"arn:{partition}:lambda:{region}:{account}:function:{logical_id}"
        for logical_id in resources_of_type(template, "AWS::Lambda::Function")
    }
    for logical_id, resource in resources_of_type(
        template, "AWS::StepFunctions::StateMachine"
    ).items():
        name = resource["Properties"].get("StateMachineName", logical_id)
        arns[logical_id] = f"arn:{partition}:states:{region}:{account}:stateMachine:{name}"
    return arns


def resolve(
    value: Any,
    arns: Mapping[str, str],
    *,
    partition: str = DEFAULT_PARTITION,
    region: str = DEFAULT_REGION,
    account: str = DEFAULT_ACCOUNT,
) -> Any:
    """Resolve `Fn::Join`, `Ref` and `Fn::GetAtt` in `value` (recursively). `arns` maps a
    logical id to its Ref / `Arn`, and `<logical id>.<attribute>` to any other attribute."""
    pseudo = {
        "AWS::Partition": partition,
        "AWS::Region": region,
        "AWS::AccountId": account,
        "AWS::URLSuffix": "amazonaws.com",
    }

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Fn::Join"}:
            separator, parts = node["Fn::Join"]
            return separator.join(str(walk(part)) for part in parts)
        if set(node) == {"Ref"}:
            ref = node["Ref"]
            if ref in pseudo:
                return pseudo[ref]
            return _lookup(arns, ref)
        if set(node) == {"Fn::GetAtt"}:
            logical_id, attribute = node["Fn::GetAtt"]
            if attribute == "Arn":
                return _lookup(arns, logical_id)
            if f"{logical_id}.{attribute}" not in arns:
                raise ValueError(f"cannot resolve Fn::GetAtt {logical_id}.{attribute}")
            return arns[f"{logical_id}.{attribute}"]
        return {key: walk(item) for key, item in node.items()}

    return walk(value)


def _lookup(arns: Mapping[str, str], logical_id: str) -> str:
    try:
        return arns[logical_id]
    except KeyError:
        raise KeyError(f"no ARN given for logical id {logical_id!r}") from None


def state_machine_definitions(
    template: Mapping[str, Any],
    arns: Mapping[str, str] | None = None,
    *,
    partition: str = DEFAULT_PARTITION,
    region: str = DEFAULT_REGION,
    account: str = DEFAULT_ACCOUNT,
) -> dict[str, str]:
    """State machine logical id (`RemediationStateMachine`, `ApprovalStateMachine`) → its
    DefinitionString with every reference resolved (`arns` defaults to `placeholder_arns`)."""
    where = {"partition": partition, "region": region, "account": account}
    arns = placeholder_arns(template, **where) if arns is None else arns
    definitions = {}
    for logical_id, resource in resources_of_type(
        template, "AWS::StepFunctions::StateMachine"
    ).items():
        resolved = resolve(resource["Properties"]["DefinitionString"], arns, **where)
        if not isinstance(resolved, str):
            raise TypeError(f"{logical_id}: DefinitionString did not resolve to a string")
        definitions[logical_id] = resolved
    return definitions
