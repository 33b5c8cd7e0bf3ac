"""`sdc reconcile`: run the deployed reconcile function now and show what it did (the same run
its schedule makes; sdc_remediation.lambdas.logic.closing)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Final

from botocore.config import Config

from sdc_remediation.infra.cli import deployment
from sdc_remediation.infra.cli.exits import EXIT_FAILED, EXIT_OK, CliError
from sdc_remediation.infra.cli.render import print_json, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.adapters._aws import CLIENT_CONFIG

INVOKE_READ_TIMEOUT_SECONDS: Final = 330
"""Longer than the reconcile function's timeout: the run is waited for, once (no retry: a second
run would start while the first may still be going)."""
INVOKE_CONFIG: Final = CLIENT_CONFIG.merge(
    Config(
        read_timeout=INVOKE_READ_TIMEOUT_SECONDS, retries={"mode": "standard", "max_attempts": 1}
    )
)


def cmd_reconcile(op: Operator, args: argparse.Namespace) -> int:
    report = run_reconcile(op)
    if wants_json(args):
        print_json(report)
    else:
        print(render_reconcile(report))
    return EXIT_FAILED if report.get("needs_person") else EXIT_OK


def run_reconcile(op: Operator) -> dict[str, Any]:
    name = op.deployment.optional(deployment.RECONCILE_FUNCTION)
    if name is None:
        raise CliError(
            f"{op.deployment.source} has no output {deployment.RECONCILE_FUNCTION}: deploy this "
            "version of the stack"
        )
    client = op.session.client("lambda", endpoint_url=op.args.endpoint_url, config=INVOKE_CONFIG)
    response = client.invoke(FunctionName=name, Payload=b"{}")
    answer = json.loads(response["Payload"].read() or b"null")
    if "FunctionError" in response or not isinstance(answer, dict):
        raise CliError(f"the reconcile function failed: {answer}")
    return answer


def render_reconcile(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for title, key in (
        ("Settled", "settled"),
        ("Waiting (within their patience)", "waiting"),
        ("Needs a person", "needs_person"),
    ):
        entries = report.get(key) or []
        lines.append(f"{title}: {len(entries)}")
        lines += [f"  {e['incident_id']}  {e['finding']}: {e['why']}" for e in entries]
    if report.get("unfinished"):
        lines.append("The run stopped for time; the next one goes on.")
    return "\n".join(lines)
