"""The functions: handlers, runtime, logging, tracing and environment per docs/pipeline.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.config import Config

from sdc_remediation.infra.stack import asset
from sdc_remediation.infra.stack.asl import TASK_TIMEOUT_SECONDS
from sdc_remediation.infra.stack.functions import (
    ALL_FUNCTIONS,
    PUT_EVENTS,
    SPECS,
    time_budget_seconds,
)
from sdc_remediation.infra.stack.template import function_handlers, pipeline_functions
from sdc_remediation.lambdas.adapters._aws import CLIENT_CONFIG, worst_call_seconds
from sdc_remediation.lambdas.models.lifecycle_event import LIFECYCLE_SOURCE
from tests.docs.tables import table_after
from tests.infra.conftest import CONTEXT
from tests.infra.template_tools import actions, resolved, statements_of_function

REPO = Path(__file__).resolve().parents[2]
COMMON_ENV = {
    "INCIDENTS_TABLE",
    "AUDIT_TABLE",
    "TOPIC_ARN",
    "ALLOWED_CLUSTERS",
    "HEALTH_CHECKS",
    "NAMESPACE",
    "DRY_RUN",
    "APPROVAL_STATE_MACHINE_ARN",
    "APPROVAL_TIMEOUT_SECONDS",
    "APPROVER_TIME_ZONE",
    "GUARD_MAX_OPEN_NODES",
    "GUARD_MAX_OPEN_PERCENT",
    "STORM_THRESHOLD",
    "EVENT_BUS_NAME",
    "STORM_WINDOW_SECONDS",
    "REPORT_OPENINGS_PER_MINUTE",
    "JOB_OPENINGS_PER_MINUTE",
    "REPEAT_OFFENDER_INCIDENTS",
    "REPEAT_OFFENDER_WINDOW_DAYS",
    "APPROVALS_REQUIRED",
    "APPROVERS",
    "HUMAN_SESSION_ROLES",
    "REQUIRE_IDENTITY_PROOF",
    "AUDIT_ANCHOR_LOG_GROUP",
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
}


def _env(template, function_id):
    return template["Resources"][function_id]["Properties"]["Environment"]["Variables"]


def test_one_function_per_handler_module_of_the_pipeline_doc(template):
    doc = (REPO / "docs" / "pipeline.md").read_text()
    documented = {row[0].strip("`") for row in table_after(doc, "## Functions")}

    handlers = set(function_handlers(template).values())
    assert handlers == {
        f"sdc_remediation.lambdas.handlers.{module}.handler" for module in documented
    }


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.module)
def test_function_runs_python_with_json_logs_to_its_own_retained_log_group_and_tracing(
    template, spec
):
    props = template["Resources"][spec.logical_id]["Properties"]
    log_group_id = props["LoggingConfig"]["LogGroup"]["Ref"]

    assert props["Runtime"] == f"python{asset.PYTHON_VERSION}"
    assert props["Handler"] == spec.handler
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    log_group = template["Resources"][log_group_id]
    assert log_group["Properties"]["RetentionInDays"] == CONTEXT["sdc:logRetentionDays"]


def test_log_groups_are_not_shared(template):
    groups = [
        r["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for r in pipeline_functions(template).values()
    ]

    assert len(groups) == len(set(groups)) == len(ALL_FUNCTIONS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.module)
def test_environment_per_the_pipeline_doc(template, spec):
    env = _env(template, spec.logical_id)

    expected = (
        COMMON_ENV
        | ({"STATE_MACHINE_ARN"} if spec.starts_remediation else set())
        | ({"PAUSE_PARAMETER"} if spec.reads_pause_switch else set())
        | (
            {"NODE_ISOLATION"}
            if spec.kubernetes or spec.checks_claims or spec.reads_nodes
            else set()
        )
        | ({"TELEMETRY"} if spec.queries_telemetry else set())
    )
    assert set(env) == expected
    assert env["INCIDENTS_TABLE"] == {"Ref": "IncidentsTable"}
    assert env["AUDIT_TABLE"] == {"Ref": "AuditTable"}
    assert env["TOPIC_ARN"] == {"Ref": "NotificationTopic"}
    assert env["ALLOWED_CLUSTERS"] == "ml-cluster-1,ml-cluster-2"
    assert env["HEALTH_CHECKS"] == "InstanceStress,InstanceConnectivity"
    assert env["NAMESPACE"] == "SDC/Training"
    assert env["DRY_RUN"] == "false"
    assert env["APPROVAL_TIMEOUT_SECONDS"] == str(CONTEXT["sdc:approvalTimeoutSeconds"])
    assert (env["GUARD_MAX_OPEN_NODES"], env["GUARD_MAX_OPEN_PERCENT"]) == ("3", "10")
    assert (env["STORM_THRESHOLD"], env["STORM_WINDOW_SECONDS"]) == ("4", "900")
    assert (env["REPEAT_OFFENDER_INCIDENTS"], env["REPEAT_OFFENDER_WINDOW_DAYS"]) == ("3", "30")
    assert env["POWERTOOLS_METRICS_NAMESPACE"] != env["NAMESPACE"]


def test_the_functions_that_act_are_told_the_pause_switch(template):
    readers = {
        spec.module for spec in SPECS if "PAUSE_PARAMETER" in _env(template, spec.logical_id)
    }

    assert readers == {
        "open_incident",
        "store_report",
        "isolate_node",
        "start_health_check",
        "check_health",
        "replace_node",
        "reboot_node",
        "decide",  # a `proceed` opens an incident: not while paused
        "reconcile",  # a claim the rate bound held is taken again: not while paused
    }
    env = _env(template, "OpenIncidentFunction")
    assert env["PAUSE_PARAMETER"] == {"Ref": "PauseSwitchParameter"}


def test_environment_follows_the_context(variant_template):
    env = _env(variant_template, "OpenIncidentFunction")

    assert env["ALLOWED_CLUSTERS"] == ""
    assert env["DRY_RUN"] == "true"
    assert env["NAMESPACE"] == "ML/SDC"
    assert env["HEALTH_CHECKS"] == "InstanceStress,MultiNodeTrainingValidation"


def test_every_function_may_put_only_lifecycle_events_and_only_on_the_default_bus(template):
    for spec in SPECS:
        env = _env(template, spec.logical_id)
        (statement,) = [
            s for s in statements_of_function(template, spec.logical_id) if PUT_EVENTS in actions(s)
        ]
        assert actions(statement) == {PUT_EVENTS}, spec.module
        assert resolved(template, statement["Resource"]).endswith(":event-bus/default")
        assert statement["Condition"] == {"StringEquals": {"events:source": LIFECYCLE_SOURCE}}
        assert env["EVENT_BUS_NAME"] == "default"


@pytest.mark.parametrize("spec", ALL_FUNCTIONS, ids=lambda s: s.module)
def test_each_function_timeout_holds_a_hung_call_and_recording_it(template, spec):
    deployed = template["Resources"][spec.logical_id]["Properties"]["Timeout"]

    assert deployed == spec.timeout_seconds
    assert deployed >= time_budget_seconds(spec), (spec.module, time_budget_seconds(spec))


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if not (s.reconciles or s.verifies_audit)], ids=lambda s: s.module
)
def test_each_function_ends_before_its_state_machine_task_gives_up_on_it(spec):
    assert spec.timeout_seconds < TASK_TIMEOUT_SECONDS


def test_one_aws_call_with_every_attempt_and_backoff_ends_well_inside_the_shortest_timeout():
    worst = worst_call_seconds(CLIENT_CONFIG)

    assert CLIENT_CONFIG.connect_timeout <= 5 and CLIENT_CONFIG.read_timeout <= 10
    assert worst <= min(spec.timeout_seconds for spec in SPECS) / 2


def test_the_worst_call_counts_every_attempt_timing_out_and_the_longest_backoffs():
    config = CLIENT_CONFIG.merge(
        Config(connect_timeout=1, read_timeout=2, retries={"mode": "standard", "max_attempts": 3})
    )

    # 3 attempts x (1 + 2) s, backoffs min(2**0, 20) + 5 and min(2**1, 20) + 5
    assert worst_call_seconds(config) == 9 + 6 + 7
