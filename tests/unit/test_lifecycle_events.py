"""Every incident state change goes out as one `SDC Incident State Change` event, in order,
matching its versioned JSON Schema, never carrying the task token; a failed put never stops
the step."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from sdc_remediation.lambdas.logic import closing, intake, recovery
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.lifecycle_event import SCHEMA_FILE
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from tests.unit.world import TOKEN, World, alarm_event, settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / SCHEMA_FILE).read_text())


def replaced(world: World) -> str:
    incident_id = world.decided("approve")
    ref = IncidentRef(incident_id)
    recovery.replace_node(ref, world.deps)
    while not recovery.check_replacement(ref, world.deps)["done"]:
        pass
    closing.close_incident(CloseRequest(incident_id, Outcome.REPLACED, None), world.deps)
    return incident_id


def test_an_approved_incidents_whole_life_is_one_event_per_state_change_in_order():
    world = World()

    incident_id = replaced(world)

    changes = world.lifecycle.of(incident_id)
    assert [(c.old_state, c.new_state) for c in changes] == [
        (None, "opened"),
        ("opened", "health_check"),
        ("health_check", "awaiting_approval"),
        ("awaiting_approval", "replacing"),
        ("replacing", "replaced"),
    ]
    assert [c.sequence for c in changes] == sorted({c.sequence for c in changes})
    assert changes[-1].terminal and not any(c.terminal for c in changes[:-1])
    assert world.incident(incident_id).state is IncidentState.REPLACED


def test_every_event_matches_the_versioned_schema():
    world = World()

    incident_id = replaced(world)

    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for change in world.lifecycle.of(incident_id):
        validator.validate(change.to_detail())


def test_the_waiting_event_carries_the_deadline_the_card_gives_in_both_time_zones():
    world = World(settings=settings(approval_timeout_seconds=3600, approver_time_zone="Asia/Tokyo"))

    incident_id = replaced(world)

    (waiting,) = [c for c in world.lifecycle.of(incident_id) if c.new_state == "awaiting_approval"]
    deadline = world.incident(incident_id).approval_deadline
    assert deadline is not None and waiting.approval_deadline == deadline.to_event()
    assert waiting.approval_deadline["time_zone"] == "Asia/Tokyo"
    assert waiting.approval_deadline["expires_at_local"].endswith("+09:00")
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    validator.validate(waiting.to_detail())


def test_no_event_carries_the_task_token():
    world = World()

    incident_id = replaced(world)

    text = json.dumps([c.to_detail() for c in world.lifecycle.of(incident_id)])
    assert TOKEN not in text and "token" not in text


def test_the_events_carry_the_decision_the_advice_and_how_to_look():
    world = World()

    incident_id = replaced(world)

    last = world.lifecycle.of(incident_id)[-1]
    assert last.decision == "approve"
    assert last.recommendation is not None and last.recommendation["advice"]
    assert last.links["show"] == f"sdc show {incident_id}"


def test_a_held_incident_is_one_creation_event_in_the_held_state():
    world = World()
    world.switch.value = "true"

    result = intake.open_incident(parse_contributor_event(alarm_event()), world.deps)

    assert [(c.old_state, c.new_state) for c in world.lifecycle.of(result["incident_id"])] == [
        (None, "held")
    ]


def test_a_failed_put_is_audited_and_the_step_goes_on():
    world = World()
    world.lifecycle.fail_next = DependencyFailed("PutEvents failed", code="InternalFailure")

    incident_id = world.opened()

    actions = [e.action for e in world.audit.entries(incident_id)]
    assert "lifecycle_event_failed" in actions
    failed = next(
        e for e in world.audit.entries(incident_id) if e.action == "lifecycle_event_failed"
    )
    assert (failed.details["old_state"], failed.details["new_state"]) == (None, "opened")
    assert world.incident(incident_id).state is IncidentState.OPENED


def test_the_schemas_states_are_the_incident_states():
    assert set(SCHEMA["$defs"]["state"]["enum"]) == {s.value for s in IncidentState}


def test_an_event_names_the_checkpoint_to_resume_from_the_rollback_and_the_exposure():
    world = World()
    event = load_fixture("events", "sdc_report")  # compute at step 30, window [21, 30]
    event["detail"]["checkpoints"] = [
        {"step": 20, "last_audit_pass": 20, "last_weight_check_pass": 20, "location": "s3://c/20"}
    ]
    intake.store_report(parse_report_event(event), world.deps)
    world.awaiting_approval()

    detail = world.lifecycle.changes[-1].to_detail()

    assert detail["resume"] == {
        "checkpoint": {"step": 20, "location": "s3://c/20"},
        "detected_step": 30,
        "rollback_steps": 10,
        "tokens_per_step": None,
        "rollback_tokens": None,
        "exposure": {"first": 21, "last": 30, "steps": 10},
    }
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(
        detail
    )


def test_an_event_gives_the_rollback_in_tokens_when_the_report_carries_tokens_per_step():
    world = World()
    event = load_fixture("events", "sdc_report")  # compute at step 30, window [21, 30]
    event["detail"]["checkpoints"] = [
        {"step": 20, "last_audit_pass": 20, "last_weight_check_pass": 20, "location": "s3://c/20"}
    ]
    event["detail"]["tokens_per_step"] = 4096
    intake.store_report(parse_report_event(event), world.deps)
    world.awaiting_approval()

    detail = world.lifecycle.changes[-1].to_detail()

    assert (detail["resume"]["rollback_steps"], detail["resume"]["tokens_per_step"]) == (10, 4096)
    assert detail["resume"]["rollback_tokens"] == 40960
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(
        detail
    )


def test_an_event_without_a_report_carries_no_resume():
    world = World()

    incident_id = replaced(world)

    assert all(c.to_detail()["resume"] is None for c in world.lifecycle.of(incident_id))
