"""Repeat offenders escalate: a node (instance id) or a GPU (UUID) in k incidents within the
window is recommended for replacement, and the card says why (`sdc:repeatOffenderIncidents`,
`sdc:repeatOffenderWindowDays`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from sdc_remediation.infra.stack.settings import DeploymentSettings as StackSettings
from sdc_remediation.infra.stack.settings import SettingsError as StackSettingsError
from sdc_remediation.lambdas.logic.evidence.history import repeat_offence
from sdc_remediation.lambdas.logic.evidence.recommendation import rejudge
from sdc_remediation.lambdas.models.errors import SettingsError
from sdc_remediation.lambdas.models.guard import HoldKind, PastIncident
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.settings import Settings
from tests.unit.world import CLUSTER, INSTANCE, World, settings

OPENED = datetime.fromisoformat("2026-11-30T08:15:05+00:00")
GPU = "GPU-0000000d-5a1e-4c1d-9e7b-000000019223"


def past(
    n: int,
    *,
    days_ago: float = 1,
    instance: str = INSTANCE,
    gpus: tuple[str, ...] = (),
    state: IncidentState = IncidentState.REBOOTED,
    hold_kind: HoldKind | None = None,
    advice: str | None = None,
) -> PastIncident:
    created = OPENED - timedelta(days=days_ago)
    return PastIncident(
        incident_id=f"sdc-past-{n}",
        cluster_name=CLUSTER,
        instance_id=instance,
        state=state,
        created_at=created.isoformat(),
        closed_at=(created + timedelta(hours=1)).isoformat(),
        gpu_uuids=gpus,
        hold_kind=hold_kind,
        advice=advice,
    )


def incident(*, gpus: tuple[str, ...] = (), instance: str = INSTANCE) -> Incident:
    found = Incident(
        incident_id="sdc-now",
        cluster_name=CLUSTER,
        instance_id=instance,
        state=IncidentState.HEALTH_CHECK,
        created_at=OPENED.isoformat(),
        updated_at=OPENED.isoformat(),
    )
    found.evidence = [
        {
            "kind": "report",
            "key": "report:1",
            "check": "compute",
            "suspects": [{"gpu_uuid": g} for g in gpus],
        }
    ]
    return found


DEFAULTS = Settings(incidents_table="i", audit_table="a", topic_arn="t")


def test_a_node_in_k_incidents_within_the_window_is_a_repeat_offender():
    why = repeat_offence(incident(), [past(1), past(2, days_ago=20)], DEFAULTS)

    assert why is not None
    assert f"instance {INSTANCE} in 3 incidents (sdc-past-1, sdc-past-2, this one)" in why
    assert "within 30 days" in why and "sdc:repeatOffenderIncidents" in why


def test_a_node_with_one_incident_fewer_is_no_repeat_offender():
    assert repeat_offence(incident(), [past(1)], DEFAULTS) is None


def test_a_gpu_counts_across_the_instances_it_was_in():
    elsewhere = [
        past(1, instance="i-0other", gpus=(GPU,)),
        past(2, instance="i-0third", gpus=(GPU,)),
    ]

    why = repeat_offence(incident(gpus=(GPU,)), elsewhere, DEFAULTS)

    assert why is not None and f"GPU {GPU} in 3 incidents" in why


def test_incidents_older_than_the_window_do_not_count():
    assert repeat_offence(incident(), [past(1), past(2, days_ago=31)], DEFAULTS) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"state": IncidentState.REJECTED},
        {"state": IncidentState.HELD, "hold_kind": HoldKind.GUARD},
        {"state": IncidentState.SKIPPED},
        {"state": IncidentState.HELD, "hold_kind": HoldKind.STORM},
        {"state": IncidentState.HELD, "hold_kind": HoldKind.NOTICE},
    ],
    ids=["rejected", "guard-held", "skipped", "storm", "notice"],
)
def test_incidents_rejected_unchecked_or_saying_nothing_of_the_hardware_do_not_count(changes):
    assert repeat_offence(incident(), [past(1), past(2, **changes)], DEFAULTS) is None


def test_alarm_only_incidents_left_to_expire_do_not_make_a_repeat_offender():
    # Given two past incidents nobody decided, whose judgement proposed only a health check (what
    # forged metric datapoints alone open)
    expired = [
        past(n, state=IncidentState.EXPIRED, advice=Advice.HEALTH_CHECK_ONLY.value) for n in (1, 2)
    ]

    # Then a third incident on the node is no repeat offence
    assert repeat_offence(incident(), expired, DEFAULTS) is None


def test_an_expired_incident_whose_judgement_proposed_a_recovery_still_counts():
    expired = [past(n, state=IncidentState.EXPIRED, advice=Advice.REPLACE.value) for n in (1, 2)]

    assert repeat_offence(incident(), expired, DEFAULTS) is not None


def test_k_and_the_window_are_settings():
    strict = dataclasses.replace(
        DEFAULTS, repeat_offender_incidents=2, repeat_offender_window_days=7
    )

    assert repeat_offence(incident(), [past(1, days_ago=6)], strict) is not None
    assert repeat_offence(incident(), [past(1, days_ago=8)], strict) is None


def test_a_job_level_incident_is_never_a_repeat_offender():
    job = dataclasses.replace(incident(), instance_id="")

    assert repeat_offence(job, [past(1), past(2)], DEFAULTS) is None


def test_the_functions_read_the_repeat_offender_settings_from_their_environment():
    env = {
        "INCIDENTS_TABLE": "i",
        "AUDIT_TABLE": "a",
        "TOPIC_ARN": "t",
        "REPEAT_OFFENDER_INCIDENTS": "4",
        "REPEAT_OFFENDER_WINDOW_DAYS": "14",
    }

    read = Settings.from_env(env)

    assert (read.repeat_offender_incidents, read.repeat_offender_window_days) == (4, 14)
    with pytest.raises(
        SettingsError, match=r"REPEAT_OFFENDER_INCIDENTS must be an integer in 2\.\.100"
    ):
        Settings.from_env({**env, "REPEAT_OFFENDER_INCIDENTS": "1"})


def test_the_stack_takes_the_repeat_offender_settings_from_context():
    context = {"sdc:repeatOffenderIncidents": 5, "sdc:repeatOffenderWindowDays": 60}

    read = StackSettings.from_context(context)

    assert (read.repeat_offender_incidents, read.repeat_offender_window_days) == (5, 60)
    with pytest.raises(StackSettingsError, match="sdc:repeatOffenderWindowDays"):
        StackSettings.from_context({"sdc:repeatOffenderWindowDays": 0})


# -- through the approval request: the card -------------------------------------------------------


def with_history(world: World, *incidents: PastIncident) -> None:
    for found in incidents:
        world.store.record_past(found)


def test_a_node_with_k_incidents_in_the_window_is_recommended_for_replacement(world):
    # Given a node with two incidents in the last 30 days, and a third whose evidence alone
    # (an alarm, a passing health check) proposes nothing beyond a health check
    with_history(world, past(1, days_ago=3), past(2, days_ago=10))

    # When the third asks for approval
    incident_id = world.awaiting_approval()

    # Then replacement is recommended, and the card says why
    judged = world.incident(incident_id).recommendation
    card = world.notifier.published[-1].message
    assert judged is not None and judged.advice is Advice.REPLACE
    assert judged.repeat_offender and "in 3 incidents" in judged.repeat_offender
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card
    assert f"repeat offender: instance {INSTANCE} in 3 incidents" in card


def test_the_same_node_with_fewer_incidents_gets_the_evidence_s_own_advice(world):
    with_history(world, past(1, days_ago=3))

    incident_id = world.awaiting_approval()

    judged = world.incident(incident_id).recommendation
    assert judged is not None and judged.advice is Advice.HEALTH_CHECK_ONLY
    assert judged.repeat_offender is None


def test_a_judgement_again_after_evidence_attached_keeps_the_repeat_offence():
    world = World(settings=settings(repeat_offender_incidents=2))
    with_history(world, past(1, days_ago=3))
    incident_id = world.awaiting_approval()

    again = rejudge(world.incident(incident_id), world.clock.now().isoformat())

    assert again is not None and again.advice is Advice.REPLACE
    assert again.repeat_offender == world.incident(incident_id).recommendation.repeat_offender
