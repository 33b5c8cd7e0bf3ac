"""Configuration: errors at construction, early and loudly; nothing raises after that."""

from __future__ import annotations

import io
import json

import pytest

from tests.conftest import load_fixture
from trainer_emitter import ConfigurationError, EmfSink, Emitter, EmitterConfig, MemorySink
from trainer_emitter.rankmap import RankMap, local_rank_info

ENV = {"SDC_CLUSTER_NAME": "ml-cluster-1", "AWS_REGION": "us-west-2"}


def test_settings_come_from_the_environment_with_documented_defaults():
    config = EmitterConfig.resolve(ENV)

    assert (config.cluster_name, config.region, config.deadline, config.sink) == (
        "ml-cluster-1",
        "us-west-2",
        3.0,
        "aws",
    )
    assert config.namespace == "SDC/Training"


def test_arguments_win_over_the_environment():
    config = EmitterConfig.resolve(ENV, cluster_name="other", deadline=1.5, namespace="SDC/Test")

    assert (config.cluster_name, config.deadline, config.namespace) == ("other", 1.5, "SDC/Test")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AWS_REGION": "us-west-2"}, "cluster name missing"),
        ({**ENV, "SDC_CLUSTER_NAME": "bad name!"}, "is not a HyperPod cluster name"),
        ({"SDC_CLUSTER_NAME": "c1"}, "no AWS region"),
        ({**ENV, "SDC_DEADLINE_SECONDS": "soon"}, "is not a number of seconds"),
        ({**ENV, "SDC_DEADLINE_SECONDS": "0"}, "must be more than 0"),
        ({**ENV, "SDC_DEADLINE_SECONDS": "nan"}, "must be more than 0"),
        ({**ENV, "SDC_SINK": "kafka"}, "is not one of aws, emf, memory"),
        ({**ENV, "SDC_ENDPOINT_URL": "localhost:5000"}, "must start with http"),
    ],
)
def test_a_bad_setting_fails_at_construction_naming_the_setting(env, message):
    with pytest.raises(ConfigurationError, match=message):
        EmitterConfig.resolve(env)


def test_a_malformed_explicit_instance_id_fails_at_construction():
    with pytest.raises(ValueError, match="SDC_INSTANCE_ID='i-123' is not 'i-' followed by 8 or 17"):
        local_rank_info(0, environ={"SDC_INSTANCE_ID": "i-123"})


def test_a_rank_map_with_a_malformed_instance_id_fails_at_construction():
    with pytest.raises(ValueError, match="rank 3: instance id 'i-XYZ'"):
        RankMap([{"rank": 3, "node": "n", "instance_id": "i-XYZ"}])


def test_a_rank_map_naming_one_rank_twice_differently_fails():
    with pytest.raises(ValueError, match="names rank 0 twice"):
        RankMap(
            [
                {"rank": 0, "instance_id": "i-0aa00000000000001"},
                {"rank": 0, "instance_id": "i-0bb00000000000002"},
            ]
        )


@pytest.mark.parametrize(
    ("environ", "instance_id"),
    [
        ({"NODE_NAME": "hyperpod-i-0aa00000000000001"}, "i-0aa00000000000001"),
        ({"NODE_NAME": "ip-10-0-0-1.ec2.internal", "SDC_INSTANCE_ID": "i-0123abcd"}, "i-0123abcd"),
        ({"NODE_NAME": "ip-10-0-0-1.ec2.internal"}, None),
    ],
)
def test_a_rank_learns_its_instance_from_node_name_or_explicit_id_and_never_guesses(
    environ, instance_id
):
    info = local_rank_info(5, environ=environ)

    assert info.rank == 5
    assert info.instance_id == instance_id
    assert info.mapped is (instance_id is not None)


def test_without_torch_distributed_the_map_is_this_rank_alone(monkeypatch):
    monkeypatch.setenv("NODE_NAME", "hyperpod-i-0cc00000000000003")
    monkeypatch.setenv("RANK", "17")
    monkeypatch.delenv("SDC_INSTANCE_ID", raising=False)

    emitter = Emitter(cluster_name="ml-cluster-1", sink=MemorySink(), region="us-west-2")

    assert emitter.rank_map.to_list() == [
        {
            "rank": 17,
            "node_name": "hyperpod-i-0cc00000000000003",
            "instance_id": "i-0cc00000000000003",
            "gpu_uuid": None,
        }
    ]


def test_a_memory_sink_records_what_report_sends_and_no_call_is_made_when_nothing_fires():
    sink = MemorySink()
    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=sink,
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
    )

    result = emitter.report(load_fixture("alarms", "weights_suspect"))

    assert result.delivered and not result.spooled
    assert [(ns, d.metric.value, d.instance_id) for ns, d in sink.metrics] == [
        ("SDC/Training", "sdc_divergent_tensors", "i-0aa00000000000001")
    ]
    assert [e["report_id"] for e in sink.events] == [result.report_id]


def test_the_emf_sink_writes_one_document_per_instance_and_the_full_report():
    stream = io.StringIO()
    emitter = Emitter(
        cluster_name="ml-cluster-1",
        sink=EmfSink(stream),
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        region="us-west-2",
    )

    emitter.report(load_fixture("alarms", "nonfinite_transient"))

    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    directive = first["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "SDC/Training"
    assert directive["Dimensions"] == [["ClusterName", "InstanceId"]]
    assert {m["Name"] for m in directive["Metrics"]} == {
        "sdc_nonfinite_grad",
        "sdc_replay_mismatch",
    }
    assert (first["InstanceId"], first["sdc_nonfinite_grad"]) == ("i-0bb00000000000002", 1.0)
    assert second["sdc_report"]["step"] == 25


def test_report_never_raises_even_when_the_sink_blows_up(tmp_path):
    class Exploding(MemorySink):
        def put_event(self, detail):
            raise RuntimeError("boom")

    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=Exploding(),
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path,
    )

    result = emitter.report(load_fixture("alarms", "replay_culprit"))

    assert result.sent == ["metrics"] and result.pending == ["event"]
    assert result.spooled and not result.lost
    (line,) = result.spool_path.read_text().splitlines()
    assert json.loads(line)["pending"] == ["event"]


def test_a_step_where_no_check_fired_makes_no_call_at_all():
    class Counting(MemorySink):
        calls = 0

        def put_metrics(self, namespace, datapoints):
            Counting.calls += 1

        def put_event(self, detail):
            Counting.calls += 1

    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=Counting(),
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
    )

    results = [emitter.report(None) for _ in range(100)]

    assert Counting.calls == 0
    assert all(r.delivered and not r.datapoints and not r.spooled for r in results)
