"""Synthesize the CDK app in-process, offline: for tests, the local run and `make lint`.

    template = synth_template({"sdc:approvalTimeoutSeconds": 60})
    template = synthesize_once({"sdc:approvalTimeoutSeconds": 60}).template  # kept in build/synth

Taking the template apart (resources, handlers, state machine definitions with their references
resolved) is `sdc_remediation.infra.stack.template`'s.
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

from sdc_remediation.infra.stack.app import build_app
from sdc_remediation.infra.stack.asset import REPO_ROOT, LambdaAsset, build_lambda_asset, locked
from sdc_remediation.infra.stack.settings import DeploymentSettings

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
    stack_name = DeploymentSettings.from_context(ctx).stack_name
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
    """Hash of what a template is made from besides its context: the app's sources
    (`infra/stack/`; the operator CLI and the local run are never imported by it), the Lambda
    asset (its key covers `lambdas/` and `trainer_emitter/`, which the app imports too) and the
    versions of the CDK libraries."""
    digest = hashlib.sha256(asset.key.encode())
    for library in CDK_LIBRARIES:
        digest.update(f"\0{library}=={metadata.version(library)}".encode())
    app = REPO_ROOT / "infra" / "stack"
    for path in sorted(app.rglob("*.py")):
        relative = path.relative_to(app)
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
