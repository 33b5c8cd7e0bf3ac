"""The decision table (lambdas/logic/evidence/recommendation.py), driven by the training-loop alarm fixtures.

Ranks live on node r // 8 (tests/events/README.md): node 0 holds ranks 0-7, node 1 ranks 8-15.
"""

from __future__ import annotations

import copy

import pytest

from sdc_remediation.lambdas.logic.evidence.recommendation import recommend
from sdc_remediation.lambdas.models.evidence import ReportEvidence, evidence_of
from sdc_remediation.lambdas.models.recommendation import Advice
from tests.conftest import load_fixture

NODE_0 = list(range(0, 8))
NODE_1 = list(range(8, 16))


def evidence(alarm_name: str, ranks: list[int], **changes) -> ReportEvidence:
    """A report evidence summary as the pipeline stores it (read back), from an alarm fixture."""
    alarm = copy.deepcopy(load_fixture("alarms", alarm_name))
    alarm.update(changes)
    return evidence_of(
        {
            "kind": "report",
            "key": f"report:{alarm_name}",
            "check": alarm.get("check"),
            "ranks": ranks,
            "culprits": alarm.get("culprits", []),
            "verdicts": alarm.get("verdicts", []),
            "nonfinite": alarm.get("nonfinite", []),
            "mismatched_pairs": alarm.get("mismatched_pairs", []),
            "weight_suspects": alarm.get("suspects") if alarm.get("check") == "weights" else None,
        }
    )


def test_minority_weight_copy_on_this_instance_is_proposed_for_replacement():
    advice = recommend([evidence("weights_suspect", NODE_0)], None)

    assert advice.advice is Advice.REPLACE
    assert "rank 0" in advice.reasons[0]


def test_minority_weight_copy_on_another_instance_proposes_no_replacement_here():
    assert recommend([evidence("weights_suspect", NODE_1)], None).advice is Advice.HEALTH_CHECK_ONLY


def test_weights_without_a_strict_majority_are_ambiguous():
    advice = recommend([evidence("weights_no_majority", NODE_0)], None)

    assert advice.advice is Advice.HEALTH_CHECK_ONLY
    assert "no strict majority" in advice.reasons[0]


def test_a_culprit_of_both_ring_comparisons_is_proposed_for_replacement():
    advice = recommend([evidence("replay_culprit", NODE_1)], None)

    assert advice.advice is Advice.REPLACE
    assert "rank 13" in advice.reasons[0]


def test_a_first_transient_verdict_recommends_a_reboot():
    assert recommend([evidence("nonfinite_transient", NODE_1)], None).advice is Advice.REBOOT


def test_a_transient_verdict_on_a_node_with_history_recommends_replacing():
    advice = recommend([evidence("nonfinite_transient", NODE_1)], None, ["sdc-old-incident"])

    assert advice.advice is Advice.REPLACE
    assert any("history" in r for r in advice.reasons)


def test_after_a_reboot_a_transient_verdict_no_longer_recommends_a_reboot():
    advice = recommend([evidence("nonfinite_transient", NODE_1)], "passed", rebooted=True)

    assert advice.advice is Advice.REPLACE
    assert any("already rebooted" in r for r in advice.reasons)


def test_a_health_check_that_fails_after_the_reboot_recommends_replacing():
    advice = recommend([evidence("nonfinite_transient", NODE_1)], "failed", rebooted=True)

    assert advice.advice is Advice.REPLACE
    assert "the deep health check failed again after the reboot" in advice.reasons


def test_a_transient_verdict_that_recurs_is_proposed_for_replacement():
    advice = recommend(
        [evidence("nonfinite_transient", NODE_1), evidence("nonfinite_transient", NODE_1)], None
    )

    assert advice.advice is Advice.REPLACE
    assert any("recurred" in r for r in advice.reasons)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("persistent", Advice.REPLACE),
        ("replayer computed wrong", Advice.REPLACE),
        ("unattributable", Advice.HEALTH_CHECK_ONLY),
    ],
)
def test_verdict_kinds_give_their_documented_advice(kind, expected):
    verdicts = [{"pair": [13, 5], "third": 21, "suspect": 13, "kind": kind}]

    advice = recommend([evidence("nonfinite_transient", NODE_1, verdicts=verdicts)], None)

    assert advice.advice is expected


def test_a_verdict_about_a_rank_elsewhere_says_nothing_about_this_instance():
    assert (
        recommend([evidence("nonfinite_transient", NODE_0)], None).advice
        is Advice.HEALTH_CHECK_ONLY
    )


def test_a_non_finite_reduced_gradient_is_ambiguous():
    advice = recommend([evidence("reduced_gradient", NODE_0)], None)

    assert advice.advice is Advice.HEALTH_CHECK_ONLY
    assert "reduced gradient" in advice.reasons[0]


def test_non_finite_gradient_without_a_replay_mismatch_is_ambiguous():
    report = evidence("nonfinite_transient", NODE_1, mismatched_pairs=[], verdicts=[])

    advice = recommend([report], None)

    assert advice.advice is Advice.HEALTH_CHECK_ONLY
    assert "without a replay mismatch" in advice.reasons[0]


def test_without_a_report_only_the_health_check_is_proposed():
    advice = recommend([], None)

    assert advice.advice is Advice.HEALTH_CHECK_ONLY
    assert "no SDC report" in advice.reasons[0]


def test_a_failed_deep_health_check_proposes_replacement_even_on_ambiguous_evidence():
    advice = recommend([evidence("weights_no_majority", NODE_0)], "failed")

    assert advice.advice is Advice.REPLACE
    assert "the deep health check failed" in advice.reasons


def test_the_strongest_advice_of_several_reports_wins():
    reports = [evidence("reduced_gradient", NODE_1), evidence("replay_culprit", NODE_1)]

    assert recommend(reports, None).advice is Advice.REPLACE


def test_a_transient_verdict_on_a_node_with_history_is_proposed_for_replacement():
    advice = recommend([evidence("nonfinite_transient", NODE_1)], None, ["sdc-earlier"])

    assert advice.advice is Advice.REPLACE
    assert "sdc-earlier" in advice.reasons[-1]


def test_history_alone_does_not_turn_ambiguous_evidence_into_a_replacement():
    advice = recommend([evidence("weights_no_majority", NODE_1)], None, ["sdc-earlier"])

    assert advice.advice is Advice.HEALTH_CHECK_ONLY


def test_a_job_level_incident_never_proposes_a_replacement():
    advice = recommend([evidence("replay_culprit", NODE_1)], "failed", job_level=True)

    assert advice.advice is Advice.HEALTH_CHECK_ONLY
