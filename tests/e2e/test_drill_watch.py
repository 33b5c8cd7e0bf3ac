"""`make drill ARGS="--scenario hang-one-rank"` (and `hang-ambiguous`, `straggler`,
`straggler-corroborated`, `hang-fsdp`, `hang-two-groups`): a real 4-rank gloo job (DDP or FSDP2,
no collective of its own) whose training watch drives the pipeline; each judged on its
timeline."""

from __future__ import annotations

import pytest

from sdc_remediation.infra.local.drill.runner import Line, Outcome, run_scenario
from sdc_remediation.infra.local.drill.scenarios import (
    HANG_RANK,
    HANG_SPAN,
    NODES,
    SCENARIOS,
    STRAGGLER_RANK,
)
from sdc_remediation.infra.local.watch_job import WATCH_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.synth, pytest.mark.torch]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return {}


def outcome_of(outcomes: dict[str, Outcome], name: str) -> Outcome:
    if name not in outcomes:
        outcomes[name] = run_scenario(SCENARIOS[name])
    return outcomes[name]


def lines(outcome: Outcome, who: str) -> list[Line]:
    return [line for line in outcome.timeline if line.who == who]


def test_one_stopped_rank_is_named_reported_in_time_and_its_node_rebooted(outcomes):
    outcome = outcome_of(outcomes, "hang-one-rank")
    *_, reported = lines(outcome, "training")
    (incident,) = outcome.incidents

    assert outcome.passed, outcome.problems
    assert reported.ids["missing"] == str(HANG_RANK)
    assert reported.ids["localised"] == NODES[HANG_RANK]
    assert float(reported.ids["reported_after"]) <= WATCH_TIMEOUT + 30
    assert incident["instance_id"] == NODES[HANG_RANK] and incident["state"] == "rebooted"
    assert outcome.replace_calls == []  # and one reboot: the judge counts the calls


def test_the_report_comes_before_the_incident_it_opens_on_the_timeline(outcomes):
    outcome = outcome_of(outcomes, "hang-one-rank")
    (published,) = lines(outcome, "rank 0")
    (opened, *_) = lines(outcome, "store_report")

    assert published.what.endswith(f"published (sdc_hang on {NODES[HANG_RANK]})")
    assert published.at <= opened.at


def test_a_hang_on_two_nodes_opens_one_job_level_incident_that_proposes_nothing(outcomes):
    outcome = outcome_of(outcomes, "hang-ambiguous")
    *_, reported = lines(outcome, "training")
    (incident,) = outcome.incidents

    assert outcome.passed, outcome.problems
    assert reported.ids["missing"] == ",".join(map(str, HANG_SPAN))
    assert reported.ids["localised"] == "None"
    assert incident["state"] == "checked"
    assert outcome.replace_calls == []  # and no reboot: the judge counts the calls
    actions = actions_of(outcome, incident["incident_id"])
    assert "isolation_skipped" in actions and "node_isolated" not in actions
    assert "health_check_started" in actions


def test_a_straggler_without_hardware_signals_is_a_notice_and_nothing_is_done(outcomes):
    outcome = outcome_of(outcomes, "straggler")
    *_, flagged = lines(outcome, "training")
    (incident,) = outcome.incidents

    assert outcome.passed, outcome.problems
    assert flagged.ids["flagged"] == str(STRAGGLER_RANK)
    assert incident["instance_id"] == NODES[STRAGGLER_RANK] and incident["state"] == "held"
    actions = actions_of(outcome, incident["incident_id"])
    assert actions[:2] == ["incident_held", "held_notified"]
    assert not {"node_isolated", "health_check_started", "approval_requested"} & set(actions)
    assert "NOTICE ONLY" in (outcome.notification or "")
    assert outcome.replace_calls == []  # and no reboot: the judge counts the calls


def test_a_straggler_its_gpu_throttling_corroborates_is_isolated_and_rebooted(outcomes):
    outcome = outcome_of(outcomes, "straggler-corroborated")
    (incident,) = outcome.incidents

    assert outcome.passed, outcome.problems
    assert incident["instance_id"] == NODES[STRAGGLER_RANK] and incident["state"] == "rebooted"
    actions = actions_of(outcome, incident["incident_id"])
    steps = ["node_isolated", "health_check_started", "approval_requested", "reboot_requested"]
    assert [a for a in dict.fromkeys(actions) if a in steps] == steps
    assert "RECOMMENDATION: REBOOT" in (outcome.notification or "")
    assert outcome.replace_calls == []


@pytest.mark.parametrize("name", ["hang-fsdp", "hang-two-groups"])
def test_a_stopped_rank_under_fsdp2_or_two_process_groups_is_named_and_its_node_rebooted(
    outcomes, name
):
    outcome = outcome_of(outcomes, name)
    *_, reported = lines(outcome, "training")
    (incident,) = outcome.incidents

    assert outcome.passed, outcome.problems
    assert reported.ids["missing"] == str(HANG_RANK)
    assert reported.ids["localised"] == NODES[HANG_RANK]
    assert incident["instance_id"] == NODES[HANG_RANK] and incident["state"] == "rebooted"


def actions_of(outcome: Outcome, incident_id: str) -> list[str]:
    return [entry["action"] for entry in outcome.audit[incident_id]]
