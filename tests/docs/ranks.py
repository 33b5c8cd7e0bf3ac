"""The training doc's training-loop blocks (docs/training.md), run on every rank of a 4-rank gloo job on CPU.

Each block runs in a namespace of its own (a block builds its own `SdcChecks`, and a DDP model
takes one communication hook), holding the names the training doc's prose says the reader has: a DDP
model's parts, a loss, a loader, checkpoint functions, the loaded checkpoint's step and tags.
Imported by the spawned rank processes.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import traceback
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tests.torch.scenarios import (
    CKPT_STEP,
    CKPT_TAGS,
    WORLD,
    TinyNet,
    batch_for,
    checkpoint_state,
    loss_fn,
    node_name,
)
from trainer_emitter.checkpoints import CheckpointLedger
from trainer_emitter.checks import Schedule

DIRECTORIES: list[str] = []
"""The checkpoint directories this rank made, removed when it is done (a spawned process runs
no atexit handlers)."""


def checkpoint_directory() -> str:
    """A checkpoint directory as a job leaves it after an alarm (one per rank and block, so no
    rank reads what another rewrites): CKPT_STEP's save clean through the step after it, a later
    save no check followed, and the alarm marker of the window that later save is in."""
    directory = tempfile.mkdtemp(prefix="sdc-ckpt-")
    DIRECTORIES.append(directory)
    ledger = CheckpointLedger(directory)
    ledger.saved(CKPT_STEP, CKPT_TAGS, location=f"{directory}/step-{CKPT_STEP}")
    ledger.passed(CKPT_STEP + 1, CKPT_STEP + 1)
    ledger.saved(CKPT_STEP + 5, CKPT_TAGS, location=f"{directory}/step-{CKPT_STEP + 5}")
    window = [CKPT_STEP + 2, CKPT_STEP + 6]
    ledger.alarm({"step": window[1], "check": "weights", "suspect_window": window})
    return directory


def namespace(rank: int, saved: list[int]) -> dict[str, Any]:
    torch.manual_seed(0)
    net = TinyNet()
    model = DistributedDataParallel(net)
    return {
        "DistributedDataParallel": DistributedDataParallel,
        "dist": dist,
        "net": net,
        "model": model,
        "optimizer": torch.optim.SGD(net.parameters(), lr=0.01),
        "loss_of": loss_fn,
        "loss_fn": loss_fn,
        "schedule": Schedule(audit_every=2, check_every=2, peer_offset=1),
        "loader": [batch_for(rank, step) for step in (1, 2, 3)],
        "save_checkpoint": lambda step, tags: saved.append(step),
        "path": "ckpt/step-1000",
        "load_checkpoint": lambda path: {
            "model": checkpoint_state(),
            "tags": dict(CKPT_TAGS),
            "step": CKPT_STEP,
        },
        "group": None,
        "ckpt_step": CKPT_STEP,
        "ckpt_tags": dict(CKPT_TAGS),
        "CKPT": checkpoint_directory(),
    }


def worker(rank: int, port: int, blocks: list[tuple[str, str]], results: queue.Queue[Any]) -> None:
    os.environ.update(
        {
            "NODE_NAME": node_name(rank),
            "RANK": str(rank),
            "WORLD_SIZE": str(WORLD),
            "SDC_SINK": "memory",
            "AWS_REGION": "us-west-2",
        }
    )
    torch.set_num_threads(1)
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
        )
        for block_id, code in blocks:
            saved: list[int] = []
            names = namespace(rank, saved)
            exec(compile(code, block_id, "exec"), names)
            dist.barrier()
            results.put((block_id, rank, _seen(names)))
        dist.barrier()
        dist.destroy_process_group()
        results.put(("done", rank, None))
    except BaseException:
        results.put(("error", rank, traceback.format_exc()))
    finally:
        for directory in DIRECTORIES:
            shutil.rmtree(directory, ignore_errors=True)


def _seen(names: dict[str, Any]) -> dict[str, Any]:
    """What the block left behind that the test compares across ranks."""
    seen: dict[str, Any] = {}
    if "result" in names:
        seen["result"] = {"applied": names["result"].applied, "alarm": names["result"].alarm}
    if "manifest" in names:
        seen["resumed_from"] = names["manifest"].step
    if "verdict" in names:
        verdict = names["verdict"]
        seen["verdict"] = {"suspects": verdict.suspects, "agreement": verdict.agreement.value}
    return seen
