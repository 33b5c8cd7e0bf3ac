"""Importing a handler is cheap: boto3 and the adapters load when the first invocation builds its
deps, the X-Ray SDK only in Lambda (the figures: `make bench ARGS=cold_start`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO

HANDLERS = sorted(
    f"sdc_remediation.lambdas.handlers.{p.stem}"
    for p in (REPO / "lambdas" / "handlers").glob("[a-z]*.py")
)


def run(code: str, **environment: str) -> str:
    outside_lambda = {k: v for k, v in os.environ.items() if k != "LAMBDA_TASK_ROOT"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env={**outside_lambda, **environment},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_the_handlers_loads_no_boto3_no_adapter_and_no_x_ray_sdk():
    loaded = run(
        f"""
        import importlib, json, sys
        for name in {HANDLERS!r}:
            importlib.import_module(name)
        print(json.dumps(sorted(
            m for m in sys.modules
            if m.partition(".")[0] in ("boto3", "aws_xray_sdk")
            or m.startswith("sdc_remediation.lambdas.adapters.")
        )))
        """
    )

    assert HANDLERS
    assert json.loads(loaded) == []


def test_a_handler_is_traced_in_lambda_only():
    code = """
        import sys
        from sdc_remediation.lambdas.observability import traced
        def handler(event, context):
            return event
        print(traced(handler) is handler, "aws_xray_sdk.core" in sys.modules)
        """

    assert run(code).split() == ["True", "False"]
    assert run(code, LAMBDA_TASK_ROOT=str(REPO)).split() == ["False", "True"]
