"""Every drill scenario runs end to end and is judged on what happened, not on its exit code."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime

import pytest

from sdc_remediation.infra.local.drill import __main__ as drill_cli
from sdc_remediation.infra.local.drill import calls, judge
from sdc_remediation.infra.local.drill.render import Style, render
from sdc_remediation.infra.local.drill.runner import Outcome, run_scenario
from sdc_remediation.infra.local.drill.scenarios import (
    DASHBOARD,
    MUTE_RULE,
    NODES,
    RANK_MAP,
    SCENARIOS,
)
from sdc_remediation.lambdas.models.audit import AuditAction
from tests.conftest import REPO

ATTACHED = AuditAction.EVIDENCE_ATTACHED

pytestmark = [pytest.mark.slow, pytest.mark.synth]


@pytest.fixture(scope="module")
def outcomes():
    """Each scenario once per module; the tests below look at different sides of it."""
    cache: dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        if name not in cache:
            cache[name] = run_scenario(SCENARIOS[name])
        return cache[name]

    return get


UP_TO_REPLACEMENT = [
    "incident_opened",
    "execution_started",
    "node_isolated",
    "health_check_started",
    "health_check_status",
    "recommended",
    "approval_requested",
    "decision_accepted",
    "decision_delivered",
    "replacement_requested",
]
"""An approved incident's audit actions, in order, up to the replacement request."""


def actions(outcome: Outcome) -> list[str]:
    (entries,) = outcome.audit.values()
    return [entry["action"] for entry in entries]


# A scenario that runs a training job has its own module (marked torch): test_drill_ddp.py.
@pytest.mark.parametrize("name", sorted(n for n in SCENARIOS if SCENARIOS[n].job is None))
def test_every_scenario_reaches_its_expected_outcome_with_a_verified_audit_chain(outcomes, name):
    outcome = outcomes(name)

    assert outcome.passed, outcome.problems
    assert len(outcome.incidents) == SCENARIOS[name].incidents
    assert {i["state"] for i in outcome.incidents} == {SCENARIOS[name].expect}
    assert outcome.chain_ok


@pytest.mark.parametrize(
    ("name", "shown", "not_shown"),
    [
        (
            "replay-culprit",
            {
                "sdc_replay_mismatch",
                "IncidentsOpened",
                "ApprovalsWaiting",
                "DecisionLatencySeconds",
                "ClosedReplaced",
                "RecoveryLatencySeconds",
            },
            set(),
        ),
        ("reject", {"ClosedRejected", "DecisionLatencySeconds"}, {"RecoveryLatencySeconds"}),
        ("dry-run", {"ClosedReplaced"}, {"RecoveryLatencySeconds"}),
        ("weight-no-majority", {"JobIncidentsOpened", "ClosedChecked"}, {"ApprovalsWaiting"}),
        ("storm-hold", {"IncidentsHeld"}, {"IncidentsOpened"}),
    ],
)
def test_the_dashboard_shows_what_each_scenario_published(outcomes, name, shown, not_shown):
    outcome = outcomes(name)

    on_dashboard = {metric.rsplit("/", 1)[-1] for metric in outcome.dashboard}
    assert shown <= on_dashboard
    assert not (not_shown & on_dashboard)
    assert outcome.passed, outcome.problems  # each of them checked against what was published


@pytest.mark.parametrize(
    "name", ["replay-culprit", "nonfinite-transient", "weight-suspect", "duplicate-events"]
)
def test_approved_scenarios_replace_the_suspect_node_once_and_get_a_new_instance_id(outcomes, name):
    outcome = outcomes(name)

    (incident,) = outcome.incidents
    assert outcome.replace_calls == [
        {"ClusterName": "ml-cluster-1", "NodeIds": [incident["instance_id"]]}
    ]
    assert incident["new_instance_id"] and incident["new_instance_id"] != incident["instance_id"]
    steps = [a for a in actions(outcome) if a != "evidence_attached"]  # more alarms may attach
    assert steps[: len(UP_TO_REPLACEMENT)] == UP_TO_REPLACEMENT


@pytest.mark.parametrize(
    ("name", "instance"),
    [
        ("replay-culprit", "i-0bb00000000000002"),
        ("nonfinite-transient", "i-0bb00000000000002"),
        ("weight-suspect", "i-0aa00000000000001"),
    ],
)
def test_the_incident_is_on_the_instance_the_alarm_names(outcomes, name, instance):
    assert outcomes(name).incidents[0]["instance_id"] == instance


@pytest.mark.parametrize(
    "name",
    [
        "reject",
        "approval-timeout",
        "dry-run",
        "weight-no-majority",
        "hyperpod-replaces",
        "storm-hold",
        "reboot-transient",
    ],
)
def test_scenarios_without_approval_or_with_dry_run_never_call_replace(outcomes, name):
    assert outcomes(name).replace_calls == []


def test_an_alarm_without_a_strict_majority_health_checks_and_asks_no_one(outcomes):
    outcome = outcomes("weight-no-majority")

    (incident,) = outcome.incidents
    assert not incident["instance_id"]  # one job-level incident for the involved nodes
    assert "approval_requested" not in actions(outcome)
    assert "health_check_started" in actions(outcome)


def test_when_hyperpod_replaces_a_failed_node_itself_the_pipeline_does_not_replace_it_again(
    outcomes,
):
    outcome = outcomes("hyperpod-replaces")

    (incident,) = outcome.incidents
    assert incident["state"] == "replaced_by_hyperpod"
    assert outcome.replace_calls == []
    assert "HyperPod" in (outcome.notification or "")


def test_a_storm_holds_every_node_under_one_hold_one_notice_and_an_audited_reset(outcomes):
    outcome = outcomes("storm-hold")

    holds = [subject for subject in outcome.audit if subject.startswith("hold-")]
    incidents = [subject for subject in outcome.audit if not subject.startswith("hold-")]
    assert len(holds) == 1
    assert [e["action"] for e in outcome.audit[holds[0]]] == [
        "storm_hold_started",
        "storm_notified",
        "storm_hold_reset",
        "reset_notified",
    ]
    assert outcome.audit[holds[0]][2]["actor"].startswith("approver:")
    assert sorted(i["instance_id"] for i in outcome.incidents) == list(NODES)
    for subject in incidents:  # the report held it; the alarm attached, nothing else happened
        assert [e["action"] for e in outcome.audit[subject]] == [
            "incident_held",
            "evidence_attached",
        ]
    assert "storm" in (outcome.notification or "")
    assert '"decision": "reset"' in (outcome.notification or "")


def test_a_transient_verdict_is_rebooted_health_checked_again_and_released(outcomes):
    outcome = outcomes("reboot-transient")

    (incident,) = outcome.incidents
    assert incident["state"] == "rebooted"
    assert "RECOMMENDATION: REBOOT, THEN HEALTH-CHECK AGAIN" in (outcome.notification or "")
    steps = [a for a in actions(outcome) if a not in ("evidence_attached", "reboot_status")]
    assert steps == [
        *UP_TO_REPLACEMENT[: UP_TO_REPLACEMENT.index("replacement_requested")],
        "reboot_requested",
        "reboot_done",
        "health_check_started",
        "health_check_status",
        "node_released",
        "incident_closed",
        "closed_notified",
    ]
    assert outcome.replace_calls == []


def test_a_timed_out_approval_records_no_decision(outcomes):
    assert "decision_accepted" not in actions(outcomes("approval-timeout"))


def test_dry_run_records_what_it_would_have_replaced(outcomes):
    outcome = outcomes("dry-run")

    assert "replacement_would_replace" in actions(outcome)
    assert "replacement_requested" not in actions(outcome)
    assert outcome.incidents[0]["dry_run"] is True
    assert outcome.incidents[0]["new_instance_id"] is None


def test_duplicate_deliveries_are_attached_to_the_one_incident(outcomes):
    outcome = outcomes("duplicate-events")

    again = [line.what for line in outcome.timeline if line.who == "eventbridge"]
    # The report event opens the incident first, or the first alarm delivery does: every other
    # delivery attaches.
    assert len(again) >= SCENARIOS["duplicate-events"].deliveries - 1
    assert all("attached" in what for what in again)


def test_the_plain_output_shows_the_timeline_the_card_and_the_audit_log(outcomes):
    out = io.StringIO()

    render(outcomes("replay-culprit"), out, Style(enabled=False))

    text = out.getvalue()
    assert "\033[" not in text  # no colour when not on a terminal
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in text
    assert "hash chain: verified" in text
    assert "→ new instance i-" in text and text.rstrip().splitlines()[-1].startswith("PASS")


def test_the_drills_card_names_the_checkpoint_to_resume_from(outcomes):
    card = outcomes("replay-culprit").notification or ""

    assert (
        'Resume from: checkpoint at step 20 ("s3://ckpt/step-20"), saved before the suspect window '
        "[21, 30]; tags: last_audit_pass 20, last_weight_check_pass 20"
    ) in card
    assert (
        "Rollback: 10 steps (from the alarm at step 30 back to the checkpoint at step 20); "
        "exposure window: steps 21-30 (10 steps trained between the suspect window's start and "
        "detection)"
    ) in card


def test_json_output_is_one_document_with_the_outcome(outcomes, capsys, monkeypatch):
    monkeypatch.setattr(drill_cli, "run_scenario", lambda scenario, **_: outcomes(scenario.name))

    code = drill_cli.main(["--scenario", "reject", "--json"])

    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["passed"] is True and document["incidents"][0]["state"] == "rejected"


def test_a_failed_expectation_makes_the_exit_status_non_zero(outcomes, capsys, monkeypatch):
    failed = outcomes("reject")
    broken = Outcome(**{**vars(failed), "passed": False, "problems": ["expected replaced"]})
    monkeypatch.setattr(drill_cli, "run_scenario", lambda scenario, **_: broken)

    assert drill_cli.main(["--scenario", "reject"]) == 1
    assert "FAIL  reject" in capsys.readouterr().out


def test_list_names_every_scenario(capsys):
    assert drill_cli.main(["--list"]) == 0

    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(SCENARIOS)


def test_a_node_left_cordoned_after_a_reject_fails_the_drill(monkeypatch):
    from sdc_remediation.lambdas.logic import isolation

    monkeypatch.setattr(isolation, "release", lambda step, incident: incident)

    outcome = run_scenario(SCENARIOS["reject"])

    assert not outcome.passed
    assert any("still cordoned" in problem for problem in outcome.problems)


def _telemetry_paragraph(outcome: Outcome) -> list[str]:
    (paragraph,) = [
        p for p in (outcome.notification or "").split("\n\n") if p.startswith("HARDWARE TELEMETRY")
    ]
    return paragraph.splitlines()


def test_hardware_evidence_reads_a_real_prometheus_and_names_the_culprit_gpus_faults(outcomes):
    outcome = outcomes("hardware-evidence")
    uuid = RANK_MAP[13]["gpu_uuid"]

    (served,) = [line.what for line in outcome.timeline if line.who == "prometheus"]
    lines = _telemetry_paragraph(outcome)

    assert served.startswith("Prometheus 2.")  # the real server (make test installs it)
    xid = re.fullmatch(
        rf"  XID 79 at (\d\d:\d\d:\d\d) UTC on {uuid} \(GPU 5\): "
        r"GPU has fallen off the bus \(usually hardware\)",
        lines[1],
    )
    remap = re.fullmatch(
        rf"  row remap FAILED \(no spare row left to repair its memory\) on {uuid} \(GPU 5\), "
        r"since (\d\d:\d\d:\d\d) UTC",
        lines[2],
    )
    assert xid and remap
    assert re.fullmatch(  # a counter stored under its _total name, read as a signal
        rf"  PCIe replays rose by 3 to 3 \(first at \d\d:\d\d:\d\d UTC\) on {uuid} \(GPU 5\)",
        lines[3],
    )
    gap = datetime.strptime(remap[1], "%H:%M:%S") - datetime.strptime(xid[1], "%H:%M:%S")
    assert gap.total_seconds() == 30
    assert not any(re.search(r"XID (31|48)\b", line) for line in lines)  # the decoys
    assert lines[-1] == f"  dashboard: {DASHBOARD}"


def test_hardware_evidence_is_approved_and_replaced_in_the_usual_audit_order(outcomes):
    outcome = outcomes("hardware-evidence")

    (incident,) = outcome.incidents
    steps = [a for a in actions(outcome) if a != "evidence_attached"]
    assert steps[: len(UP_TO_REPLACEMENT)] == UP_TO_REPLACEMENT
    assert set(steps[len(UP_TO_REPLACEMENT) : -4]) <= {"replacement_status"}
    assert steps[-4:] == [
        "replacement_done",
        "node_release_skipped",
        "incident_closed",
        "closed_notified",
    ]
    assert outcome.replace_calls == [
        {"ClusterName": "ml-cluster-1", "NodeIds": ["i-0bb00000000000002"]}
    ]
    assert incident["state"] == "replaced"


def test_a_card_without_the_hardware_evidence_fails_the_drill(monkeypatch):
    from sdc_remediation.lambdas.logic.evidence import telemetry
    from sdc_remediation.lambdas.models.telemetry import TelemetryRecord, TelemetryState

    def nothing(deps, incident, now):
        return TelemetryRecord(TelemetryState.CLEAN, "no hardware signal", now.isoformat())

    monkeypatch.setattr(telemetry, "gather", nothing)

    outcome = run_scenario(SCENARIOS["hardware-evidence"])

    assert not outcome.passed
    assert any("does not name XID 79" in problem for problem in outcome.problems)
    assert any("row remap failure" in problem for problem in outcome.problems)


def test_a_muted_alarm_is_held_naming_its_mute_rule_and_nothing_acts(outcomes):
    outcome = outcomes("muted-alarm")

    assert actions(outcome) == ["incident_held", "held_notified"]
    assert MUTE_RULE in (outcome.notification or "")
    assert "delete-alarm-mute-rule" in (outcome.notification or "")
    assert outcome.replace_calls == []
    assert any("actions muted by" in line.what for line in outcome.timeline)


def test_the_approval_goes_out_as_the_card_for_email_and_a_custom_notification_for_chat():
    import jsonschema

    from tests.conftest import load_fixture

    seen: dict = {}

    def ask(run, incident_id, card):
        seen.update(
            incident_id=incident_id,
            card=card,
            renderings=run.renderings("approve"),
            printed=drill_cli._chat_rendering(run),
        )
        return "approve"

    run_scenario(SCENARIOS["replay-culprit"], ask=ask)

    assert set(seen["renderings"]) == {"default", "https"}  # e-mail gets `default`
    assert seen["renderings"]["default"] == seen["card"]
    chat = json.loads(seen["renderings"]["https"])
    jsonschema.Draft202012Validator(
        load_fixture("events", "chat_custom_notification.schema")
    ).validate(chat)
    assert chat["metadata"]["threadId"] == seen["incident_id"]
    assert seen["printed"].startswith("\nWhat a chat channel gets (https subscribers")
    assert '"source": "custom"' in seen["printed"]


def test_a_drill_prints_the_lifecycle_events_of_its_incident_in_order(outcomes):
    outcome = outcomes("replay-culprit")

    out = io.StringIO()
    render(outcome, out, Style(False))

    assert [(e["old_state"], e["new_state"]) for e in outcome.lifecycle] == [
        (None, "opened"),
        ("opened", "health_check"),
        ("health_check", "awaiting_approval"),
        ("awaiting_approval", "replacing"),
        ("replacing", "replaced"),
    ]
    text = out.getvalue()
    assert "Lifecycle events (EventBridge: sdc.remediation, SDC Incident State Change)" in text
    assert "(new) → opened" in text and "replacing → replaced  (terminal)" in text


def test_the_calls_per_function_table_in_the_deploy_doc_is_the_drill_s(outcomes):
    ran = [outcomes(name) for name in sorted(n for n in SCENARIOS if SCENARIOS[n].job is None)]

    table = calls.calls_table(calls.merged(outcome.calls for outcome in ran))

    doc = (REPO / calls.DOC).read_text(encoding="utf-8")
    assert calls.documented(doc) == table, (
        "run: python -m sdc_remediation.infra.local.drill.calls --write"
    )


def test_two_people_must_approve_and_the_same_one_twice_counts_once(outcomes):
    outcome = outcomes("two-person")

    assert outcome.passed, outcome.problems
    steps = [a for a in actions(outcome) if a != "evidence_attached"]
    assert steps[steps.index("approval_requested") :][:6] == [
        "approval_requested",
        "approval_recorded",
        "approval_repeated",
        "decision_accepted",
        "decision_delivered",
        "replacement_requested",
    ]
    said = [line.what for line in outcome.timeline if line.who == "approver"]
    assert any("alice: approve" in s and "approvals 1 of 2; waiting" in s for s in said)
    assert any("bob: approve" in s and "approvals 2 of 2" in s for s in said)


APPROVED = sorted(n for n in SCENARIOS if SCENARIOS[n].approval and SCENARIOS[n].job is None)
SURFACES = {"stored record", "e-mail card", "chat notice", "lifecycle event", "sdc show"}


def test_some_scenarios_reach_the_approval():
    assert {"replay-culprit", "nonfinite-transient", "reject"} <= set(APPROVED)


@pytest.mark.parametrize("name", APPROVED)
def test_every_surface_says_the_stored_recommendation_of_each_incident_waiting(outcomes, name):
    """The e-mail card, its chat rendering, the lifecycle event and `sdc show` against the
    local account, each read while the incident waited, said what its record says (the drill's
    judge compares them: `judge.one_recommendation`)."""
    outcome = outcomes(name)

    assert set(outcome.recommendations) == {i["incident_id"] for i in outcome.incidents}
    for said in outcome.recommendations.values():
        assert set(said) == SURFACES
        assert None not in said.values() and len(set(said.values())) == 1, said
    assert not [p for p in outcome.problems if "recommendation" in p], outcome.problems


DEADLINE_SURFACES = {
    "stored record",
    "e-mail card",
    "chat notice",
    "lifecycle event",
    "sdc show",
    "sdc status",
}


@pytest.mark.parametrize("name", APPROVED)
def test_every_card_leads_with_the_recommendation_and_the_deadline_every_surface_gives(
    outcomes, name
):
    """The acceptance of #36: the card's first five lines hold the stored recommendation and
    the stored deadline, and the chat notice, the lifecycle event, `sdc show` and `sdc status`
    give that same deadline (the drill's judge: `judge.card_leads`, `judge.one_deadline`)."""
    outcome = outcomes(name)

    assert set(outcome.card_heads) == {i["incident_id"] for i in outcome.incidents}
    for incident_id, head in outcome.card_heads.items():
        advice = outcome.recommendations[incident_id]["stored record"]
        deadline = outcome.deadlines[incident_id]["stored record"]
        assert advice and deadline
        assert len(head) == 5
        assert f"RECOMMENDATION: {advice.upper()}" in head
        assert any(line.startswith(f"DECIDE BY: {deadline};") for line in head)
        zone = SCENARIOS[name].context.get("sdc:approverTimeZone")
        local = rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T \({zone}\), " if zone else ""
        assert re.fullmatch(local + r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", deadline)
        said = outcome.deadlines[incident_id]
        assert set(said) == DEADLINE_SURFACES and set(said.values()) == {deadline}, said
    assert not [p for p in outcome.problems if "deadline" in p], outcome.problems


def test_a_card_whose_first_lines_lack_the_advice_or_deadline_fails_the_drill():
    heads = {"sdc-1": ["WHAT: ...", "WHERE: ...", "NODE", "DECIDE BY: 2026-12-06 08:15:04 UTC"]}
    advice = {"sdc-1": {"stored record": "replace after review"}}
    deadlines = {"sdc-1": {"stored record": "2026-12-06 09:15:04 UTC"}}

    problems = judge.card_leads(heads, advice, deadlines)

    assert problems == [
        "sdc-1: the card's first five lines do not hold the recommendation 'replace after review'",
        "sdc-1: the card's first five lines do not hold the deadline '2026-12-06 09:15:04 UTC'",
    ]


def test_a_surface_that_gives_another_deadline_than_the_record_fails_the_drill():
    said = {
        "sdc-1": {"stored record": "2026-12-06 08:15:04 UTC", "sdc status": None},
        "sdc-2": {"stored record": None},
    }

    assert judge.one_deadline(said) == [
        "sdc-1: the stored approval deadline is '2026-12-06 08:15:04 UTC', but the sdc status "
        "says None",
        "sdc-2 waited for approval with no stored deadline",
    ]


def test_a_surface_that_advises_otherwise_than_the_record_fails_the_drill():
    said = {
        "sdc-1": {
            "stored record": "replace after review",
            "e-mail card": "replace after review",
            "chat notice": "replace after review",
            "lifecycle event": "replace after review",
            "sdc show": "reboot",
        },
        "sdc-2": {"stored record": None, "e-mail card": "reboot"},
    }

    problems = judge.one_recommendation(said)

    assert problems == [
        "sdc-1: the stored recommendation is 'replace after review', but the sdc show says "
        "'reboot'",
        "sdc-2 waited for approval with no stored recommendation",
    ]


def test_the_card_heading_and_the_lifecycle_event_are_read_as_the_advice():
    card = "SUBJECT\n\nRECOMMENDATION: REPLACE AFTER REVIEW\n  why\n"
    events = [
        {"incident_id": "a", "new_state": "health_check", "recommendation": None},
        {"incident_id": "a", "new_state": "awaiting_approval", "recommendation": {"advice": "x"}},
        {"incident_id": "b", "new_state": "awaiting_approval", "recommendation": {"advice": "y"}},
    ]

    assert judge.heading_advice(card) == "replace after review"
    assert judge.heading_advice("no heading") is None
    assert (judge.event_advice(events, "a"), judge.event_advice(events, "c")) == ("x", None)


def test_a_hardware_alert_alone_isolates_the_throttling_node_and_proposes_a_reboot(outcomes):
    outcome = outcomes("hardware-alert")

    assert outcome.passed, outcome.problems
    (incident,) = outcome.incidents
    assert incident["instance_id"] == RANK_MAP[13]["instance_id"]
    steps = [a for a in actions(outcome) if a != "evidence_attached"]
    assert steps[:4] == [
        "incident_opened",
        "execution_started",
        "node_isolated",
        "health_check_started",
    ]
    said = [line.what for line in outcome.timeline if line.who == "prometheus"]
    assert any("GpuHardwareThrottling firing on hyperpod-i-0bb00000000000002" in s for s in said)
    assert "RECOMMENDATION: REBOOT" in (outcome.notification or "")
    assert "a hardware signal alone: reboot, replace on a repeat" in (outcome.notification or "")
    assert outcome.replace_calls == []
    alerts = (outcome.notification or "").split("HARDWARE ALERTS", 1)[1].split("\n\n", 1)[0]
    alerts = " ".join(alerts.split())  # a long line continues on the next
    assert "hardware_throttling on GPU" in alerts and "warning, started" in alerts
    assert "still firing" in alerts and "HW thermal slowdown" in alerts


@pytest.mark.parametrize(
    ("name", "eks_twin"),
    [("slurm-replay-culprit", "replay-culprit"), ("slurm-reboot-transient", "reboot-transient")],
)
def test_on_slurm_scontrol_shows_our_drain_while_waiting_and_the_node_in_service_after(
    outcomes, name, eks_twin
):
    outcome = outcomes(name)

    (incident,) = outcome.incidents
    shown = [
        line.what
        for line in outcome.timeline
        if line.who == "slurm" and line.what.startswith("scontrol show node")
    ]
    waiting, after = shown
    assert "+DRAIN" in waiting
    assert waiting.endswith(f"Reason=sdc-remediation incident {incident['incident_id']}")
    assert "DRAIN" not in after and after.endswith("Reason=None")

    # the same pipeline as on EKS: the same audit actions, in the same order, but for the
    # release: a replaced EKS node is gone with its cordon, a replaced Slurm node keeps its
    # name (and would keep our drain): its drain is lifted. The report's evidence attaches
    # while the execution runs (before or after the isolation, as the machine's load has it):
    # the same attachments, not in the same place.
    def steps(o: Outcome) -> list[str]:
        return [a for a in actions(o) if not a.startswith("node_release") and a != ATTACHED]

    assert steps(outcome) == steps(outcomes(eks_twin))
    assert actions(outcome).count(ATTACHED) == actions(outcomes(eks_twin)).count(ATTACHED)
    assert "node_released" in actions(outcome)
    assert any("drained on Slurm node" in line for line in (outcome.notification or "").split("\n"))
