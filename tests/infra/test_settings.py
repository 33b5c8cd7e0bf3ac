"""The `sdc:*` context keys: documented defaults, CLI string forms, and fail-fast errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdc_remediation.infra.stack import log_groups
from sdc_remediation.infra.stack.settings import (
    CONTEXT_KEYS,
    LOG_RETENTION_DAYS,
    Cluster,
    DeploymentSettings,
    SettingsError,
)
from trainer_emitter.contract import NAMESPACE

REPO = Path(__file__).resolve().parents[2]


def test_cdk_json_context_is_exactly_the_documented_defaults():
    context = json.loads((REPO / "cdk.json").read_text())["context"]

    assert DeploymentSettings.from_context(context) == DeploymentSettings()


def test_the_default_namespace_is_the_contracts():
    assert DeploymentSettings().namespace == NAMESPACE


def test_the_settings_module_points_at_the_settings_table_instead_of_restating_it():
    # The table itself is checked against the declaration by tests/docs/test_tables_drift.py.
    import sdc_remediation.infra.stack.settings

    docstring = sdc_remediation.infra.stack.settings.__doc__ or ""

    assert "docs/settings.md" in docstring
    assert [key for key in CONTEXT_KEYS if f"`{key}`" in docstring] == []


def test_values_given_on_the_command_line_as_strings_are_parsed():
    settings = DeploymentSettings.from_context(
        {
            "sdc:clusters": '{"ml-cluster-1": "ab12cd34ef56"}',
            "sdc:approvalTimeoutSeconds": "7200",
            "sdc:dryRun": "true",
            "sdc:healthChecks": "InstanceStress, MultiNodeTrainingValidation",
            "sdc:logRetentionDays": "365",
        }
    )

    assert settings.clusters == (Cluster("ml-cluster-1", "ab12cd34ef56"),)
    assert settings.approval_timeout_seconds == 7200
    assert settings.dry_run is True
    assert settings.health_checks == ("InstanceStress", "MultiNodeTrainingValidation")
    assert settings.log_retention_days == 365


def test_roles_whose_sessions_name_the_human_are_role_arns_of_named_accounts():
    settings = DeploymentSettings.from_context(
        {"sdc:humanSessionRoles": '["arn:aws:iam::111122223333:role/Oncall*"]'}
    )

    assert settings.human_session_roles == ("arn:aws:iam::111122223333:role/Oncall*",)


def test_a_cluster_is_given_by_arn_or_by_id():
    arn = "arn:aws:sagemaker:us-west-2:111122223333:cluster/ab12cd34ef56"
    settings = DeploymentSettings.from_context({"sdc:clusters": {"b": "0123456789ab", "a": arn}})

    assert settings.cluster_names == ("a", "b")
    assert settings.clusters[0].arn == arn
    assert settings.clusters[1].arn is None
    assert settings.clusters[1].cluster_id == "0123456789ab"


def test_keys_of_other_tools_are_ignored():
    settings = DeploymentSettings.from_context({"@aws-cdk/core:newStyleStackSynthesis": True})

    assert settings == DeploymentSettings()


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"sdc:approvalTimeout": 60}, "unknown context key"),
        ({"sdc:clusters": ["ml-cluster-1"]}, "cluster ARN or 12-character cluster id"),
        ({"sdc:clusters": {"ml-cluster-1": "ml-cluster-1"}}, "is neither"),
        ({"sdc:clusters": {"ml-cluster-1": "arn:aws:sagemaker:us-west-2:1:cluster/x"}}, "neither"),
        ({"sdc:clusters": {"bad_name": "ab12cd34ef56"}}, "not a HyperPod cluster name"),
        ({"sdc:clusters": "{not json"}, "as JSON"),
        ({"sdc:approvalTimeoutSeconds": 0}, "sdc:approvalTimeoutSeconds"),
        ({"sdc:approvalTimeoutSeconds": "soon"}, "an integer"),
        ({"sdc:approvalTimeoutSeconds": True}, "an integer"),
        ({"sdc:approverTimeZone": "Mars/Olympus_Mons"}, "an IANA time zone name"),
        ({"sdc:approverTimeZone": "CET+1"}, "an IANA time zone name"),
        ({"sdc:approverTimeZone": 1}, "an IANA time zone name"),
        ({"sdc:healthChecks": ["InstanceStress", "Nope"]}, "InstanceConnectivity"),
        ({"sdc:healthChecks": []}, "non-empty"),
        ({"sdc:dryRun": "yes"}, "true or false"),
        ({"sdc:logRetentionDays": 10}, "one of 1, 3, 5"),
        ({"sdc:notificationEmail": "not-an-address"}, "e-mail"),
        ({"sdc:namespace": "AWS/EC2"}, "CloudWatch namespace"),
        ({"sdc:alarmNamePrefix": "prod-"}, "not at either end"),
        ({"sdc:stackName": "1stack"}, "stack name"),
        ({"sdc:humanSessionRoles": ["arn:aws:iam::*:role/Oncall"]}, "IAM role ARN patterns"),
        ({"sdc:humanSessionRoles": "arn:aws:iam::111122223333:user/alice"}, "IAM role ARN"),
        (
            {"sdc:healthCheckMaxPolls": 1000, "sdc:replacementMaxPolls": 1000},
            "history",
        ),
        (
            {"sdc:approvalTimeoutSeconds": 31_536_000, "sdc:healthCheckMaxPolls": 10},
            "one year",
        ),
    ],
)
def test_a_bad_value_fails_fast_naming_the_key(context, message):
    with pytest.raises(SettingsError, match=message):
        DeploymentSettings.from_context(context)


def test_an_empty_email_means_no_subscription():
    assert DeploymentSettings.from_context({"sdc:notificationEmail": ""}).notification_email is None


def test_every_allowed_log_retention_maps_to_a_cdk_retention():
    assert sorted(log_groups._RETENTION) == list(LOG_RETENTION_DAYS)


def test_the_guard_and_storm_defaults_are_documented_values():
    settings = DeploymentSettings()

    assert (settings.guard_max_open_nodes, settings.guard_max_open_percent) == (3, 10)
    assert (settings.storm_threshold, settings.storm_window_seconds) == (4, 900)


def test_the_pause_parameter_defaults_to_one_under_the_stack_name():
    assert DeploymentSettings(stack_name="Prod").pause_parameter_name == "/Prod/paused"


def test_a_pause_parameter_name_is_used_as_given_with_a_leading_slash():
    settings = DeploymentSettings.from_context({"sdc:pauseParameterName": "ops/sdc/paused"})

    assert settings.pause_parameter_name == "/ops/sdc/paused"


@pytest.mark.parametrize("value", ["/aws/reserved", "has space", "/a//b", 7])
def test_a_bad_pause_parameter_name_fails_the_synth_naming_the_key(value):
    with pytest.raises(SettingsError, match="sdc:pauseParameterName"):
        DeploymentSettings.from_context({"sdc:pauseParameterName": value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sdc:guardMaxOpenNodes", 0),
        ("sdc:guardMaxOpenPercent", 101),
        ("sdc:stormThreshold", 1),
        ("sdc:stormWindowSeconds", 10),
    ],
)
def test_guard_and_storm_limits_out_of_range_fail_the_synth(key, value):
    with pytest.raises(SettingsError, match=key):
        DeploymentSettings.from_context({key: value})


def test_the_old_name_of_the_node_guard_is_refused_with_its_new_name():
    with pytest.raises(
        SettingsError, match="sdc:guardMaxOpenIncidents is now sdc:guardMaxOpenNodes"
    ):
        DeploymentSettings.from_context({"sdc:guardMaxOpenIncidents": 5})


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("sdc:guardMaxOpenNodes", "GUARD_MAX_OPEN_NODES"),
        ("sdc:stormThreshold", "STORM_THRESHOLD"),
        ("sdc:reportOpeningsPerMinute", "REPORT_OPENINGS_PER_MINUTE"),
        ("sdc:jobOpeningsPerMinute", "JOB_OPENINGS_PER_MINUTE"),
    ],
)
def test_the_stack_and_the_functions_accept_the_same_range(key, variable):
    """What the synth lets through, the functions accept; what the synth refuses, they refuse."""
    from sdc_remediation.lambdas.models import settings as functions_side

    base = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "arn:aws:sns:r:1:t"}
    highest = 10_000
    for value, accepted in ((highest, True), (highest + 1, False)):
        stack_accepts = _accepts(DeploymentSettings.from_context, {key: value})
        functions_accept = _accepts(
            functions_side.Settings.from_env, {**base, variable: str(value)}
        )
        assert (stack_accepts, functions_accept) == (accepted, accepted), value


def _accepts(parse, given) -> bool:
    try:
        parse(given)
    except ValueError:
        return False
    return True


# -- sdc:telemetry ------------------------------------------------------------------------------

TELEMETRY_ARN = (
    "arn:aws:aps:eu-west-1:111122223333:workspace/ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"
)


def with_telemetry(telemetry: object) -> dict[str, object]:
    return {"sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"}, "sdc:telemetry": telemetry}


def test_a_clusters_workspace_is_given_by_id_or_by_arn_with_an_optional_dashboard():
    by_id = DeploymentSettings.from_context(
        with_telemetry('{"ml-cluster-1": {"workspace": "ws-1234abcd-0000", "dashboard": null}}')
    ).telemetry[0]
    by_arn = DeploymentSettings.from_context(
        with_telemetry(
            {
                "ml-cluster-1": {
                    "workspace": TELEMETRY_ARN,
                    "dashboard": "https://grafana.example.com/d/gpu",
                    "nodeLabel": "kubernetes_node",
                }
            }
        )
    ).telemetry[0]

    assert (by_id.workspace_id, by_id.arn, by_id.region, by_id.dashboard) == (
        "ws-1234abcd-0000",
        None,
        None,
        None,
    )
    assert by_arn.workspace_id == "ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"
    assert (by_arn.arn, by_arn.region, by_arn.url_suffix) == (
        TELEMETRY_ARN,
        "eu-west-1",
        "amazonaws.com",
    )
    assert by_arn.node_label == "kubernetes_node"


def test_a_workspace_in_the_china_partition_is_reached_under_its_dns_suffix():
    arn = "arn:aws-cn:aps:cn-north-1:111122223333:workspace/ws-1234abcd-0000"

    source = DeploymentSettings.from_context(
        with_telemetry({"ml-cluster-1": {"workspace": arn}})
    ).telemetry[0]

    assert (source.region, source.url_suffix) == ("cn-north-1", "amazonaws.com.cn")


@pytest.mark.parametrize(
    ("telemetry", "message"),
    [
        ({"ml-cluster-1": {"workspace": "ml-cluster-1"}}, "neither a workspace id"),
        ({"ml-cluster-1": {"workspace": "arn:aws:aps:us-west-2:1:workspace/ws-1"}}, "neither"),
        ({"ml-cluster-1": {}}, "neither a workspace id"),
        ({"ml-cluster-1": "ws-1234abcd"}, "needs an object"),
        ({"ml-cluster-1": {"workspace": "ws-1", "dashboard": "http://g.example.com"}}, "https"),
        ({"ml-cluster-1": {"workspace": "ws-1", "dashboard": "g.example.com/d"}}, "https"),
        ({"ml-cluster-1": {"workspace": "ws-1", "nodeLabel": "node-name"}}, "label name"),
        ({"ml-cluster-1": {"workspace": "ws-1", "nodeLabel": "__name__"}}, "label name"),
        ({"ml-cluster-1": {"workspace": "ws-1", "region": "us-east-1"}}, "unknown keys"),
        ({"bad_name": {"workspace": "ws-1"}}, "not a HyperPod cluster name"),
        (["ml-cluster-1"], "an object"),
        ("{not json", "as JSON"),
    ],
)
def test_a_bad_telemetry_value_fails_the_synth_naming_the_key(telemetry, message):
    with pytest.raises(SettingsError, match=message) as raised:
        DeploymentSettings.from_context(with_telemetry(telemetry))

    assert "sdc:telemetry" in str(raised.value)


def test_telemetry_for_a_cluster_the_deployment_does_not_act_on_fails_the_synth():
    with pytest.raises(
        SettingsError, match="sdc:telemetry names ml-cluster-9, not in sdc:clusters"
    ):
        DeploymentSettings.from_context(
            with_telemetry({"ml-cluster-9": {"workspace": "ws-1234abcd"}})
        )


def test_a_bad_context_value_raises_the_one_settings_error_the_functions_raise_too():
    from sdc_remediation.lambdas.models.errors import SettingsError as FunctionsSettingsError

    with pytest.raises(FunctionsSettingsError, match="sdc:dryRun") as raised:
        DeploymentSettings.from_context({"sdc:dryRun": "maybe"})

    assert isinstance(raised.value, ValueError)


# -- sdc:hardwareAlerts -------------------------------------------------------------------------


def test_hardware_alert_thresholds_default_and_override_key_by_key():
    default = DeploymentSettings.from_context({}).hardware_alerts
    changed = DeploymentSettings.from_context(
        {"sdc:hardwareAlerts": '{"linkDowntimeSeconds": 60, "criticalXids": [79, 48]}'}
    ).hardware_alerts

    assert default.link_downtime_seconds == 120
    assert 79 in default.critical_xids and 31 not in default.critical_xids
    assert changed.link_downtime_seconds == 60
    assert changed.critical_xids == (48, 79)
    assert changed.throttle_minutes == default.throttle_minutes


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"throttleMinute": 5}, "unknown keys ['throttleMinute']"),
        ({"throttleMinutes": 0}, "sdc:hardwareAlerts.throttleMinutes=0"),
        ({"criticalXids": [7]}, "from the card's catalog"),
        ({"criticalXids": []}, "non-empty list"),
        ({"linkWindowMinutes": 5, "linkDowntimeSeconds": 300}, "shorter than the window"),
    ],
)
def test_a_bad_hardware_alert_threshold_is_refused_with_what_is_wrong(value, says):
    with pytest.raises(SettingsError, match="sdc:hardwareAlerts") as raised:
        DeploymentSettings.from_context({"sdc:hardwareAlerts": value})
    assert says in str(raised.value)
