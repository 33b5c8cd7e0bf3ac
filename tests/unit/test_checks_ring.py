"""The ring replay's pure rules: topology, pairs, culprits, verdicts, and the weight vote."""

from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from trainer_emitter.checks.ring import (
    Agreement,
    TopologyError,
    ambiguous,
    check_topology,
    culprits,
    mismatched_pairs,
    ranks_per_node,
    replica_verdict,
    verdict,
    weight_suspects,
)
from trainer_emitter.contract import VerdictKind


def nodes_of(world: int, per_node: int) -> list[str]:
    return [f"node-{rank // per_node}" for rank in range(world)]


def fixture_nodes() -> list[str]:
    return [entry["node"] for entry in load_fixture("alarms", "rank_map")]


def results(world: int, wrong: dict[int, str] | None = None) -> list[str]:
    return [(wrong or {}).get(rank, f"ok-{rank}") for rank in range(world)]


def test_one_rank_per_node_on_four_nodes_with_offset_one_is_accepted():
    check_topology(nodes_of(4, 1), 1)


def test_eight_ranks_per_node_on_four_nodes_with_offset_eight_is_accepted():
    check_topology(fixture_nodes(), 8)


def test_the_default_offset_is_the_number_of_ranks_per_node():
    assert ranks_per_node(fixture_nodes()) == 8


def test_two_nodes_are_refused():
    with pytest.raises(TopologyError, match="at least 3 nodes"):
        check_topology(nodes_of(16, 8), 8)


def test_an_offset_that_keeps_the_replayer_on_the_targets_node_is_refused():
    with pytest.raises(TopologyError, match="not on three different nodes"):
        check_topology(fixture_nodes(), 1)


def test_an_offset_that_makes_the_third_the_replayer_is_refused():
    with pytest.raises(TopologyError, match="third"):
        check_topology(nodes_of(4, 1), 2)


def test_ranks_without_a_node_name_are_refused():
    with pytest.raises(TopologyError, match="NODE_NAME"):
        check_topology(["a", None, "c", "d"], 1)


def test_a_pair_is_target_then_replayer():
    originals = results(32, {13: "wrong"})
    replays = results(32)  # replays[r] is r's replay of rank r + 8: equal to originals[r + 8]
    replays = [originals[(r + 8) % 32] if r + 8 != 13 else "ok-13" for r in range(32)]

    assert mismatched_pairs(originals, replays, 8) == [[13, 5]]


def test_a_rank_in_two_mismatched_pairs_is_the_culprit_as_in_the_fixture():
    fixture = load_fixture("alarms", "replay_culprit")

    assert culprits(fixture["mismatched_pairs"]) == fixture["culprits"]


def test_a_single_mismatched_pair_names_no_culprit_and_stays_ambiguous():
    pairs = [[13, 5]]

    assert culprits(pairs) == []
    assert ambiguous(pairs, []) == [[13, 5]]


def test_pairs_explained_by_a_culprit_are_not_ambiguous():
    pairs = [[13, 5], [21, 13]]

    assert ambiguous(pairs, culprits(pairs)) == []


@pytest.mark.parametrize(
    ("third_replay", "recompute", "kind", "suspect"),
    [
        ("right", "right", VerdictKind.TRANSIENT, 13),
        ("right", "wrong", VerdictKind.PERSISTENT, 13),
        ("wrong", "right", VerdictKind.REPLAYER, 5),
        ("other", "right", VerdictKind.UNATTRIBUTABLE, None),
    ],
)
def test_the_third_rank_and_the_recompute_decide_the_verdict(
    third_replay, recompute, kind, suspect
):
    # The target (13) originally computed "wrong"; its replayer (5) computed "right".
    got = verdict(
        [13, 5],
        21,
        original="wrong",
        replay="right",
        third_replay=third_replay,
        recompute=recompute,
    )

    assert got == {"pair": [13, 5], "third": 21, "suspect": suspect, "kind": kind.value}


def test_a_transient_verdict_has_the_fixture_shape():
    fixture = load_fixture("alarms", "nonfinite_transient")

    got = verdict([13, 5], 21, original="nan", replay="ok", third_replay="ok", recompute="ok")

    assert [got] == fixture["verdicts"]


def test_replicas_that_agree_raise_nothing():
    assert weight_suspects(["a", "a", "a", "a"]) == (True, [])


def test_a_replica_outside_a_strict_majority_is_named():
    assert weight_suspects(["a", "b", "a", "a"]) == (False, [1])


def test_two_of_three_are_a_strict_majority():
    assert weight_suspects(["a", "a", "b"]) == (False, [2])


def test_a_two_two_split_has_no_strict_majority_and_names_nobody():
    assert weight_suspects(["a", "b", "a", "b"]) == (False, None)


def test_copies_that_agree_name_nobody():
    got = replica_verdict(["a", "a"], [5, 13])

    assert (got.agree, got.suspects, got.agreement, got.alarm) == (True, [], Agreement.AGREE, None)


def test_a_verdict_names_the_copy_outside_the_majority_by_its_global_rank():
    got = replica_verdict(["a", "b", "a"], [5, 13, 21])

    assert (got.agree, got.suspects, got.agreement) == (False, [13], Agreement.MINORITY)


def test_two_copies_that_differ_cannot_be_attributed():
    got = replica_verdict(["a", "b"], [5, 13])

    assert (got.agree, got.suspects, got.agreement) == (False, None, Agreement.TWO_DISAGREE)


def test_a_two_two_split_of_copies_is_no_strict_majority():
    got = replica_verdict(["a", "b", "b", "a"], [0, 1, 2, 3])

    assert (got.agree, got.suspects, got.agreement) == (False, None, Agreement.NO_MAJORITY)


def test_a_verdict_needs_one_row_of_fingerprints_per_rank():
    with pytest.raises(ValueError, match="3 fingerprint rows for 2 ranks"):
        replica_verdict(["a", "a", "b"], [0, 1])
