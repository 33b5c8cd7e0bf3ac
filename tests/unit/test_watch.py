"""The training watch's pure parts: localising a hang, the straggler scores, the watchdog's
clock and sections (on a fake clock and a store in memory), and the evidence a report carries.
The real multi-rank job is tests/torch/test_watch_job.py."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from trainer_emitter.contract import NAMESPACE, Metric, Role, report_schema
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap
from trainer_emitter.watch import HangWatchdog, MemoryStore, RankState, Section, localise
from trainer_emitter.watch.straggler import RankTimes, StragglerScores

INSTANCES = ("i-0aa00000000000001", "i-0bb00000000000002", "i-0cc00000000000003")
RANK_MAP = RankMap([{"rank": r, "node_name": f"hyperpod-{INSTANCES[r // 2]}"} for r in range(6)])
INSTANCE_OF = {r: RANK_MAP.get(r).instance_id for r in range(6)}
WAITING = ("train.py:10 main", "train.py:40 step", "distributed_c10d.py:3 all_reduce")
ELSEWHERE = ("train.py:10 main", "train.py:38 step", "loader.py:7 next")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def state(rank, *, entered=5, completed=4, stack=WAITING, since=10.0, exempt=False, section=None):
    return RankState(
        rank=rank,
        entered=entered,
        completed=completed,
        collective="all_reduce" if entered > completed else None,
        section=section,
        seconds_since_progress=since,
        exempt=exempt,
        stack=stack,
    )


def waiting_but(*odd: int, world: int = 6) -> dict[int, RankState]:
    return {r: state(r, entered=4, stack=ELSEWHERE) if r in odd else state(r) for r in range(world)}


def test_one_rank_missing_with_an_odd_stack_is_localised_by_both_signals():
    verdict = localise(waiting_but(3), 6, INSTANCE_OF, timeout=5)

    assert verdict.hung
    assert (verdict.missing, verdict.odd_stack) == ((3,), (3,))
    assert verdict.localised_instance == INSTANCES[1]
    assert [s.value for s in verdict.signals] == ["collective", "stack"]


def test_two_missing_ranks_on_one_instance_still_name_it():
    verdict = localise(waiting_but(2, 3), 6, INSTANCE_OF, timeout=5)

    assert verdict.localised_instance == INSTANCES[1]


def test_missing_ranks_on_two_instances_localise_nothing_and_name_both():
    verdict = localise(waiting_but(1, 3), 6, INSTANCE_OF, timeout=5)

    assert verdict.hung and verdict.localised_instance is None
    assert verdict.named_instances == (INSTANCES[0], INSTANCES[1])
    assert verdict.signals == ()


def test_a_silent_rank_is_named_by_the_collective_signal_alone():
    states = waiting_but()
    del states[5]

    verdict = localise(states, 6, INSTANCE_OF, timeout=5)

    assert verdict.silent == (5,)
    assert verdict.localised_instance == INSTANCES[2]
    assert [s.value for s in verdict.signals] == ["collective"]


def test_signals_that_disagree_localise_nothing():
    states = waiting_but(0)  # rank 0 missing (instance 0) ...
    states[4] = state(4, stack=("odd.py:1 spin",))  # ... but rank 4 has another odd stack

    verdict = localise(states, 6, INSTANCE_OF, timeout=5)

    assert verdict.localised_instance is None


def test_a_rank_in_a_long_section_means_no_hang():
    states = waiting_but()
    states[0] = state(0, entered=4, section="checkpoint_save", exempt=True, since=0.0)

    verdict = localise(states, 6, INSTANCE_OF, timeout=5)

    assert not verdict.hung and "long section" in verdict.why


def test_a_rank_that_moved_lately_means_no_hang():
    states = waiting_but()
    states[2] = state(2, since=1.0)

    assert not localise(states, 6, INSTANCE_OF, timeout=5).hung


def test_the_hang_alarm_bounds_what_it_carries():
    states = {r: state(r) for r in range(200)}
    states[7] = state(7, entered=4, stack=ELSEWHERE * 20)

    alarm = localise(states, 200, {r: None for r in range(200)}, timeout=5).alarm(step=9, timeout=5)
    ranks = alarm["hang"]["ranks"]

    assert [r["rank"] for r in ranks] == [7, 0]
    assert len(ranks[0]["stack"]) == 24
    assert alarm["hang"]["ranks_left_out"] == 198


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watchdog(
    clock: Clock, store: MemoryStore | None = None, *, first_step_done: bool = True, **settings
) -> tuple[HangWatchdog, list]:
    """A one-rank watchdog on `clock` (timeout 10 s, sections 60 s), past its first step unless
    `first_step_done` is False."""
    hangs: list = []
    dog = HangWatchdog(
        store or MemoryStore(),
        rank=0,
        world=1,
        instance_of={0: INSTANCES[0]},
        on_hang=hangs.append,
        timeout=10,
        section_timeout=60,
        gather_seconds=0,
        clock=clock,
        **settings,
    )
    if first_step_done:
        dog.progress(step=1)
    return dog, hangs


def test_no_progress_for_the_timeout_is_judged_and_reported_once():
    clock = Clock()
    dog, hangs = watchdog(clock)
    clock.now += 9
    assert dog.tick() is None

    clock.now += 2
    verdict = dog.tick()
    clock.now += 20
    dog.tick()

    assert verdict is not None and verdict.hung
    assert len(hangs) == 1  # the store says it was reported: the second verdict is not


def test_a_progress_mark_restarts_the_clock():
    clock = Clock()
    dog, _ = watchdog(clock)
    clock.now += 9
    dog.progress(step=3)
    clock.now += 9

    assert dog.tick() is None and dog.last_step == 3


@pytest.mark.parametrize(
    "section",
    [Section.DATA_LOADING, Section.CHECKPOINT_SAVE, Section.CHECKPOINT_LOAD, Section.COMPILE],
)
def test_an_exempt_section_may_outlast_the_timeout_but_not_its_own_limit(section):
    clock = Clock()
    dog, hangs = watchdog(clock)
    with dog.section(section):
        clock.now += 59
        assert dog.tick() is None and dog.state().exempt
        clock.now += 2
        verdict = dog.tick()

    assert verdict is not None and verdict.hung and len(hangs) == 1


def test_forward_backward_is_no_exemption():
    clock = Clock()
    dog, hangs = watchdog(clock)
    with dog.section(Section.FORWARD_BACKWARD):
        clock.now += 11
        dog.tick()

    assert len(hangs) == 1


def test_an_unknown_section_name_is_refused_by_name():
    dog, _ = watchdog(Clock())
    with pytest.raises(ValueError, match="'warmup' is not a valid Section"), dog.section("warmup"):
        pass


def test_the_watchdog_answers_another_rank_s_request_with_its_state():
    store, clock = MemoryStore(), Clock()
    dog, _ = watchdog(clock, store)
    with dog.collective("all_reduce"):
        store.add("sdc-watch/requests", 1)
        dog.tick()
        answered = RankState.from_json(__import__("json").loads(store.get("sdc-watch/1/0")))

    assert (answered.entered, answered.completed, answered.collective) == (1, 0, "all_reduce")
    assert any("test_the_watchdog_answers" in frame for frame in answered.stack)


def times(*steps: float) -> dict[int, RankTimes]:
    return {
        rank: RankTimes(step=s, sections={"forward_backward": s}) for rank, s in enumerate(steps)
    }


def test_scores_are_reference_median_over_own_median():
    scores = StragglerScores().score(0, times(1.0, 2.0, 1.0))

    assert scores.relative == {0: 1.0, 1: 0.5, 2: 1.0}
    assert scores.section_scores[1]["forward_backward"] == (0.5, 1.0)


def test_a_rank_below_the_threshold_for_k_windows_is_flagged_once_and_again_after_recovery():
    scorer = StragglerScores(threshold=0.7, windows=2)

    flagged = [
        scorer.score(w, times(*s)).flagged
        for w, s in enumerate([(1, 2, 1), (1, 2, 1), (1, 2, 1), (1, 1, 1), (1, 2, 1), (1, 2, 1)])
    ]

    assert flagged == [(), (1,), (), (), (), (1,)]


def test_the_whole_job_slowing_down_flags_nobody_but_lowers_individual_scores():
    scorer = StragglerScores(windows=1)
    scorer.score(0, times(1, 1, 1))

    slower = scorer.score(1, times(3, 3, 3))

    assert slower.flagged == ()
    assert slower.individual == {
        0: pytest.approx(1 / 3),
        1: pytest.approx(1 / 3),
        2: pytest.approx(1 / 3),
    }


@pytest.mark.parametrize(("threshold", "windows"), [(0, 3), (1.5, 3), (0.7, 0)])
def test_bad_straggler_settings_are_refused(threshold, windows):
    with pytest.raises(ValueError, match="straggler"):
        StragglerScores(threshold, windows)


def build(alarm):
    report = build_report(
        alarm,
        RANK_MAP,
        cluster_name="c1",
        job_name="j",
        namespace=NAMESPACE,
        report_id="watch-report-1",
        now=NOW,
    )
    jsonschema.validate(
        report.detail, report_schema("2"), format_checker=jsonschema.FormatChecker()
    )
    return report


def test_a_localised_hang_report_is_version_2_with_a_culprit_on_that_instance():
    report = build(localise(waiting_but(3), 6, INSTANCE_OF, timeout=5).alarm(step=9, timeout=5))

    assert report.detail["schema_version"] == "2"
    assert [(s["rank"], s["role"]) for s in report.detail["suspects"]] == [(3, Role.CULPRIT)]
    assert [(d.metric, d.instance_id) for d in report.datapoints] == [(Metric.HANG, INSTANCES[1])]
    assert "hang" not in report.detail["alarm"]  # carried once, cleaned


def test_a_hang_naming_nobody_involves_every_instance_and_is_ambiguous():
    states = {r: state(r, entered=4, completed=4) for r in range(6)}  # nobody in a collective
    report = build(localise(states, 6, INSTANCE_OF, timeout=5).alarm(step=9, timeout=5))

    assert report.detail["ambiguous"] is True
    assert sorted({d.instance_id for d in report.datapoints}) == sorted(INSTANCES)


def test_malformed_hang_evidence_is_left_out_with_an_error_and_the_rest_kept():
    alarm = localise(waiting_but(3), 6, INSTANCE_OF, timeout=5).alarm(step=9, timeout=5)
    alarm["hang"]["missing_ranks"].append("three")
    alarm["hang"]["localised_instance"] = "node-7"

    report = build(alarm)

    assert report.detail["hang"]["missing_ranks"] == [3]
    assert report.detail["hang"]["localised_instance"] is None
    assert any("'three'" in e for e in report.detail["errors"])
    assert any("node-7" in e for e in report.detail["errors"])
    assert report.detail["ambiguous"] is True  # not localised any more: involved, not culprit


def test_a_hang_alarm_without_evidence_publishes_nothing_and_says_why():
    report = build({"check": "hang", "step": 4})

    assert report.datapoints == []
    assert any("'hang' evidence is missing" in e for e in report.detail["errors"])


def test_a_straggler_on_one_instance_is_a_culprit_and_on_two_is_involved():
    scorer = StragglerScores(windows=1)
    one = scorer.score(0, times(1, 1, 1, 1, 1, 3)).alarm(
        step=10, window_steps=5, threshold=0.7, windows=1, instance_of=INSTANCE_OF
    )
    two = (
        StragglerScores(windows=1)
        .score(0, times(3, 1, 1, 1, 1, 3))
        .alarm(step=10, window_steps=5, threshold=0.7, windows=1, instance_of=INSTANCE_OF)
    )

    one_report, two_report = build(one), build(two)

    assert [(d.metric, d.instance_id) for d in one_report.datapoints] == [
        (Metric.STRAGGLER, INSTANCES[2])
    ]
    assert one_report.detail["instances"][0]["role"] == Role.CULPRIT
    assert two_report.detail["ambiguous"] is True
    assert two_report.detail["straggler"]["flagged"] == [0, 5]


def test_an_sdc_report_stays_version_1():
    report = build_report(
        {"step": 3, "check": "compute", "culprits": [1], "suspect_window": [1, 3]},
        RANK_MAP,
        cluster_name="c1",
        job_name="j",
        namespace=NAMESPACE,
        report_id="sdc-report-1",
        now=NOW,
    )

    jsonschema.validate(
        report.detail, report_schema("1"), format_checker=jsonschema.FormatChecker()
    )
    assert report.detail["schema_version"] == "1"
