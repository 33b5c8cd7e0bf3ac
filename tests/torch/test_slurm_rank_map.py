"""A 4-rank gloo job launched as Slurm launches one on HyperPod: no `NODE_NAME`, each rank with
slurmd's `SLURMD_NODENAME` (`ip-…`) and the node's resource config. The checks start (the ring
replay finds its peers on other nodes) and the all-gathered rank map names every instance."""

from __future__ import annotations

import os
import queue
import traceback
from typing import Any

import pytest

from tests.conftest import fixture_path, load_fixture
from tests.torch.harness import run_on_ranks
from tests.torch.scenarios import WORLD

pytestmark = pytest.mark.torch


def workers() -> list[dict[str, Any]]:
    """The resource config's worker group, one instance per rank."""
    (group,) = [
        g
        for g in load_fixture("events", "hyperpod_resource_config")["InstanceGroups"]
        if g["Name"] == "worker-group-1"
    ]
    assert len(group["Instances"]) == WORLD
    return group["Instances"]


def slurm_node_name(instance: dict[str, Any]) -> str:
    return "ip-" + instance["CustomerIpAddress"].replace(".", "-")


def worker(rank: int, port: int, config: str, results: queue.Queue[Any]) -> None:
    """One rank as srun starts it: its own node, `SLURM_PROCID`, no Kubernetes variable."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from trainer_emitter.checks import SdcChecks

    os.environ.pop("NODE_NAME", None)
    os.environ.pop("SDC_INSTANCE_ID", None)
    os.environ.update(
        {
            "SLURMD_NODENAME": slurm_node_name(workers()[rank]),
            "SLURM_PROCID": str(rank),
            "SDC_RESOURCE_CONFIG": config,
        }
    )
    torch.set_num_threads(1)
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
        )
        net = torch.nn.Linear(4, 2)
        checks = SdcChecks(
            DistributedDataParallel(net),
            torch.optim.SGD(net.parameters(), lr=0.01),
            lambda model, batch: model(batch).sum(),
        )
        results.put(("rank_map", rank, (checks.rank_map.to_list(), checks.offset)))
        dist.barrier()
        dist.destroy_process_group()
        results.put(("done", rank, None))
    except BaseException:
        results.put(("error", rank, traceback.format_exc()))


def test_a_slurm_job_maps_every_rank_to_its_instance_and_starts_the_checks():
    config = str(fixture_path("events", "hyperpod_resource_config"))

    seen = run_on_ranks(worker, (config,), ["rank_map"], timeout=300, what="a Slurm job")

    expected = [
        (rank, slurm_node_name(instance), instance["InstanceId"])
        for rank, instance in enumerate(workers())
    ]
    for rank_map, offset in seen["rank_map"]:
        assert [(e["rank"], e["node_name"], e["instance_id"]) for e in rank_map] == expected
        assert offset == 1  # one rank per node: each rank's replayer is on the next node
