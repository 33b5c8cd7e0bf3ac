"""Which node, instance and GPU each training rank runs on.

Every rank learns its own place once (`local_rank_info`), and the job all-gathers the map at
start (`gather_rank_map`). A rank whose instance cannot be known is kept as unmapped: the
emitter reports it as such and never guesses an instance id.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from trainer_emitter.contract import instance_id_from_node_name, is_instance_id
from trainer_emitter.resource_config import (
    RESOURCE_CONFIG_PATH,
    RESOURCE_CONFIG_VARIABLE,
    instance_id_from_resource_config,
)

log = logging.getLogger("trainer_emitter")

IMDS_ENDPOINT = "http://169.254.169.254"
MAX_UNMAPPED_REASON = 400
"""The most characters of a rank's `unmapped` reason kept from a gathered entry."""

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
"""Where launchers put a process's global rank, first found wins: torchrun and the PyTorch
operators (`RANK`), Open MPI, MPICH and Intel MPI (`PMI_RANK`), Slurm's `srun` (`SLURM_PROCID`:
last, since under `srun ... torchrun` it numbers the launchers, not the ranks)."""

NODE_NAME_VARIABLES = ("SLURMD_NODENAME", "NODE_NAME")
"""Where a rank finds its node's name, first found wins: Slurm (`SLURMD_NODENAME`, which slurmd
sets on each node for every job step, and which `srun`, `torchrun` and MPI launchers pass on to
the ranks), then Kubernetes (`NODE_NAME`, which the pod spec sets from `spec.nodeName`; never set
with slurmd). Slurm's comes first because `srun` passes the submitting shell's environment to
every rank (`--export=ALL`): a `NODE_NAME` exported there names one node for all ranks, while
slurmd sets its own variable on each node. The host name is not
read: a host's name need not be its scheduler's name for it (Slurm's `NodeName` and
`NodeHostname` may differ, a container may have a host name of its own), and a wrong node name
would pair ring-replay peers on one machine or match the wrong resource config entry."""


@dataclass(frozen=True, slots=True)
class RankInfo:
    rank: int
    node_name: str | None = None
    instance_id: str | None = None
    gpu_uuid: str | None = None
    unmapped: str | None = None
    """Why this rank has no instance id (what it looked at), as the rank found it: the report
    names it beside the rank, since the reporting rank cannot see another rank's node."""

    @property
    def mapped(self) -> bool:
        return self.instance_id is not None

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        if found["unmapped"] is None:  # a mapped rank's entry is as it always was
            del found["unmapped"]
        return found

    @classmethod
    def from_mapping(cls, entry: Mapping[str, Any]) -> RankInfo:
        """An entry of a rank map as JSON has it: `rank`, `node` or `node_name`, `instance_id`,
        `gpu_uuid`. A malformed instance id raises: a wrong map must fail at start, not at the
        first alarm."""
        rank = entry.get("rank")
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise ValueError(f"rank map entry {dict(entry)!r}: 'rank' must be an integer >= 0")
        node_name = entry.get("node_name", entry.get("node"))
        instance_id = entry.get("instance_id") or instance_id_from_node_name(node_name)
        if instance_id is not None and not is_instance_id(instance_id):
            raise ValueError(
                f"rank map entry for rank {rank}: instance id {instance_id!r} is not "
                "'i-' followed by 8 or 17 lowercase hex digits"
            )
        return cls(
            rank=rank,
            node_name=node_name or None,
            instance_id=instance_id,
            gpu_uuid=entry.get("gpu_uuid") or None,
            unmapped=None if instance_id else _text_or_none(entry.get("unmapped")),
        )


def _text_or_none(value: Any) -> str | None:
    return value[:MAX_UNMAPPED_REASON] if isinstance(value, str) and value else None


class RankMap:
    """All ranks of the job, by global rank."""

    def __init__(self, entries: Iterable[RankInfo | Mapping[str, Any]] = ()) -> None:
        self._by_rank: dict[int, RankInfo] = {}
        for entry in entries:
            info = entry if isinstance(entry, RankInfo) else RankInfo.from_mapping(entry)
            known = self._by_rank.get(info.rank)
            if known is not None and known != info:
                raise ValueError(f"rank map names rank {info.rank} twice: {known} and {info}")
            self._by_rank[info.rank] = info

    def __len__(self) -> int:
        return len(self._by_rank)

    def __contains__(self, rank: object) -> bool:
        return rank in self._by_rank

    def get(self, rank: int) -> RankInfo | None:
        return self._by_rank.get(rank)

    def ranks(self) -> list[int]:
        return sorted(self._by_rank)

    def to_list(self) -> list[dict[str, Any]]:
        return [self._by_rank[r].to_dict() for r in self.ranks()]


def process_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's global rank: torch.distributed's when the process group is initialized
    (`init_process_group` may be given the rank with no variable set), else the launcher's
    (`RANK_VARIABLES`), else None. torch is not imported here: a process that never imported
    it has no process group."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except Exception as exc:  # a broken process group must not stop training start
            log.warning("could not read the rank from torch.distributed: %s", exc)
    env = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        raw = env.get(name, "").strip()
        if raw.isdigit():
            return int(raw)
    return None


def local_rank_info(
    rank: int | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    use_imds: bool | None = None,
    imds_endpoint: str | None = None,
) -> RankInfo:
    """This process's rank, node, instance and GPU.

    Rank: `rank`, else `process_rank()`, else 0 (a process alone). Node name: the first of
    `NODE_NAME_VARIABLES` that is set, else none. Instance id, first found wins:
    `SDC_INSTANCE_ID` (on Slurm, one that the resource config contradicts leaves the rank
    unmapped, with a warning: `srun` passes one shell's value to every rank); the `hyperpod-i-…` form of the node name (HyperPod EKS); the one entry
    for the node in HyperPod's resource config on the node (`/opt/ml/config/resource_config.json`,
    or `SDC_RESOURCE_CONFIG`: see `trainer_emitter.resource_config`), which maps a Slurm node
    `ip-10-1-69-242` to its instance; EC2 instance metadata when `SDC_USE_IMDS=1` (off by
    default: from a pod it is often not reachable, and a laptop has none). Otherwise the rank
    stays unmapped.
    """
    env = os.environ if environ is None else environ
    if rank is None:
        known = process_rank(env)
        rank = 0 if known is None else known
    node_name = local_node_name(env)
    explicit = env.get("SDC_INSTANCE_ID") or None
    if explicit is not None and not is_instance_id(explicit):
        raise ValueError(
            f"SDC_INSTANCE_ID={explicit!r} is not 'i-' followed by 8 or 17 lowercase hex digits"
        )
    listed = instance_id_from_resource_config(node_name, env.get(RESOURCE_CONFIG_VARIABLE))
    on_slurm = bool(env.get("SLURMD_NODENAME", "").strip())
    if on_slurm and explicit and listed and explicit != listed:
        # srun passes the submitting shell's SDC_INSTANCE_ID to every rank: one id for all.
        log.warning(
            "SDC_INSTANCE_ID=%s, but HyperPod's resource config lists node %s as %s: rank %s "
            "left unmapped (unset SDC_INSTANCE_ID in the job script, or set it per node)",
            explicit,
            node_name,
            listed,
            rank,
        )
        return RankInfo(
            rank=rank,
            node_name=node_name,
            instance_id=None,
            gpu_uuid=local_gpu_uuid(),
            unmapped=f"SDC_INSTANCE_ID={explicit} contradicts HyperPod's resource config, "
            f"which lists node {node_name} as {listed}",
        )
    instance_id = explicit or instance_id_from_node_name(node_name) or listed
    imds = use_imds if use_imds is not None else env.get("SDC_USE_IMDS") == "1"
    if instance_id is None and imds:
        instance_id = instance_id_from_imds(imds_endpoint or env.get("SDC_IMDS_ENDPOINT"))
    return RankInfo(
        rank=rank,
        node_name=node_name,
        instance_id=instance_id,
        gpu_uuid=local_gpu_uuid(),
        unmapped=None if instance_id else _why_unmapped(node_name, env, imds=imds),
    )


def _why_unmapped(node_name: str | None, env: Mapping[str, str], *, imds: bool) -> str:
    """What `local_rank_info` looked at and found no instance id in, in its order."""
    where = env.get(RESOURCE_CONFIG_VARIABLE) or RESOURCE_CONFIG_PATH
    return "; ".join(
        (
            "SDC_INSTANCE_ID is not set",
            f"no node name ({' and '.join(NODE_NAME_VARIABLES)} unset)"
            if node_name is None
            else f"node name {node_name!r} is not of the form hyperpod-i-<instance id>",
            f"HyperPod's resource config ({where}) has no single entry for the node",
            "instance metadata did not answer with an instance id"
            if imds
            else "instance metadata not asked (SDC_USE_IMDS is not 1)",
        )
    )


def local_node_name(environ: Mapping[str, str] | None = None) -> str | None:
    """This process's node name: the first of `NODE_NAME_VARIABLES` set to something, else None."""
    env = os.environ if environ is None else environ
    for name in NODE_NAME_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def instance_id_from_imds(endpoint: str | None = None, timeout: float = 0.5) -> str | None:
    """The instance id from EC2 instance metadata (IMDSv2), or None when it is not reachable."""
    import urllib.error  # only ranks that opt in pay for importing urllib
    import urllib.request

    base = (endpoint or IMDS_ENDPOINT).rstrip("/")
    try:
        token_request = urllib.request.Request(
            f"{base}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
        )
        with urllib.request.urlopen(token_request, timeout=timeout) as response:
            token = response.read().decode()
        id_request = urllib.request.Request(
            f"{base}/latest/meta-data/instance-id",
            headers={"X-aws-ec2-metadata-token": token},
        )
        with urllib.request.urlopen(id_request, timeout=timeout) as response:
            value = response.read().decode().strip()
    except (OSError, urllib.error.URLError) as exc:
        log.warning("instance metadata not reachable at %s: %s", base, exc)
        return None
    if not is_instance_id(value):
        log.warning("instance metadata returned %r, which is not an instance id", value)
        return None
    return value


def local_gpu_uuid() -> str | None:
    """The UUID of this process's current CUDA device, when torch and CUDA are there."""
    try:
        import torch  # optional, imported lazily
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        uuid = torch.cuda.get_device_properties(torch.cuda.current_device()).uuid
    except Exception as exc:  # a broken driver must not stop training start
        log.warning("could not read the GPU UUID: %s", exc)
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def gather_rank_map(local: RankInfo | None = None) -> RankMap:
    """All ranks' info, all-gathered once when torch.distributed is initialized; otherwise a map
    of this process alone. Call it at job start, after `init_process_group`, on every rank."""
    local = local or local_rank_info()
    try:
        import torch.distributed as dist  # optional, imported lazily
    except ImportError:
        return RankMap([local])
    if not (dist.is_available() and dist.is_initialized()):
        return RankMap([local])
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, local.to_dict())
    return RankMap(gathered)
