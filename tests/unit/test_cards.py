from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sdc_remediation.lambdas.logic import closing, intake, recovery
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.payloads import CloseRequest, Decision, IncidentRef, Outcome
from sdc_remediation.lambdas.models.recommendation import Advice, Recommendation
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.wording import card_lines, cards
from tests.conftest import load_fixture
from tests.unit.world import APPROVAL_ARN, INSTANCE, TOKEN, World, settings


def approval_card(world: World) -> str:
    world.store_fixture_report()
    world.awaiting_approval()
    return world.notifier.published[-1].message


def test_the_card_names_metric_step_ranks_verdicts_and_suspect_window(world):
    card = approval_card(world)

    assert "sdc_replay_mismatch" in card
    assert "step 30" in card
    assert "ranks on this instance: [13]" in card
    assert "mismatched pairs: [[13, 5], [21, 13]]" in card
    assert "verdicts: none" in card
    assert "suspect window: steps 21-30" in card
    assert "GPU-0000000d-5a1e-4c1d-9e7b-000000019223" in card


def test_the_card_shows_the_verdicts_of_the_report_and_their_advice(world):
    event = load_fixture("events", "sdc_report")
    event["detail"].update(
        culprits=[],
        mismatched_pairs=[[13, 5]],
        verdicts=[{"pair": [13, 5], "third": 21, "suspect": 13, "kind": "transient"}],
    )
    intake.store_report(parse_report_event(event), world.deps)

    world.awaiting_approval()

    card = world.notifier.published[-1].message
    assert "verdict: pair [13, 5], third rank 21 -> suspect 13: transient" in card
    assert "RECOMMENDATION: REBOOT, THEN HEALTH-CHECK AGAIN" in card


def test_the_card_shows_the_health_check_status_and_the_advice(world):
    card = approval_card(world)

    assert "InstanceStress, InstanceConnectivity: PASSED" in card
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card
    assert "rank 13 mismatched in both of its ring comparisons" in card


def test_the_card_says_what_to_do_with_a_console_link_and_the_three_inputs(world):
    card = approval_card(world)

    assert APPROVAL_ARN in card
    assert "https://us-west-2.console.aws.amazon.com/states/home?region=us-west-2" in card
    pasted = [json.loads(m) for m in re.findall(r"^\s+(\{.*\})$", card, flags=re.MULTILINE)]
    assert [p["decision"] for p in pasted] == ["reboot", "approve", "reject"]
    assert "expired" in card


def test_the_card_never_shows_the_task_token(world):
    assert TOKEN not in approval_card(world)


def test_the_card_of_a_dry_run_deployment_says_nothing_is_replaced(world):
    world.settings = settings(dry_run=True)

    assert "DRY RUN" in approval_card(world)


def test_the_card_without_a_report_says_the_metric_alone_names_no_rank(world):
    world.awaiting_approval()

    card = world.notifier.published[-1].message
    assert "no SDC report stored for this instance" in card
    assert "HEALTH CHECK ONLY" in card


def test_subjects_fit_the_sns_limit():
    card = cards.Card(cards._subject("x" * 300), ())

    assert len(card.subject) == cards.SUBJECT_LIMIT


def test_approval_input_is_the_approval_state_machine_input():
    assert cards.approval_input("sdc-1", Decision.REJECT) == {
        "incident_id": "sdc-1",
        "decision": "reject",
        "comment": cards.COMMENT_PLACEHOLDER,
    }


def test_console_link_needs_a_state_machine_arn():
    assert cards.console_link(None) is None
    assert cards.console_link("not-an-arn") is None


def test_the_close_notice_of_a_dry_run_says_it_would_have_replaced(world):
    world.settings = settings(dry_run=True)
    incident_id = world.decided("approve")
    recovery.replace_node(IncidentRef(incident_id), world.deps)
    recovery.check_replacement(IncidentRef(incident_id), world.deps)

    closing.close_incident(CloseRequest(incident_id, Outcome.REPLACED, None), world.deps)

    notice = world.notifier.published[-1]
    assert "replaced (dry run)" in notice.subject
    assert f"would have replaced {INSTANCE}" in notice.message


def test_with_automatic_node_recovery_the_card_says_hyperpod_may_replace_the_node(world):
    world.hyperpod.clusters["ml-cluster-1"].node_recovery = "Automatic"

    card = approval_card(world)

    assert "NodeRecovery is Automatic" in card
    assert "replaced_by_hyperpod" in card


def test_without_automatic_node_recovery_the_card_does_not_claim_it(world):
    card = approval_card(world)

    assert "NodeRecovery is Automatic" not in card


# -- the checkpoint to resume from -------------------------------------------------------------


def card_for_report(world: World, **detail_changes) -> str:
    event = load_fixture("events", "sdc_report")  # compute, window [21, 30], passes at 20
    event["detail"].update(detail_changes)
    intake.store_report(parse_report_event(event), world.deps)
    world.awaiting_approval()
    return world.notifier.published[-1].message


def ckpt(step: int, audit: int | None = None, weights: int | None = None) -> dict:
    return {
        "step": step,
        "last_audit_pass": step if audit is None else audit,
        "last_weight_check_pass": step if weights is None else weights,
        "location": f"s3://ckpt/llama/step-{step}",
    }


def test_the_card_names_the_newest_verified_checkpoint_before_the_window(world):
    card = card_for_report(world, checkpoints=[ckpt(10), ckpt(20), ckpt(30)])

    assert (
        '  Resume from: checkpoint at step 20 ("s3://ckpt/llama/step-20"), saved before the '
        "suspect window [21, 30]; tags: last_audit_pass 20, last_weight_check_pass 20"
    ) in card.splitlines()


def test_the_card_names_the_rollback_and_the_exposure_window_below_the_resume_point(world):
    card = card_for_report(world, checkpoints=[ckpt(10), ckpt(20), ckpt(30)]).splitlines()

    line = (
        "  Rollback: 10 steps (from the alarm at step 30 back to the checkpoint at step 20); "
        "exposure window: steps 21-30 (10 steps trained between the suspect window's start and "
        "detection)"
    )
    assert line in card
    assert card[card.index(line) - 1].startswith("  Resume from: checkpoint at step 20")


def test_with_the_jobs_tokens_per_step_the_rollback_is_in_steps_and_tokens(world):
    card = card_for_report(world, checkpoints=[ckpt(20)], tokens_per_step=4_194_304)

    assert (
        "  Rollback: 10 steps, 41,943,040 tokens (from the alarm at step 30 back to the "
        "checkpoint at step 20; 4,194,304 tokens per step); exposure window: steps 21-30 (10 "
        "steps trained between the suspect window's start and detection)"
    ) in card.splitlines()


def test_a_report_without_tokens_per_step_gives_the_rollback_in_steps_alone(world):
    card = card_for_report(world, checkpoints=[ckpt(20)])

    line = next(line for line in card.splitlines() if line.startswith("  Rollback:"))
    assert line.startswith("  Rollback: 10 steps (from the alarm at step 30")
    assert "tokens" not in line


def test_without_a_checkpoint_the_rollback_is_unknown_and_the_exposure_still_shown(world):
    card = card_for_report(world)

    assert (
        "  Rollback: unknown (no checkpoint to resume from is known); exposure window: steps "
        "21-30 (10 steps trained between the suspect window's start and detection)"
    ) in card.splitlines()


def test_the_resume_line_sits_with_the_recommendation(world):
    card = card_for_report(world, checkpoints=[ckpt(20)])

    paragraph = next(p for p in card.split("\n\n") if p.startswith(cards.WHY_HEADING))
    assert "Resume from: checkpoint at step 20" in paragraph


def test_without_checkpoints_the_card_says_none_before_the_window_is_known(world):
    card = card_for_report(world)

    assert (
        "Resume from: no checkpoint saved before step 21 is known: resume from an earlier "
        "verified checkpoint outside this job's report, or from the start"
    ) in card


def test_the_card_skips_a_checkpoint_its_tags_do_not_verify_and_says_so(world):
    unchecked = ckpt(15, weights=10)  # saved without a weight check; the last passed at 10

    card = card_for_report(world, checkpoints=[unchecked], last_weight_check_pass=10)

    assert "Resume from: no verified checkpoint saved before step 21 is known" in card
    assert "steps 15" in card
    assert "checkpoint at step 15" not in card


def test_a_malformed_checkpoint_shows_as_a_report_error_and_the_rest_still_counts(world):
    card = card_for_report(world, checkpoints=[ckpt(10), {"step": "twenty"}])

    assert "Resume from: checkpoint at step 10" in card
    assert "detail.checkpoints[1].step" in card


def test_of_two_reports_the_earlier_window_decides_the_resume_point(world):
    card_for_report(world, checkpoints=[ckpt(10), ckpt(20)])
    later = load_fixture("events", "sdc_report")
    later["id"] = "second-delivery"
    later["detail"].update(
        report_id="r-5f3c9a1e2b7d4c61",
        emitted_at="2026-11-30T08:20:00.000Z",
        step=60,
        suspect_window=[51, 60],
        last_audit_pass=50,
        last_weight_check_pass=50,
        checkpoints=[ckpt(20), ckpt(50)],
    )
    incident_id = next(iter(world.store.incidents))
    intake.store_report(parse_report_event(later), world.deps)
    incident = world.incident(incident_id)
    assert len(incident.reports) == 2

    incident.recommendation = Recommendation(Advice.REPLACE, ())
    text = cards.approval_card(incident, world.settings).text

    assert "Resume from: checkpoint at step 20" in text
    assert "suspect window [21, 30]" in text


def test_the_card_without_a_report_has_no_resume_line(world):
    world.awaiting_approval()

    assert "Resume from" not in world.notifier.published[-1].message


def test_console_link_opens_the_page_of_a_state_machine_or_of_an_execution():
    machine = "arn:aws:states:us-west-2:123456789012:stateMachine:SdcRemediation-approval"
    execution = "arn:aws:states:us-west-2:123456789012:execution:SdcRemediation-remediation:sdc-1"
    console = "https://us-west-2.console.aws.amazon.com/states/home?region=us-west-2#/"

    assert cards.console_link(machine) == f"{console}statemachines/view/{machine}"
    assert cards.console_link(execution) == f"{console}v2/executions/details/{execution}"
    assert cards.console_link("arn:aws:states:us-west-2:123456789012:activity:x") is None


def test_the_first_five_lines_say_what_where_the_advice_the_deadline_and_how(world):
    world.settings = settings(approval_timeout_seconds=7200, approver_time_zone="Europe/Berlin")
    card = approval_card(world)
    (incident,) = world.store.incidents.values()

    what, where, advice, deadline, how = card.splitlines()[: cards.SUMMARY_LINES]

    assert what.startswith(f"WHAT: silent data corruption suspected on {INSTANCE}")
    assert where.startswith("WHERE: cluster ml-cluster-1")
    assert advice == "RECOMMENDATION: REPLACE AFTER REVIEW"
    requested = datetime.fromisoformat(str(incident.approval_requested_at))
    expires = (requested + timedelta(seconds=7200)).astimezone(UTC)
    local = expires.astimezone(ZoneInfo("Europe/Berlin"))
    assert deadline.startswith(
        f"DECIDE BY: {local:%Y-%m-%d %H:%M:%S} CET (Europe/Berlin), "
        f"{expires:%Y-%m-%d %H:%M:%S} UTC;"
    )
    assert how.startswith(f"HOW: sdc reboot|approve|reject {incident.incident_id} -m '<why>'")


def test_the_deadline_is_stored_on_the_incident_as_the_instant_decide_refuses_after(world):
    world.settings = settings(approval_timeout_seconds=600)
    approval_card(world)
    (incident,) = world.store.incidents.values()

    deadline = incident.approval_deadline

    assert deadline is not None and deadline.time_zone == "UTC"
    requested = datetime.fromisoformat(str(incident.approval_requested_at))
    assert deadline.instant == (requested + timedelta(seconds=600)).replace(microsecond=0)


def test_a_time_zone_this_runtime_does_not_know_shows_the_deadline_in_utc_and_says_so():
    deadline = ApprovalDeadline("2026-12-06T08:15:04+00:00", "Mars/Olympus_Mons")

    assert card_lines.deadline_words(deadline) == (
        "2026-12-06 08:15:04 UTC (time zone Mars/Olympus_Mons unknown here)"
    )


def test_raw_alarm_text_gpu_uuids_and_the_json_inputs_come_after_the_evidence(world):
    card = approval_card(world)
    lines = card.splitlines()

    evidence = lines.index("EVIDENCE")
    uuid = next(i for i, line in enumerate(lines) if "GPU-0000000d" in line)
    raw_alarm = next(i for i, line in enumerate(lines) if "Threshold Crossed" in line)
    first_json = next(i for i, line in enumerate(lines) if line.strip().startswith("{"))
    assert evidence < lines.index("WHAT TO DO") < first_json
    assert lines.index(cards.RAW_HEADING) < min(uuid, raw_alarm)
