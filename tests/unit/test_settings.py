from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.settings import (
    DEFAULT_HEALTH_CHECKS,
    IsolationConfig,
    Settings,
    flag_env,
    list_env,
    node_isolation_env,
)
from trainer_emitter.contract import NAMESPACE

BASE = {
    "INCIDENTS_TABLE": "incidents",
    "AUDIT_TABLE": "audit",
    "TOPIC_ARN": "arn:aws:sns:us-west-2:111122223333:sdc",
}


def test_full_environment_is_read_into_typed_settings():
    settings = Settings.from_env(
        {
            **BASE,
            "STATE_MACHINE_ARN": "arn:sm",
            "APPROVAL_STATE_MACHINE_ARN": "arn:approval",
            "ALLOWED_CLUSTERS": "ml-cluster-1, ml-cluster-2,",
            "HEALTH_CHECKS": "InstanceStress",
            "NAMESPACE": "SDC/Other",
            "DRY_RUN": "TRUE",
        }
    )

    assert settings.allowed_clusters == {"ml-cluster-1", "ml-cluster-2"}
    assert settings.health_checks == ("InstanceStress",)
    assert settings.namespace == "SDC/Other"
    assert settings.dry_run is True
    assert settings.state_machine_arn == "arn:sm"


def test_defaults_apply_to_optional_variables():
    settings = Settings.from_env(BASE)

    assert settings.allowed_clusters == frozenset()
    assert settings.health_checks == DEFAULT_HEALTH_CHECKS
    assert settings.namespace == NAMESPACE
    assert settings.dry_run is False


def test_every_missing_required_variable_is_named_at_once():
    with pytest.raises(SettingsError) as err:
        Settings.from_env({"TOPIC_ARN": "arn"})

    assert "INCIDENTS_TABLE is not set" in str(err.value)
    assert "AUDIT_TABLE is not set" in str(err.value)


def test_dry_run_accepts_only_true_or_false():
    with pytest.raises(SettingsError, match="DRY_RUN"):
        Settings.from_env({**BASE, "DRY_RUN": "yes"})


def test_unknown_health_checks_are_refused():
    with pytest.raises(SettingsError, match="HEALTH_CHECKS"):
        Settings.from_env({**BASE, "HEALTH_CHECKS": "InstanceStress,GpuBurn"})


def test_state_machine_arn_is_required_only_when_asked_for():
    settings = Settings.from_env(BASE)

    with pytest.raises(SettingsError, match="STATE_MACHINE_ARN"):
        settings.require_state_machine_arn()


def test_guard_storm_and_pause_settings_are_read_from_the_environment():
    settings = Settings.from_env(
        {
            **BASE,
            "GUARD_MAX_OPEN_NODES": "5",
            "GUARD_MAX_OPEN_PERCENT": "20",
            "STORM_THRESHOLD": "8",
            "STORM_WINDOW_SECONDS": "600",
            "PAUSE_PARAMETER": "/SdcRemediation/paused",
            "APPROVAL_TIMEOUT_SECONDS": "7200",
            "REPORT_OPENINGS_PER_MINUTE": "30",
            "JOB_OPENINGS_PER_MINUTE": "7",
        }
    )

    assert (settings.report_openings_per_minute, settings.job_openings_per_minute) == (30, 7)

    assert (settings.guard_max_open_nodes, settings.guard_max_open_percent) == (5, 20)
    assert (settings.storm_threshold, settings.storm_window_seconds) == (8, 600)
    assert settings.pause_parameter == "/SdcRemediation/paused"
    assert settings.approval_timeout_seconds == 7200


def test_without_guard_variables_the_documented_defaults_apply():
    settings = Settings.from_env(BASE)

    assert (settings.guard_max_open_nodes, settings.storm_threshold) == (3, 4)
    assert (settings.report_openings_per_minute, settings.job_openings_per_minute) == (10, 5)
    assert (settings.pause_parameter, settings.approval_timeout_seconds) == (None, None)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GUARD_MAX_OPEN_NODES", "0"),
        ("GUARD_MAX_OPEN_PERCENT", "150"),
        ("STORM_THRESHOLD", "many"),
        ("REPORT_OPENINGS_PER_MINUTE", "0"),
        ("JOB_OPENINGS_PER_MINUTE", "10001"),
    ],
)
def test_a_bad_guard_variable_fails_fast_naming_it(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({**BASE, name: value})


# -- TELEMETRY: the clusters' Prometheus workspaces (request_approval) -----------------------

WORKSPACE_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1234abcd-0000-1111"


def telemetry_env(**changes: object) -> dict[str, str]:
    config = {
        "workspace_id": "ws-1234abcd-0000-1111",
        "query_url": WORKSPACE_URL + "/",
        "region": "us-east-1",
        "dashboard": "https://g-1.grafana-workspace.us-east-1.amazonaws.com/d/gpu",
        **changes,
    }
    return {**BASE, "TELEMETRY": json.dumps({"ml-cluster-1": config})}


def test_telemetry_names_each_clusters_workspace():
    settings = Settings.from_env(telemetry_env(node_label="kubernetes_node"))

    workspace = settings.telemetry_for("ml-cluster-1")
    assert workspace is not None
    assert workspace.workspace_id == "ws-1234abcd-0000-1111"
    assert workspace.query_url == WORKSPACE_URL  # no trailing slash
    assert (workspace.region, workspace.node_label) == ("us-east-1", "kubernetes_node")
    assert settings.telemetry_for("ml-cluster-2") is None


def test_without_telemetry_no_cluster_has_a_workspace():
    assert Settings.from_env(BASE).telemetry_for("ml-cluster-1") is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"query_url": "http://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1"}, "https"),
        ({"region": "US East"}, "bad region"),
        ({"workspace_id": ""}, "bad workspace_id"),
        ({"dashboard": "grafana.example.com"}, "dashboard that is not an https URL"),
        ({"node_label": "__name__"}, "not a Prometheus label name"),
        ({"node_label": "node-name"}, "not a Prometheus label name"),
        ({"extra": 1}, "unknown keys ['extra']"),
    ],
)
def test_a_bad_telemetry_entry_fails_fast_naming_the_problem(changes, message):
    with pytest.raises(SettingsError, match=re.escape(message)):
        Settings.from_env(telemetry_env(**changes))


@pytest.mark.parametrize("raw", ["{not json", '["ml-cluster-1"]', '{"ml-cluster-1": "ws-1"}'])
def test_telemetry_that_is_not_an_object_of_objects_fails_fast(raw):
    with pytest.raises(SettingsError, match="TELEMETRY must be a JSON object"):
        Settings.from_env({**BASE, "TELEMETRY": raw})


def isolation_env(**changes: object) -> dict[str, str]:
    config = {"isolate": True, "eks_cluster": "ml-eks-1", **changes}
    return {**BASE, "NODE_ISOLATION": json.dumps({"ml-cluster-1": config})}


def test_node_isolation_may_name_the_pod_label_that_names_a_job():
    settings = Settings.from_env(isolation_env(job_pods="training.kubeflow.org/job-name"))

    assert settings.isolation_for("ml-cluster-1").job_pods == "training.kubeflow.org/job-name"


@pytest.mark.parametrize("key", ["job name", "a/b/c", "", "-x", 7])
def test_a_job_pods_value_that_is_no_label_key_is_refused_naming_it(key):
    with pytest.raises(SettingsError, match="bad job_pods label key"):
        Settings.from_env(isolation_env(job_pods=key))


def test_node_isolation_may_name_a_slurm_controller_and_reads_back_as_the_stack_writes_it():
    config = IsolationConfig(isolate=True, slurm_controller="i-0c0000000000000c1")
    env = {**BASE, "NODE_ISOLATION": node_isolation_env({"ml-cluster-1": config})}

    assert Settings.from_env(env).isolation_for("ml-cluster-1") == config


def test_a_slurm_controller_that_is_no_instance_id_is_refused_naming_it():
    env = {
        **BASE,
        "NODE_ISOLATION": json.dumps(
            {"ml-cluster-1": {"isolate": True, "slurm_controller": "controller-1"}}
        ),
    }
    with pytest.raises(SettingsError, match="bad slurm_controller 'controller-1'"):
        Settings.from_env(env)


def test_a_cluster_with_an_eks_cluster_and_a_slurm_controller_is_refused():
    with pytest.raises(SettingsError, match="both an EKS cluster and a Slurm controller"):
        Settings.from_env(isolation_env(slurm_controller="i-0c0000000000000c1"))


def test_approval_rules_are_read_from_the_environment():
    settings = Settings.from_env(
        {
            "INCIDENTS_TABLE": "i",
            "AUDIT_TABLE": "a",
            "TOPIC_ARN": "t",
            "APPROVALS_REQUIRED": "2",
            "APPROVERS": "arn:aws:iam::111122223333:role/Approver*,arn:aws:iam::*:user/alice",
            "REQUIRE_IDENTITY_PROOF": "false",
            "AUDIT_ANCHOR_LOG_GROUP": "/s/audit-anchor",
        }
    )

    assert settings.approvals_required == 2
    assert settings.approvers == (
        "arn:aws:iam::111122223333:role/Approver*",
        "arn:aws:iam::*:user/alice",
    )
    assert settings.needs_identity_proof
    assert settings.audit_anchor_log_group == "/s/audit-anchor"


def test_roles_whose_sessions_name_the_human_are_read_from_the_environment():
    settings = Settings.from_env(
        {
            "INCIDENTS_TABLE": "i",
            "AUDIT_TABLE": "a",
            "TOPIC_ARN": "t",
            "HUMAN_SESSION_ROLES": "arn:aws:iam::111122223333:role/Oncall*",
        }
    )

    assert settings.human_session_roles == ("arn:aws:iam::111122223333:role/Oncall*",)


def test_a_human_session_role_of_any_account_is_refused_by_name():
    with pytest.raises(SettingsError, match="HUMAN_SESSION_ROLES must be IAM role ARN patterns"):
        Settings.from_env(
            {
                "INCIDENTS_TABLE": "i",
                "AUDIT_TABLE": "a",
                "TOPIC_ARN": "t",
                "HUMAN_SESSION_ROLES": "arn:aws:iam::*:role/Oncall",
            }
        )


def test_an_approver_that_is_no_arn_is_refused_by_name():
    with pytest.raises(SettingsError, match="APPROVERS must be IAM or STS ARN patterns"):
        Settings.from_env(
            {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "t", "APPROVERS": "alice"}
        )


def test_every_environment_variable_the_stack_may_set_is_read_by_the_functions():
    # Given the functions' code outside the list of names itself
    lambdas = Path(__file__).resolve().parents[2] / "lambdas"
    code = "\n".join(
        path.read_text()
        for path in lambdas.rglob("*.py")
        if path != lambdas / "models" / "environment.py"
    )

    # Then every name is read through its member somewhere (an unread variable is dead)
    unread = [name.name for name in EnvVar if f"EnvVar.{name.name}" not in code]
    assert unread == []


def test_flags_and_lists_written_as_the_stack_writes_them_read_back_as_given():
    # Given values the stack writes with the settings' own writers
    env = {
        **BASE,
        EnvVar.DRY_RUN: flag_env(True),
        EnvVar.REQUIRE_IDENTITY_PROOF: flag_env(False),
        EnvVar.ALLOWED_CLUSTERS: list_env(["ml-cluster-1", "ml-cluster-2"]),
        EnvVar.HEALTH_CHECKS: list_env(["InstanceStress", "MultiNodeTrainingValidation"]),
    }

    # When the function reads its environment
    settings = Settings.from_env(env)

    # Then it has what the stack was given
    assert settings.dry_run is True
    assert settings.require_identity_proof is False
    assert settings.allowed_clusters == {"ml-cluster-1", "ml-cluster-2"}
    assert settings.health_checks == ("InstanceStress", "MultiNodeTrainingValidation")


def test_the_approvers_time_zone_is_read_and_defaults_to_utc():
    assert Settings.from_env(BASE).approver_time_zone == "UTC"

    settings = Settings.from_env({**BASE, "APPROVER_TIME_ZONE": "America/New_York"})

    assert settings.approver_time_zone == "America/New_York"


@pytest.mark.parametrize("value", ["CET+1", "europe/berlin", "Europe/Berlin; rm -rf"])
def test_a_time_zone_that_is_no_iana_name_fails_fast_naming_it(value):
    with pytest.raises(SettingsError, match="APPROVER_TIME_ZONE must be an IANA time zone"):
        Settings.from_env({**BASE, "APPROVER_TIME_ZONE": value})
