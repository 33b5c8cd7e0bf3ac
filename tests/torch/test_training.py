"""The three checks in a real DDP job: four gloo ranks on CPU, each on its own "node".

Every scenario runs once per session in one process group (see conftest); each test reads one
behaviour off the results. Faults are injected through a forward hook or a parameter edit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import load_fixture
from tests.torch.scenarios import SCENARIOS, WORLD, instance_id
from trainer_emitter.contract import NAMESPACE, Check, VerdictKind
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

pytestmark = pytest.mark.torch


def on_rank0(runs: dict[str, list[Any]], name: str) -> dict[str, Any]:
    return runs[name][0]


def at(run: dict[str, Any], step: int) -> dict[str, Any]:
    return next(s for s in run["steps"] if s["step"] == step)


def test_a_clean_run_of_210_steps_raises_no_alarm(runs):
    assert [r["alarms"] for r in runs["clean"]] == [[]] * WORLD


def test_a_clean_run_audits_checks_weights_and_saves_on_schedule(runs):
    run = on_rank0(runs, "clean")

    audited = [s["step"] for s in run["steps"] if s["audited"]]
    checked = [s["step"] for s in run["steps"] if s["weights_checked"]]

    assert audited == list(range(10, 211, 10))
    assert checked == sorted(set(range(15, 211, 15)) | {50, 100, 150, 200})
    assert all(s["applied"] for s in run["steps"])
    assert run["saves"] == [
        {"step": step, "tags": {"last_audit_pass": step, "last_weight_check_pass": step}}
        for step in (50, 100, 150, 200)
    ]


def test_gradients_are_fingerprinted_before_the_all_reduce_on_audit_steps_only(runs):
    run = on_rank0(runs, "clean")

    fingerprinted = [s["step"] for s in run["steps"] if s["grads_fingerprinted"]]

    assert fingerprinted == list(range(10, 211, 10))


def test_after_a_clean_run_every_replica_holds_the_same_weights(runs):
    assert len({tuple(r["weights"]) for r in runs["clean"]}) == 1


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_rank_returns_the_same_alarms_at_the_same_steps(runs, name):
    first = runs[name][0]["alarms"]

    assert all(r["alarms"] == first for r in runs[name])


def test_a_nan_in_one_ranks_forward_is_named_by_check_1_and_the_step_is_not_applied(runs):
    run = on_rank0(runs, "nan_once")

    step = at(run, 7)

    assert step["alarm"]["check"] == Check.COMPUTE.value
    assert step["alarm"]["nonfinite"] == [2]
    assert (step["applied"], step["weights_changed"]) == (False, False)
    assert at(run, 6)["weights_changed"]  # steps before and after are applied
    assert at(run, 8)["applied"] and at(run, 8)["alarm"] is None


def test_a_one_off_nan_is_confirmed_transient_by_a_third_rank(runs):
    alarm = at(on_rank0(runs, "nan_once"), 7)["alarm"]

    assert alarm["mismatched_pairs"] == [[2, 1]]
    assert alarm["culprits"] == []
    assert alarm["verdicts"] == [
        {"pair": [2, 1], "third": 3, "suspect": 2, "kind": VerdictKind.TRANSIENT.value}
    ]
    assert (alarm["suspect_window"], alarm["last_audit_pass"]) == ([6, 7], 5)


def test_a_1000x_error_from_step_12_passes_check_1_until_the_audit_at_15_names_its_rank(runs):
    run = on_rank0(runs, "scaled_from_step")

    quiet = [at(run, step) for step in (12, 13, 14)]
    alarm = at(run, 15)["alarm"]

    assert [(s["alarm"], s["applied"]) for s in quiet] == [(None, True)] * 3
    assert runs["scaled_from_step"][1]["fired"][0] == 12
    assert alarm["culprits"] == [1]
    assert alarm["mismatched_pairs"] == [[1, 0], [2, 1]]
    assert (alarm["nonfinite"], alarm["verdicts"]) == ([], [])
    assert alarm["suspect_window"] == [11, 15]  # the fault began at 12: inside the window
    assert not at(run, 15)["applied"]


def test_a_rank_that_recomputes_its_own_batch_wrong_again_is_a_persistent_suspect(runs):
    alarm = at(on_rank0(runs, "wrong_on_own_batch"), 10)["alarm"]

    assert alarm["verdicts"] == [
        {"pair": [2, 1], "third": 3, "suspect": 2, "kind": VerdictKind.PERSISTENT.value}
    ]


def test_a_rank_that_computes_wrong_only_when_replaying_is_named_as_the_replayer(runs):
    alarm = at(on_rank0(runs, "wrong_replay"), 10)["alarm"]

    assert alarm["verdicts"] == [
        {"pair": [2, 1], "third": 3, "suspect": 1, "kind": VerdictKind.REPLAYER.value}
    ]


def test_a_wrong_gradient_with_a_right_loss_is_caught_by_the_gradient_fingerprints(runs):
    alarm = at(on_rank0(runs, "wrong_gradient"), 10)["alarm"]

    assert runs["wrong_gradient"][2]["fired"] == [10]
    assert alarm["verdicts"] == [
        {"pair": [2, 1], "third": 3, "suspect": 2, "kind": VerdictKind.TRANSIENT.value}
    ]


def test_a_flipped_weight_bit_is_named_at_the_next_checkpoint_which_is_not_saved(runs):
    run = on_rank0(runs, "bit_flip")

    alarms = run["alarms"]

    assert alarms == [
        {
            "step": 20,
            "check": Check.WEIGHTS.value,
            "suspects": [3],
            "suspect_window": [11, 20],
            "last_audit_pass": None,
            "last_weight_check_pass": 10,
            "checkpoints": [
                {
                    "step": 10,
                    "last_audit_pass": None,
                    "last_weight_check_pass": 10,
                    "location": "mem://ckpt/step-10",
                }
            ],
        }
    ]
    assert [s["step"] for s in run["saves"]] == [10]
    assert all(at(run, step)["alarm"] is None for step in range(14, 20))


def test_the_reporter_rank_alone_reports_the_alarm_naming_the_instance(runs):
    reported = [r["reported"] for r in runs["bit_flip"]]

    assert reported[0] == [{"delivered": True, "instances": [instance_id(3)]}]
    assert reported[1:] == [[None]] * (WORLD - 1)


FAULTS = {  # scenario: (step of the alarm, the rank at fault)
    "nan_once": (7, 2),
    "scaled_from_step": (15, 1),
    "wrong_on_own_batch": (10, 2),
    "wrong_replay": (10, 1),
    "wrong_gradient": (10, 2),
    "bit_flip": (20, 3),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_alarm_has_exactly_the_keys_of_the_fixture_alarms_of_its_check(runs, name):
    alarm = on_rank0(runs, name)["alarms"][0]
    fixture = "replay_culprit" if alarm["check"] == Check.COMPUTE.value else "weights_suspect"

    # plus the optional `checkpoints`, present once the job saved one
    assert [key for key in alarm if key != "checkpoints"] == list(load_fixture("alarms", fixture))


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_alarm_makes_a_report_without_errors_naming_the_faulty_ranks_instance(runs, name):
    step, rank = FAULTS[name]
    run = on_rank0(runs, name)
    alarm = at(run, step)["alarm"]

    report = build_report(
        alarm,
        RankMap(run["rank_map"]),
        cluster_name="ml-cluster-1",
        job_name="tiny-ddp",
        namespace=NAMESPACE,
        report_id="00000000-0000-4000-8000-000000000006",
        now=datetime(2026, 12, 2, tzinfo=UTC),
        reporting_rank=0,
    )

    assert report.errors == []
    strongest = [s for s in report.detail["suspects"] if s["role"] != "involved"]
    assert [(s["rank"], s["instance_id"]) for s in strongest] == [(rank, instance_id(rank))]
    assert {d.instance_id for d in report.datapoints} >= {instance_id(rank)}
