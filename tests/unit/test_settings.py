from __future__ import annotations

import pytest

from lambdas.models.errors import SettingsError
from lambdas.models.settings import DEFAULT_HEALTH_CHECKS, Settings
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
            "GUARD_MAX_OPEN": "5",
            "GUARD_MAX_OPEN_PERCENT": "20",
            "STORM_THRESHOLD": "8",
            "STORM_WINDOW_SECONDS": "600",
            "PAUSE_PARAMETER": "/SdcRemediation/paused",
            "APPROVAL_TIMEOUT_SECONDS": "7200",
        }
    )

    assert (settings.guard_max_open, settings.guard_max_open_percent) == (5, 20)
    assert (settings.storm_threshold, settings.storm_window_seconds) == (8, 600)
    assert settings.pause_parameter == "/SdcRemediation/paused"
    assert settings.approval_timeout_seconds == 7200


def test_without_guard_variables_the_documented_defaults_apply():
    settings = Settings.from_env(BASE)

    assert (settings.guard_max_open, settings.storm_threshold) == (3, 4)
    assert (settings.pause_parameter, settings.approval_timeout_seconds) == (None, None)


@pytest.mark.parametrize(
    ("name", "value"),
    [("GUARD_MAX_OPEN", "0"), ("GUARD_MAX_OPEN_PERCENT", "150"), ("STORM_THRESHOLD", "many")],
)
def test_a_bad_guard_variable_fails_fast_naming_it(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({**BASE, name: value})
