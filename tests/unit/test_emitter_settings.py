"""The emitter refuses settings it cannot use, at construction: a keyword that is no setting
(named with the nearest one that is), a namespace CloudWatch would refuse; a rank whose node's
instance id cannot be read is reported with why; a report with nothing to publish never says
delivered."""

from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from trainer_emitter import ConfigurationError, Emitter, EmitterConfig, MemorySink
from trainer_emitter.rankmap import RankMap, local_rank_info

ENV = {"SDC_CLUSTER_NAME": "ml-cluster-1", "AWS_REGION": "us-west-2"}


@pytest.fixture
def no_default_emitter(monkeypatch):
    """`setup()` keeps the emitter it builds process-wide; each test here starts without one."""
    from trainer_emitter import emitter as emitter_module

    monkeypatch.setattr(emitter_module, "_default", None)


def test_setup_refuses_a_misspelled_keyword_naming_it_and_the_nearest_setting(no_default_emitter):
    from trainer_emitter import setup

    with pytest.raises(ConfigurationError) as err:
        setup(cluster_name="ml-cluster-1", job_name="x", dead_line=5, sink="memory", rank=0)

    assert "unknown setting 'dead_line'" in str(err.value)
    assert "did you mean 'deadline'?" in str(err.value)


def test_an_unknown_keyword_far_from_any_setting_is_refused_without_a_guess():
    with pytest.raises(ConfigurationError, match="unknown setting 'colour'") as err:
        EmitterConfig.resolve(ENV, colour="blue")

    assert "did you mean" not in str(err.value)


def test_a_short_keyword_is_matched_to_the_setting_it_abbreviates():
    with pytest.raises(ConfigurationError, match="'job'; did you mean 'job_name'"):
        Emitter(cluster_name="ml-cluster-1", job="x", sink="memory", rank=0, rank_map=[])


def test_an_emitter_argument_given_to_the_config_is_refused_rather_than_ignored():
    # Given `rank`, which setup() and Emitter() take but EmitterConfig does not keep
    # When the config alone is resolved with it / Then it is refused, not dropped
    with pytest.raises(ConfigurationError, match="'rank' is an argument of Emitter"):
        EmitterConfig.resolve(ENV, sink="memory", rank=3)


def test_settings_given_beside_a_config_are_refused_rather_than_ignored():
    config = EmitterConfig.resolve(ENV, sink="memory")

    with pytest.raises(ConfigurationError, match="deadline given with config="):
        Emitter(config, deadline=1.0, rank=0, rank_map=[])


@pytest.mark.parametrize(
    ("namespace", "why"),
    [
        ("SDC Training!", "holds '!'"),
        ("SDC/Tr\u00e4ining", "holds '\u00e4'"),
        ("tab\there", "holds '\\t'"),
        (":SDC", "starts with a colon"),
        ("AWS/EC2", "namespaces AWS keeps for its services"),
        ("   ", "is blank"),
        ("x" * 256, "1 to 255 characters"),
    ],
)
def test_a_namespace_cloudwatch_would_refuse_is_refused_with_why(namespace, why):
    with pytest.raises(ConfigurationError, match="namespace") as err:
        EmitterConfig.resolve(ENV, namespace=namespace)

    assert why in str(err.value)


@pytest.mark.parametrize("namespace", ["SDC/Training", "team-a.sdc_v2/#1: gpu", "x" * 255])
def test_every_character_cloudwatch_allows_in_a_namespace_is_accepted(namespace):
    assert EmitterConfig.resolve(ENV, namespace=namespace).namespace == namespace


def test_a_rank_whose_node_name_holds_no_instance_id_says_what_it_looked_at():
    info = local_rank_info(0, environ={"NODE_NAME": "gpu-node-7"})

    assert info.instance_id is None
    assert "node name 'gpu-node-7' is not of the form hyperpod-i-<instance id>" in (
        info.unmapped or ""
    )
    assert "SDC_USE_IMDS is not 1" in (info.unmapped or "")


def test_the_unmapped_reason_travels_with_the_rank_map_into_the_report():
    # Given rank 13's own entry, as the all-gathered map carries it from its node
    entries = load_fixture("alarms", "rank_map")
    entries[13] = {
        "rank": 13,
        "node": "gpu-node-7",
        "unmapped": "node name 'gpu-node-7' is not of the form hyperpod-i-<instance id>",
    }
    emitter = Emitter(
        cluster_name="ml-cluster-1",
        sink=MemorySink(),
        rank=0,
        rank_map=RankMap(entries),
        region="us-west-2",
    )

    result = emitter.report(load_fixture("alarms", "replay_culprit"))

    (about_13,) = [e for e in result.errors if e.startswith("rank 13 ")]
    assert "has no known instance id: node name 'gpu-node-7' is not of the form" in about_13
    (suspect,) = [s for s in result.detail["suspects"] if s["rank"] == 13]
    assert any("is not of the form hyperpod-i-" in r for r in suspect["reasons"])


def test_a_report_with_no_datapoint_is_not_delivered_and_says_why():
    # Given every rank of the map on a node without a known instance id
    entries = [{"rank": r, "node": "gpu-node-7"} for r in range(32)]
    sink = MemorySink()
    emitter = Emitter(
        cluster_name="ml-cluster-1", region="us-west-2", sink=sink, rank=0, rank_map=entries
    )

    result = emitter.report(load_fixture("alarms", "replay_culprit"))

    assert result.datapoints == [] and sink.metrics == []
    assert not result.delivered
    assert any("not delivered: no datapoint" in e for e in result.errors)


def test_a_report_with_datapoints_that_all_arrived_is_delivered():
    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=MemorySink(),
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
    )

    result = emitter.report(load_fixture("alarms", "replay_culprit"))

    assert result.datapoints and result.delivered
