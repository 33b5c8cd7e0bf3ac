"""The training watch in real 4-rank gloo jobs on CPU (one rank per instance of the drill's
cluster) that call no collective themselves, as training scripts do not: DDP's bucketed
all-reduces, FSDP2's gathers and reductions, a second process group's loss all-reduce. With a
watchdog timeout of 1.5 s: a rank that stops is named with its instance by both signals
(collective and stack), under DDP, FSDP2, and across two process groups; two stalled ranks on
two instances are named, but nothing is localised; a first step longer than the timeout raises
nothing and the later hang is still reported; a first-step compile, a slow data loader and a
checkpoint save, each longer than the timeout, raise no hang; a rank 0.25 s slower every step is
reported as a straggler within k windows, under DDP and under FSDP2."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from sdc_remediation.infra.local.drill.scenarios import NODES
from sdc_remediation.infra.local.watch_job import WATCH_TIMEOUT, JobKind, WatchResult, run_watch_job
from trainer_emitter.contract import NAMESPACE, Metric, Role, report_schema
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

pytestmark = pytest.mark.torch

STALLED = 2
SLOW = 1
SLOWER_BY = 0.25
PAUSE = 2 * WATCH_TIMEOUT
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STRAGGLING = {"straggler": SLOW, "straggler_seconds": SLOWER_BY, "step_seconds": 0.05}
"""Every rank's step computes 50 ms (steadier scores on a loaded machine), the slow one 0.25 s
more."""


@pytest.fixture(scope="module")
def one_rank() -> WatchResult:
    """DDP; every rank's first step spends twice the watchdog's timeout in its imports, then
    rank 2 stops at step 4."""
    return run_watch_job(NODES, stall=(STALLED,), stall_step=4, first_step_seconds=PAUSE)


@pytest.fixture(scope="module")
def fsdp() -> WatchResult:
    """FSDP2: rank 1 slower every step, then rank 2 stops at step 14 (after two windows)."""
    return run_watch_job(
        NODES, kind=JobKind.FSDP, steps=16, stall=(STALLED,), stall_step=14, **STRAGGLING
    )


@pytest.fixture(scope="module")
def counted() -> WatchResult:
    """DDP without the flight recorder (the watch's own counter, DDP's buckets through its
    hook): rank 1 slower every step, then rank 2 stops at step 14."""
    return run_watch_job(NODES, use_recorder=False, steps=16, stall=(STALLED,), stall_step=14,
                         **STRAGGLING)  # fmt: skip


@pytest.fixture(scope="module")
def two_groups() -> WatchResult:
    return run_watch_job(NODES, kind=JobKind.TWO_GROUPS, stall=(STALLED,))


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
        **STRAGGLING,
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


def assert_localised_by_both_signals(result: WatchResult, collective: str) -> None:
    [hang] = result.hangs
    evidence = hang["hang"]

    assert evidence["missing_ranks"] == [STALLED]
    assert evidence["odd_stack_ranks"] == [STALLED]
    assert evidence["localised_instance"] == NODES[STALLED]
    assert evidence["signals"] == ["collective", "stack"]
    assert evidence["waiting_collective"]["name"] == collective


def test_a_rank_that_stops_under_ddp_is_named_by_collective_and_stack_with_its_instance(one_rank):
    assert_localised_by_both_signals(one_rank, "gloo:all_reduce")


def test_a_rank_that_stops_under_fsdp2_is_named_by_collective_and_stack_with_its_instance(fsdp):
    assert_localised_by_both_signals(fsdp, "gloo:all_gather")


def test_without_the_recorder_the_counter_names_a_stopped_ddp_rank_by_both_signals(counted):
    assert_localised_by_both_signals(counted, "ddp:all_reduce")


def test_without_the_recorder_a_slow_ddp_rank_is_reported_as_a_straggler(counted):
    assert_the_slow_rank_is_flagged_within_k_windows(counted)


def test_a_rank_behind_in_both_process_groups_is_named_by_collective_and_stack(two_groups):
    assert_localised_by_both_signals(two_groups, "gloo:all_reduce")


def test_the_stopped_rank_trails_its_peers_in_each_process_group(two_groups):
    ranks = {entry["rank"]: entry for entry in two_groups.hangs[0]["hang"]["ranks"]}
    peer = next(rank for rank in ranks if rank != STALLED)

    # one collective behind in the data-parallel group and one in the loss's group
    assert ranks[peer]["entered"] - ranks[STALLED]["entered"] == 2


def test_a_first_step_longer_than_the_timeout_raises_nothing_and_the_later_hang_is_reported(
    one_rank,
):
    assert one_rank.plan.first_step_seconds > WATCH_TIMEOUT
    assert len(one_rank.hangs) == 1 and one_rank.hangs[0]["step"] == 3


def test_the_hang_is_reported_within_the_watchdog_time_and_a_few_polls_of_its_onset(one_rank):
    assert one_rank.onset is not None and one_rank.reported is not None
    assert WATCH_TIMEOUT <= one_rank.reported - one_rank.onset <= WATCH_TIMEOUT + 30


def test_the_evidence_carries_each_named_rank_s_stack_and_progress(one_rank):
    ranks = {entry["rank"]: entry for entry in one_rank.hangs[0]["hang"]["ranks"]}

    # the peers wait in DDP's all-reduce inside backward; the stopped rank is elsewhere
    assert any(
        "backward" in frame for peer in ranks if peer != STALLED for frame in ranks[peer]["stack"]
    )
    assert not any("backward" in frame for frame in ranks[STALLED]["stack"])
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


def assert_the_slow_rank_is_flagged_within_k_windows(result: WatchResult) -> dict:
    [alarm] = result.stragglers
    evidence = alarm["straggler"]

    assert evidence["flagged"] == [SLOW]
    assert evidence["named_instances"] == [NODES[SLOW]]
    # flagged at the k-th window (windows count from 0), or the one after on a loaded machine
    assert evidence["window"] <= evidence["windows_required"]
    return alarm


def test_a_rank_0_25_s_slower_every_step_under_fsdp2_is_reported_as_a_straggler(fsdp):
    alarm = assert_the_slow_rank_is_flagged_within_k_windows(fsdp)

    scores = {entry["rank"]: entry for entry in alarm["straggler"]["scores"]}
    assert scores[SLOW]["relative"] < 0.7


def test_a_rank_0_25_s_slower_every_step_under_ddp_is_reported_as_a_straggler_once(
    pauses_and_a_straggler,
):
    alarm = assert_the_slow_rank_is_flagged_within_k_windows(pauses_and_a_straggler)
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
