"""Each check kind's card shows that check's own evidence and nothing of another's: a hang its
step, collective, missing ranks and stacks; a straggler its scores; a hardware alert its rule,
GPU and one start time. Long lines are wrapped, units agree with their numbers, no section is
left empty, and every piece of an alert's text is quoted and marked as the alert's."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sdc_remediation.infra.cli.render import render_incident
from sdc_remediation.infra.stack.alert_rules import Thresholds, rules
from sdc_remediation.lambdas.logic.core.audit import ChainVerdict
from sdc_remediation.lambdas.models.hardware_alert import HardwareRule
from sdc_remediation.lambdas.models.telemetry import Severity, TelemetryFinding, TelemetryRecord
from sdc_remediation.lambdas.wording import cards
from sdc_remediation.lambdas.wording.card_lines import HARDWARE_ALERTS_HEADING, WRAP_WIDTH
from tests.unit.test_hardware_intake import alert, deliver, sns_event
from tests.unit.test_watch_pipeline import hang_alarm, store, straggler_alarm
from tests.unit.world import World


def hang_card(world: World) -> cards.ApprovalCard:
    (opened,) = store(world, hang_alarm(13))["incidents"]
    incident_id = world.awaiting_approval(opened["incident_id"])
    return cards.approval_card(world.incident(incident_id), world.settings)


def evidence(card: cards.ApprovalCard) -> str:
    return "\n".join(card.evidence.lines)


def straggler_notice(world: World) -> cards.Card:
    (opened,) = store(world, straggler_alarm(13))["incidents"]
    return cards.held_notice(world.incident(opened["incident_id"]))


def alert_card(world: World, *alerts: dict[str, Any]) -> cards.ApprovalCard:
    (opened, *_) = deliver(world, sns_event(*(alerts or (alert(),))))
    incident_id = world.awaiting_approval(opened["incident_id"])
    return cards.approval_card(world.incident(incident_id), world.settings)


# -- the hang card ----------------------------------------------------------------------------


def test_a_hang_card_shows_no_field_of_the_sdc_checks(job_world):
    card = hang_card(job_world)

    shown = evidence(card)
    for field in ("culprits:", "mismatched pairs", "verdicts", "suspect window", "weight"):
        assert field not in shown


def test_a_hang_card_names_the_step_the_job_stopped_in_after_the_last_one_completed(job_world):
    # Given a hang reported at step 120: the watch's last completed step
    card = hang_card(job_world)

    assert "step 121 did not finish (the last step completed: 120)" in evidence(card)


def test_a_hang_card_names_the_collective_the_missing_ranks_and_each_stack(job_world):
    card = hang_card(job_world)

    shown = evidence(card)
    assert "collective #5" in shown
    assert "missing from it: rank 13" in shown
    assert 'stack of rank 13 (innermost last): "train.py:1 main" > "loader.py:3 next"' in shown
    assert 'stack of rank 0, a peer (innermost last): "train.py:1 main" > "c10d.py:9' in shown


def test_a_hang_cards_lines_are_wrapped(job_world):
    card = hang_card(job_world)

    assert max(len(line) for line in card.evidence.lines) <= WRAP_WIDTH


# -- the straggler notice ---------------------------------------------------------------------


def test_a_straggler_notice_says_notice_only_once(job_world):
    notice = straggler_notice(job_world)

    assert notice.text.lower().count("notice only") == 1


def test_a_straggler_notices_why_is_one_short_line_from_the_record(job_world):
    notice = straggler_notice(job_world)

    (why,) = [line for line in notice.text.splitlines() if line.startswith("Why: ")]
    assert why == "Why: no hardware signal of its node corroborates the straggler."


def test_a_straggler_notice_shows_the_flagged_ranks_score_in_its_window(job_world):
    notice = straggler_notice(job_world)

    assert "rank 13: relative score 0.33 in the last window (1 window in a row below 0.7)" in (
        notice.text
    )
    assert "culprits:" not in notice.text and "1 windows" not in notice.text


def test_no_line_of_a_straggler_notice_runs_past_the_wrap_width(job_world):
    notice = straggler_notice(job_world)

    assert max(len(line) for line in notice.text.splitlines()) <= WRAP_WIDTH


# -- the hardware alert card -------------------------------------------------------------------


@pytest.mark.parametrize(("minutes", "words"), [(1, "for 1 minute or more"), (2, "2 minutes")])
def test_an_alert_rules_summary_says_its_minutes_as_the_number_wants(minutes, words):
    (throttling,) = [
        r for r in rules(Thresholds(throttle_minutes=minutes)) if r.rule is HardwareRule.THROTTLING
    ]

    assert words in throttling.summary
    assert "1 minutes" not in throttling.summary


def test_an_alert_card_has_no_section_without_lines(world):
    card = alert_card(world)

    text = card.text
    assert cards.RAW_HEADING not in text
    assert "no SDC report stored" not in text and "metric: none recorded" not in text
    for section in card.sections:
        assert section.lines or section is cards.DRY_RUN


def test_an_alert_card_gives_the_alert_one_start_time_the_counters_agree_with(world):
    # Given the GPU's counters showing the throttling half an hour before the rule fired
    card = alert_card(world)
    incident = world.incident(card.inputs[cards.Decision.APPROVE]["incident_id"])
    incident.telemetry = dataclasses.replace(
        incident.telemetry or TelemetryRecord("signal", "", "2026-12-05T11:05:00+00:00"),
        findings=(
            TelemetryFinding(
                kind="clocks",
                severity=Severity.SIGNAL,
                text="clocks throttled by the hardware from 10:32:00 UTC",
                gpu_uuid="GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003",
                at="2026-12-05T10:32:00+00:00",
            ),
        ),
    )

    card = cards.approval_card(incident, world.settings)

    lines = card.hardware_alerts.lines if card.hardware_alerts else ()
    head = " ".join(line.strip() for line in lines if "summary" not in line)
    assert "started 2026-12-05 10:32:00 UTC (the first sign of it in the GPU's counters)" in head
    assert "11:02:00" not in card.text


# -- alert text is the alert's, quoted --------------------------------------------------------


def hostile_alert() -> dict[str, Any]:
    hostile = alert(xid="79\nRECOMMENDATION: replace", counter="c\rWHAT TO DO")
    hostile["labels"]["gpu"] = "3\nRECOMMENDATION: replace"
    hostile["annotations"]["summary"] = "ok\n\nRECOMMENDATION: replace\nWHAT TO DO {}"
    return hostile


def test_a_hostile_alert_summary_is_one_quoted_line_marked_as_the_alerts(world):
    card = alert_card(world, hostile_alert())

    section = "\n".join(card.hardware_alerts.lines if card.hardware_alerts else ())
    assert 'the alert\'s summary: "ok RECOMMENDATION: replace WHAT TO DO {}"' in " ".join(
        section.split()
    )
    starts = [line for line in card.text.splitlines() if line.startswith("RECOMMENDATION: ")]
    assert starts == [card.summary.lines[2]]
    assert "\nWHAT TO DO {" not in card.text


def test_an_alerts_gpu_xid_and_counter_labels_are_shown_quoted(world):
    card = alert_card(world, hostile_alert())

    head = " ".join(
        line.strip()
        for line in (card.hardware_alerts.lines if card.hardware_alerts else ())
        if "summary" not in line
    )
    assert 'GPU "3 RECOMMENDATION: replace"' in head
    assert 'XID "79 RECOMMENDATION: replace"' in head
    assert 'counter "c WHAT TO DO"' in head
    assert HARDWARE_ALERTS_HEADING in card.text


# -- sdc show prints the card -------------------------------------------------------------------


def test_sdc_show_prints_every_paragraph_of_the_card_isolation_included(world):
    world.store_fixture_report()
    incident_id = world.awaiting_approval(isolated=True)
    incident = world.incident(incident_id)
    card = cards.approval_card(incident, world.settings, max_bytes=None)

    shown = render_incident(incident, card, [], ChainVerdict(ok=True, checked=0))

    assert "\nISOLATION\n" in shown
    for section in card.sections:
        assert cards.render([section]) in shown


def test_the_drills_judge_finds_a_wrapped_alert_on_the_card(world):
    from sdc_remediation.infra.local.drill import judge

    card = alert_card(world)
    assert any(len(line) > 2 and line.startswith("      ") for line in card.text.splitlines())

    found = judge._judge_hardware_alert(
        card.text, {"gpu_uuid": "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003"}
    )

    assert found == []


def test_a_hostile_stack_frame_and_collective_name_stay_quoted_inside_their_line(job_world):
    alarm = hang_alarm(13)
    alarm["hang"]["waiting_collective"]["name"] = "ar\nRECOMMENDATION: replace"
    alarm["hang"]["ranks"][0]["stack"] = ["train.py:1 main", "x\n\nWHAT TO DO {}\u202e"]
    (opened,) = store(job_world, alarm)["incidents"]
    incident_id = job_world.awaiting_approval(opened["incident_id"])

    card = cards.approval_card(job_world.incident(incident_id), job_world.settings)

    shown = " ".join(evidence(card).split())
    assert 'collective #5 "ar RECOMMENDATION: replace"' in shown
    assert '"train.py:1 main" > "x WHAT TO DO {}"' in shown
    starts = [line for line in card.text.splitlines() if line.startswith("RECOMMENDATION: ")]
    assert starts == [card.summary.lines[2]] and "\nWHAT TO DO {" not in card.text
    assert "\u202e" not in card.text
