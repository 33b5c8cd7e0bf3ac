"""The training watch in a real 4-rank gloo job on CPU (one rank per instance of the drill's
cluster), with a watchdog timeout of 1.5 s: a rank that stops before an all-reduce is named
with its instance; two stalled ranks on two instances are named, but nothing is localised; a
first-step compile, a slow data loader and a checkpoint save, each longer than the timeout,
raise no hang; a rank that is slower every step is reported as a straggler."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from infra.local.drill.scenarios import NODES
from infra.local.watch_job import WATCH_TIMEOUT, WatchResult, run_watch_job
from trainer_emitter.contract import NAMESPACE, Metric, Role, report_schema
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

pytestmark = pytest.mark.torch

STALLED = 2
SLOW = 1
PAUSE = 2 * WATCH_TIMEOUT
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def one_rank() -> WatchResult:
    return run_watch_job(NODES, stall=(STALLED,))


@pytest.fixture(scope="module")
def two_instances() -> WatchResult:
    return run_watch_job(NODES, stall=(1, 3))


@pytest.fixture(scope="module")
def pauses_and_a_straggler() -> WatchResult:
    return run_watch_job(
        NODES,
        steps=15,
        compile_seconds=PAUSE,
        loader_seconds=PAUSE,
        checkpoint_seconds=PAUSE,
        straggler=SLOW,
        straggler_seconds=0.05,
    )


def report_of(result: WatchResult, alarm: dict):
    return build_report(
        alarm,
        RankMap(result.rank_map),
        cluster_name="ml-cluster-1",
        job_name="watch",
        namespace=NAMESPACE,
        report_id="watch-report-1",
        now=NOW,
    )


def test_a_rank_stopped_before_an_all_reduce_is_named_with_its_instance(one_rank):
    [hang] = one_rank.hangs
    evidence = hang["hang"]

    assert evidence["missing_ranks"] == [STALLED]
    assert evidence["odd_stack_ranks"] == [STALLED]
    assert evidence["localised_instance"] == NODES[STALLED]
    assert evidence["signals"] == ["collective", "stack"]
    assert evidence["waiting_collective"]["name"] == "all_reduce"


def test_the_hang_is_reported_within_the_watchdog_time_and_a_few_polls_of_its_onset(one_rank):
    assert one_rank.onset is not None and one_rank.reported is not None
    assert WATCH_TIMEOUT <= one_rank.reported - one_rank.onset <= WATCH_TIMEOUT + 30


def test_the_evidence_carries_each_named_rank_s_stack_and_progress(one_rank):
    ranks = {entry["rank"]: entry for entry in one_rank.hangs[0]["hang"]["ranks"]}

    assert any(
        "all_reduce" in frame for peer in ranks if peer != STALLED for frame in ranks[peer]["stack"]
    )
    assert not any("all_reduce" in frame for frame in ranks[STALLED]["stack"])
    assert ranks[STALLED]["seconds_since_progress"] >= WATCH_TIMEOUT / 2


def test_the_localised_hang_publishes_one_hang_datapoint_for_that_instance(one_rank):
    report = report_of(one_rank, one_rank.hangs[0])

    jsonschema.validate(
        report.detail, report_schema("2"), format_checker=jsonschema.FormatChecker()
    )
    assert [(d.metric, d.instance_id) for d in report.datapoints] == [(Metric.HANG, NODES[STALLED])]
    assert report.detail["instances"][0]["role"] == Role.CULPRIT
    assert report.detail["ambiguous"] is False


def test_stalled_ranks_on_two_instances_are_named_but_localise_nothing(two_instances):
    [hang] = two_instances.hangs
    report = report_of(two_instances, hang)

    assert hang["hang"]["missing_ranks"] == [1, 3]
    assert hang["hang"]["localised_instance"] is None
    assert sorted(d.instance_id for d in report.datapoints) == [NODES[1], NODES[3]]
    assert report.detail["ambiguous"] is True


def test_a_compile_a_slow_loader_and_a_checkpoint_save_longer_than_the_timeout_raise_no_hang(
    pauses_and_a_straggler,
):
    assert pauses_and_a_straggler.hangs == []
    assert sorted(pauses_and_a_straggler.finished) == [0, 1, 2, 3]


def test_the_ranks_waiting_on_the_checkpoint_did_look_and_saw_the_long_section(
    pauses_and_a_straggler,
):
    looked = pauses_and_a_straggler.verdicts

    assert looked, "the waiting ranks never gathered evidence: the checkpoint tested nothing"
    assert all(not hung and "long section" in why for hung, why in looked)


def test_a_rank_slower_every_step_is_reported_as_a_straggler_once(pauses_and_a_straggler):
    [alarm] = pauses_and_a_straggler.stragglers
    evidence = alarm["straggler"]
    scores = {entry["rank"]: entry for entry in evidence["scores"]}

    assert evidence["flagged"] == [SLOW]
    assert evidence["named_instances"] == [NODES[SLOW]]
    assert scores[SLOW]["relative"] < 0.7
    # the others' scores of the last window: each above the slow rank's (a loaded machine may
    # slow one of them for a window; only k windows in a row flag a rank, as asserted above)
    assert all(
        scores[rank]["relative"] > scores[SLOW]["relative"] for rank in scores if rank != SLOW
    )
    assert [
        (d.metric, d.instance_id) for d in report_of(pauses_and_a_straggler, alarm).datapoints
    ] == [(Metric.STRAGGLER, NODES[SLOW])]
