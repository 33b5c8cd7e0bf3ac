"""How handlers get their settings and dependencies: lazily, from the environment, or injected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sdc_remediation.lambdas.adapters.prometheus import AmpPrometheus
from sdc_remediation.lambdas.handlers import _deps, open_incident
from sdc_remediation.lambdas.logic.ports import NoPrometheus
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.settings import Settings
from tests.conftest import load_fixture
from tests.integration.conftest import SESSION, invoke

REPO = Path(__file__).resolve().parents[2]
HANDLERS = [
    "open_incident",
    "store_report",
    "isolate_node",
    "start_health_check",
    "check_health",
    "request_approval",
    "replace_node",
    "check_replacement",
    "close_incident",
    "decide",
]


def test_every_handler_imports_with_no_environment_and_no_aws_access():
    # No region, no credentials, no settings: creating any AWS client at import would fail
    # (botocore raises NoRegionError), so a clean import proves the clients are lazy.
    code = "import importlib\n" + "\n".join(
        f"assert callable(importlib.import_module('sdc_remediation.lambdas.handlers.{m}').handler)"
        for m in HANDLERS
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"}

    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr


def test_a_handler_without_its_environment_fails_fast_naming_the_variables(monkeypatch):
    for name in ("INCIDENTS_TABLE", "AUDIT_TABLE", "TOPIC_ARN"):
        monkeypatch.delenv(name, raising=False)
    _deps.reset()

    with pytest.raises(SettingsError, match="INCIDENTS_TABLE is not set"):
        invoke(open_incident, load_fixture("events", "contributor_ok"))


def test_without_injection_the_handler_builds_its_adapters_from_the_environment(aws):
    _deps.reset()  # forget the fixture's injected deps: read the (moto) environment instead
    event = load_fixture("events", "contributor_ok")

    invoke(open_incident, event)

    assert aws.actions(f"event#{event['id']}") == ["event_ignored"]


def test_deps_built_from_the_environment_are_built_once(aws):
    _deps.reset()

    assert _deps.deps() is _deps.deps()


def test_override_injects_deps_for_a_block_and_restores_the_previous_ones(aws):
    injected = _deps.deps()
    other = _deps.build_deps(aws.settings, hyperpod=aws.hyperpod)

    with _deps.override(other):
        inside = _deps.deps()

    assert inside is other
    assert _deps.deps() is injected


def test_an_injected_factory_builds_deps_from_the_environment_of_each_invocation(aws, monkeypatch):
    from sdc_remediation.lambdas.models.settings import Settings

    _deps.set_deps(lambda: _deps.build_deps(Settings.from_env(), hyperpod=aws.hyperpod))
    monkeypatch.setenv("ALLOWED_CLUSTERS", "another-cluster")

    result = invoke(open_incident, load_fixture("events", "contributor_alarm"))

    assert result["action"] == "ignored"  # the environment of this invocation was read


def test_only_a_deployment_with_telemetry_builds_the_prometheus_adapter():
    base = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "arn:aws:sns:us-west-2:1:t"}
    workspace = {
        "workspace_id": "ws-1234abcd",
        "query_url": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1234abcd",
        "region": "us-west-2",
    }

    plain = _deps.build_deps(Settings.from_env(base), session=SESSION)
    configured = _deps.build_deps(
        Settings.from_env({**base, "TELEMETRY": json.dumps({"ml-cluster-1": workspace})}),
        session=SESSION,
    )

    assert isinstance(plain.prometheus, NoPrometheus)
    assert isinstance(configured.prometheus, AmpPrometheus)
