"""A rank on a Slurm-orchestrated HyperPod node: node name from slurmd, instance id from the
resource config HyperPod writes on the node (`tests/events/hyperpod_resource_config.json`).

Rank -> `SLURMD_NODENAME` (`ip-10-1-69-242`) -> the one entry whose address names that host ->
its `InstanceId`; anything less than exactly one entry leaves the rank unmapped, with a warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fixture_path, load_fixture
from trainer_emitter.checks.ring import TopologyError, check_topology
from trainer_emitter.rankmap import local_rank_info
from trainer_emitter.resource_config import instance_id_from_resource_config

WORKER = "ip-10-1-70-3"  # worker-group-1-2's CustomerIpAddress 10.1.70.3
WORKER_ID = "i-0bb00000000000002"


@pytest.fixture
def config_path() -> str:
    return str(fixture_path("events", "hyperpod_resource_config"))


def write(tmp_path: Path, config: Any) -> str:
    path = tmp_path / "resource_config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return str(path)


def slurm_env(node: str, config: str, **more: str) -> dict[str, str]:
    return {"SLURMD_NODENAME": node, "SDC_RESOURCE_CONFIG": config, "SLURM_PROCID": "9", **more}


def test_a_slurm_rank_maps_its_node_to_the_worker_instance_the_resource_config_lists(config_path):
    info = local_rank_info(environ=slurm_env(WORKER, config_path))

    assert (info.rank, info.node_name, info.instance_id) == (9, WORKER, WORKER_ID)
    assert info.mapped


@pytest.mark.parametrize(
    ("node", "instance_id"),
    [
        ("ip-10-1-69-242", "i-0aa00000000000001"),
        ("ip-10-1-124-5", "i-0dd00000000000004"),
        ("ip-10-1-33-17", "i-0c0000000000000c1"),  # the controller: a node of the file too
        ("ip-10-1-96-24.us-west-2.compute.internal", "i-0cc00000000000003"),
        ("worker-group-1-3", "i-0cc00000000000003"),  # named by InstanceName
    ],
)
def test_every_node_of_the_file_maps_to_its_own_instance(config_path, node, instance_id):
    assert instance_id_from_resource_config(node, config_path) == instance_id


def test_a_prefix_of_another_node_s_address_matches_nothing(config_path, caplog):
    # 10.1.70.3 is a worker; 10.1.70.30 is not, and must not take its id
    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        assert instance_id_from_resource_config("ip-10-1-70-30", config_path) is None

    assert "'ip-10-1-70-30' is not in HyperPod resource config" in caplog.text
    assert config_path in caplog.text


def test_an_agent_address_names_no_node(config_path):
    # worker-group-1-1's AgentIpAddress is 172.16.60.12: HyperPod's network, no host's name
    assert instance_id_from_resource_config("ip-172-16-60-12", config_path) is None


def test_two_entries_matching_the_node_leave_it_unmapped_with_a_warning(tmp_path, caplog):
    config = load_fixture("events", "hyperpod_resource_config")
    workers = config["InstanceGroups"][1]["Instances"]
    workers.append({**workers[1], "InstanceId": "i-0ee00000000000005"})  # 10.1.70.3 twice
    path = write(tmp_path, config)

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        info = local_rank_info(environ=slurm_env(WORKER, path))

    assert info.instance_id is None
    assert not info.mapped
    assert f"node '{WORKER}' matches 2 entries of HyperPod resource config {path}" in caplog.text
    assert "'i-0bb00000000000002', 'i-0ee00000000000005'" in caplog.text


def test_a_torn_resource_config_leaves_the_rank_unmapped_with_a_warning(
    tmp_path, config_path, caplog
):
    torn = Path(config_path).read_text()[:700]
    path = write(tmp_path, torn)

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        info = local_rank_info(environ=slurm_env(WORKER, path))

    assert (info.node_name, info.instance_id) == (WORKER, None)
    assert f"{path} is not a HyperPod resource config" in caplog.text
    assert repr(WORKER) in caplog.text


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ([{"InstanceId": WORKER_ID}], "the top level is a list, not an object"),
        ({"Nodes": []}, "it has no 'InstanceGroups' list"),
        ({"InstanceGroups": [{"Name": "g"}]}, "InstanceGroups[0] has no 'Instances' list"),
        ({"InstanceGroups": [{"Instances": ["10.1.70.3"]}]}, "InstanceGroups[0].Instances[0]"),
    ],
)
def test_a_foreign_file_leaves_the_rank_unmapped_and_says_what_is_wrong(
    tmp_path, caplog, config, why
):
    path = write(tmp_path, config)

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        assert instance_id_from_resource_config(WORKER, path) is None

    assert why in caplog.text


def test_an_unreadable_resource_config_leaves_the_rank_unmapped_with_a_warning(tmp_path, caplog):
    directory = tmp_path / "resource_config.json"
    directory.mkdir()  # reading a directory fails the way an unreadable file does

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        info = local_rank_info(environ=slurm_env(WORKER, str(directory)))

    assert info.instance_id is None
    assert f"HyperPod resource config {directory} could not be read" in caplog.text


def test_an_entry_whose_instance_id_is_malformed_maps_nothing(tmp_path, caplog):
    config = load_fixture("events", "hyperpod_resource_config")
    config["InstanceGroups"][1]["Instances"][1]["InstanceId"] = "i-XYZ"
    path = write(tmp_path, config)

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        assert instance_id_from_resource_config(WORKER, path) is None

    assert "InstanceId 'i-XYZ', which is not an instance id" in caplog.text


def test_no_resource_config_at_the_default_place_is_quiet(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(
        "trainer_emitter.resource_config.RESOURCE_CONFIG_PATH", str(tmp_path / "absent.json")
    )

    with caplog.at_level(logging.DEBUG, logger="trainer_emitter"):
        info = local_rank_info(environ={"SLURMD_NODENAME": WORKER, "SLURM_PROCID": "0"})

    assert (info.node_name, info.instance_id) == (WORKER, None)
    assert caplog.records == []


def test_the_default_place_is_read_when_no_variable_names_another(monkeypatch, config_path):
    monkeypatch.setattr("trainer_emitter.resource_config.RESOURCE_CONFIG_PATH", config_path)

    info = local_rank_info(environ={"SLURMD_NODENAME": WORKER, "SLURM_PROCID": "0"})

    assert info.instance_id == WORKER_ID


def test_a_resource_config_the_variable_names_but_that_is_missing_is_warned_about(tmp_path, caplog):
    missing = str(tmp_path / "absent.json")

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        assert local_rank_info(environ=slurm_env(WORKER, missing)).instance_id is None

    assert f"HyperPod resource config {missing} (SDC_RESOURCE_CONFIG) does not exist" in caplog.text


def test_an_explicit_instance_id_the_resource_config_agrees_with_maps_the_rank(config_path):
    info = local_rank_info(environ=slurm_env(WORKER, config_path, SDC_INSTANCE_ID=WORKER_ID))

    assert info.instance_id == WORKER_ID


def test_an_explicit_instance_id_the_resource_config_contradicts_leaves_the_rank_unmapped(
    config_path, caplog
):
    # srun passes the submitting shell's environment to every rank: one id for all of them
    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        info = local_rank_info(
            environ=slurm_env(WORKER, config_path, SDC_INSTANCE_ID="i-0aa00000000000001")
        )

    assert info.instance_id is None
    assert f"lists node {WORKER} as {WORKER_ID}" in caplog.text


def test_an_explicit_instance_id_holds_where_no_resource_config_lists_the_node(tmp_path):
    missing = str(tmp_path / "absent.json")

    info = local_rank_info(environ=slurm_env(WORKER, missing, SDC_INSTANCE_ID="i-0123abcd"))

    assert info.instance_id == "i-0123abcd"


def test_slurmd_s_node_name_wins_over_a_node_name_the_job_script_exported(config_path):
    # `export NODE_NAME=...` in an sbatch script reaches every rank through srun
    both = local_rank_info(
        environ=slurm_env(WORKER, config_path, NODE_NAME="hyperpod-i-0aa00000000000001")
    )
    kubernetes_only = local_rank_info(environ={"NODE_NAME": "hyperpod-i-0aa00000000000001"})

    assert (both.node_name, both.instance_id) == (WORKER, WORKER_ID)
    assert kubernetes_only.instance_id == "i-0aa00000000000001"


def test_an_eks_rank_maps_as_before_whatever_resource_config_lies_beside_it(config_path):
    info = local_rank_info(
        4,
        environ={"NODE_NAME": "hyperpod-i-0cc00000000000003", "SDC_RESOURCE_CONFIG": config_path},
    )

    assert (info.rank, info.node_name, info.instance_id) == (
        4,
        "hyperpod-i-0cc00000000000003",
        "i-0cc00000000000003",
    )


def test_a_rank_with_neither_variable_has_no_node_name_and_no_instance(config_path):
    info = local_rank_info(environ={"SDC_RESOURCE_CONFIG": config_path, "RANK": "2"})

    assert (info.node_name, info.instance_id) == (None, None)


def test_a_rank_without_a_node_name_is_told_of_both_variables():
    with pytest.raises(TopologyError, match=r"set NODE_NAME.*SLURMD_NODENAME"):
        check_topology(["a", None, "c", "d"], 1)


def test_names_of_another_type_in_an_entry_are_no_names(tmp_path):
    config = load_fixture("events", "hyperpod_resource_config")
    entry = config["InstanceGroups"][1]["Instances"][1]
    entry["InstanceName"] = ["ip-10-1-70-3"]
    entry["CustomerIpAddress"] = {"v4": "10.1.70.3"}
    path = write(tmp_path, config)

    assert instance_id_from_resource_config(WORKER, path) is None


def test_a_foreign_file_nested_past_the_parser_s_depth_is_a_warning_not_an_exception(
    tmp_path, caplog
):
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000)

    with caplog.at_level(logging.WARNING, logger="trainer_emitter"):
        assert instance_id_from_resource_config(WORKER, path) is None

    assert f"{path} is not a HyperPod resource config" in caplog.text
