"""Configuration: errors at construction, early and loudly; nothing raises after that."""

from __future__ import annotations

import io
import json
import sys

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
        ({**ENV, "SDC_TOKENS_PER_STEP": "4M"}, "tokens per step '4M'"),
        ({**ENV, "SDC_TOKENS_PER_STEP": "0"}, "must be a whole number of tokens from 1"),
        ({**ENV, "SDC_TOKENS_PER_STEP": "9007199254740992"}, "from 1 to 9007199254740991"),
    ],
)
def test_a_bad_setting_fails_at_construction_naming_the_setting(env, message):
    with pytest.raises(ConfigurationError, match=message):
        EmitterConfig.resolve(env)


def test_tokens_per_step_is_unset_by_default_and_comes_from_the_environment_or_an_argument():
    assert EmitterConfig.resolve(ENV).tokens_per_step is None
    assert EmitterConfig.resolve({**ENV, "SDC_TOKENS_PER_STEP": "4194304"}).tokens_per_step == (
        4_194_304
    )
    assert EmitterConfig.resolve(ENV, tokens_per_step=1024 * 4096).tokens_per_step == 4_194_304


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "many"])
def test_a_tokens_per_step_argument_that_is_no_positive_whole_number_fails_at_construction(value):
    with pytest.raises(ConfigurationError, match="global batch size times the sequence length"):
        EmitterConfig.resolve(ENV, tokens_per_step=value)


def test_the_report_carries_the_tokens_per_step_setup_was_given():
    sink = MemorySink()
    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=sink,
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        tokens_per_step=4096,
    )

    result = emitter.report(load_fixture("alarms", "replay_culprit"))

    assert result.delivered
    assert sink.events[0]["tokens_per_step"] == 4096


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
    assert all(not r.delivered and not r.datapoints and not r.spooled for r in results)


@pytest.fixture
def no_default_emitter(monkeypatch):
    """`setup()` keeps the emitter it builds process-wide; each test here starts without one."""
    from trainer_emitter import emitter as emitter_module

    monkeypatch.setattr(emitter_module, "_default", None)


def test_setup_takes_a_sink_name_as_the_sink_setting(tmp_path, capsys, no_default_emitter):
    # Given setup() with the sink named as README's settings table names it
    from trainer_emitter import setup

    emitter = setup(
        cluster_name="ml-cluster-1",
        sink="emf",
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path,
    )

    # When an alarm is reported
    result = emitter.report(load_fixture("alarms", "nonfinite_transient"))

    # Then the EMF sink wrote it (no region needed for emf) and nothing was spooled
    assert isinstance(emitter.sink, EmfSink)
    assert sorted(result.sent) == ["event", "metrics"] and not result.spooled
    assert '"sdc_report"' in capsys.readouterr().out


@pytest.mark.parametrize("name", ["emff", "kafka", "AWS", ""])
def test_setup_rejects_an_unknown_sink_name(name, no_default_emitter):
    from trainer_emitter import setup

    with pytest.raises(ConfigurationError, match=r"is not one of aws, emf, memory"):
        setup(cluster_name="ml-cluster-1", region="us-west-2", sink=name or "   ")


class _OnlyMetrics:
    def put_metrics(self, namespace, datapoints):
        pass


class _EventNotCallable(_OnlyMetrics):
    put_event = "not a method"


@pytest.mark.parametrize(
    ("sink", "lacks"),
    [
        (object(), "put_metrics and put_event"),
        (_OnlyMetrics(), "put_event"),
        (_EventNotCallable(), "put_event"),
        (42, "put_metrics and put_event"),
    ],
)
def test_setup_rejects_a_sink_object_without_the_ports_methods(sink, lacks, no_default_emitter):
    from trainer_emitter import setup

    with pytest.raises(ConfigurationError, match=f"lacks {lacks}:"):
        setup(cluster_name="ml-cluster-1", region="us-west-2", sink=sink)


def test_a_sink_name_beside_a_config_is_refused_rather_than_ignored():
    config = EmitterConfig.resolve(ENV)

    with pytest.raises(ConfigurationError, match=r"set EmitterConfig\.sink"):
        Emitter(config, sink="memory", rank=0, rank_map=[])


def test_a_config_built_by_hand_with_an_unknown_sink_fails_at_construction():
    config = EmitterConfig(cluster_name="ml-cluster-1", sink="kafka")  # type: ignore[arg-type]

    with pytest.raises(ConfigurationError, match="'kafka'"):
        Emitter(config, rank=0, rank_map=[])


def test_report_of_none_says_nothing_was_sent():
    sink = MemorySink()
    emitter = Emitter(cluster_name="ml-cluster-1", region="us-west-2", sink=sink, rank=0)

    result = emitter.report(None)

    assert result.sent == [] and result.pending == []
    assert not result.delivered and not result.spooled and not result.lost
    assert sink.metrics == [] and sink.events == []


@pytest.fixture
def no_launcher_rank(monkeypatch):
    """No launcher variable set: each test sets what it means."""
    from trainer_emitter.rankmap import RANK_VARIABLES

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SDC_INSTANCE_ID", raising=False)


@pytest.fixture
def no_process_group(monkeypatch):
    """torch.distributed as `process_rank` sees it, with no process group initialized (the tests
    that use it pass the rank map, so nothing else imports torch.distributed)."""
    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(initialized=False))


class _ProcessGroup:
    """torch.distributed as far as `process_rank` looks at it."""

    def __init__(self, initialized: bool, rank: int = 0) -> None:
        self._initialized, self._rank = initialized, rank

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self._initialized

    def get_rank(self) -> int:
        return self._rank


@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({"RANK": "7"}, 7),
        ({"OMPI_COMM_WORLD_RANK": "2"}, 2),
        ({"PMI_RANK": "4"}, 4),
        ({"SLURM_PROCID": "3"}, 3),
        ({"SLURM_PROCID": "1", "RANK": "9"}, 9),
    ],
)
def test_the_spool_file_is_named_for_the_launchers_rank(
    variables, rank, tmp_path, monkeypatch, no_launcher_rank, no_process_group
):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=MemorySink(),
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path,
    )

    assert emitter.rank == rank
    assert emitter.spool_path.name.startswith(f"sdc-spool.rank{rank}.")


def test_the_spool_file_is_named_for_the_process_groups_rank_without_rank_set(
    tmp_path, monkeypatch, no_launcher_rank
):
    # Given init_process_group(rank=5, ...) with no launcher variable set
    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(initialized=True, rank=5))

    emitter = Emitter(
        cluster_name="ml-cluster-1",
        region="us-west-2",
        sink=MemorySink(),
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path,
    )

    assert emitter.rank == 5
    assert emitter.spool_path.name.startswith("sdc-spool.rank5.")


def test_a_process_alone_is_rank_zero_in_its_map_and_its_spool_file(tmp_path, no_launcher_rank):
    emitter = Emitter(
        cluster_name="ml-cluster-1", region="us-west-2", sink=MemorySink(), spool_dir=tmp_path
    )

    assert emitter.rank == 0 and emitter.rank_map.ranks() == [0]
    assert emitter.spool_path.name.startswith("sdc-spool.rank0.")
