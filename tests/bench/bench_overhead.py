"""Benchmark (not a test): what the checks add to a training step, against plain DDP.

    .venv/bin/python -m tests.bench overhead

A small decoder (the seed's shape scaled down: token and position embeddings, pre-norm
transformer blocks with causal attention, a vocabulary head) trains in the 4-rank gloo harness
on CPU (one thread per rank), once with plain DDP and once with `SdcChecks` under each of the
seed's schedules. Every variant is its own model and optimizer, built alike, in the same job, and
the variants take turns step by step (step 1 of each, then step 2 of each, …), so a busy machine
slows all of them alike. A variant's figure is its best round of `steps` steps (the least
disturbed); the ratio is to plain DDP's best round in the same run. A round of 100 steps
holds exactly one audit of the every-100 schedules, ten of the every-10 one, and one weight
check (`check_every=100`, the default, in every checks variant).

The seed's figures (a 953M-parameter model on 32 H100s) are printed beside the ratios as the
anchor. They are not a goal this harness can meet or miss: on CPU a replay costs what a step
costs, with none of the GPU's spare bandwidth, and gloo's collectives are slow, so the audits'
share is higher here than on GPUs; a step of the checks without audits adds two all-gathers of
one float, which a small model on gloo feels more than a large one on NCCL.
"""

from __future__ import annotations

import math
import os
import queue
import time
import traceback
from dataclasses import dataclass
from typing import Any

WORLD = 4


@dataclass(frozen=True)
class Setting:
    """The decoder's shape and the run's length; `device`: "cpu", or "cuda" (every rank on the
    one GPU there is: `make bench-gpu`)."""

    vocab: int = 256
    width: int = 64
    layers: int = 3
    heads: int = 4
    context: int = 32
    batch: int = 4
    steps: int = 100
    rounds: int = 3
    warmup: int = 10
    """Untimed steps per variant first (the replicas' comparison on the first step, allocator)."""
    device: str = "cpu"


CPU = Setting()

VARIANTS: dict[str, dict[str, Any] | None] = {
    "plain DDP": None,
    "checks, no audits": {"audit_every": 0},
    "checks, deterministic audits every 100": {"audit_every": 100},
    "checks, deterministic audits every 10": {"audit_every": 10},
    "checks, default-kernel audits every 100": {
        "audit_every": 100,
        "deterministic_audits": False,
    },
}
"""None: plain DDP. Otherwise the `Schedule` fields (weight checks every 100, the default)."""

SEED_PERCENT = {
    "checks, no audits": 7.4,
    "checks, deterministic audits every 100": 10.1,
    "checks, deterministic audits every 10": 34.7,
    "checks, default-kernel audits every 100": 7.6,
}
"""The seed's added step time, in percent (953M parameters, 32 H100s)."""


def decoder(setting: Setting) -> Any:
    import torch
    from torch import nn

    width, context = setting.width, setting.context

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(setting.vocab, width)
            self.position = nn.Parameter(torch.randn(context, width) * 0.02)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    width, setting.heads, 4 * width, dropout=0.1, batch_first=True, norm_first=True
                )
                for _ in range(setting.layers)
            )
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, setting.vocab, bias=False)
            self.register_buffer(
                "mask", nn.Transformer.generate_square_subsequent_mask(context), persistent=False
            )

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens) + self.position[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x, src_mask=self.mask, is_causal=True)
            return self.head(self.norm(x))

    return Decoder()


def loss_fn(module: Any, batch: Any) -> Any:
    import torch.nn.functional as F

    logits = module(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def batch_for(setting: Setting, rank: int, step: int) -> Any:
    import torch

    generator = torch.Generator().manual_seed(1_000_003 * step + rank)
    tokens = torch.randint(
        0, setting.vocab, (setting.batch, setting.context + 1), generator=generator
    )
    return tokens.to(setting.device)


class Variant:
    """One model, its optimizer, and the checks around it (none for plain DDP)."""

    def __init__(self, setting: Setting, rank: int, schedule: dict[str, Any] | None) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel

        from trainer_emitter.checks import Schedule, SdcChecks

        self.setting = setting
        self.rank = rank
        torch.manual_seed(0)
        self.ddp = DistributedDataParallel(decoder(setting).to(setting.device))
        self.optimizer = torch.optim.AdamW(self.ddp.parameters(), lr=1e-3)
        self.checks = None
        if schedule is not None:
            self.checks = SdcChecks(
                self.ddp,
                self.optimizer,
                loss_fn,
                Schedule(peer_offset=1, **schedule),
                max_grad_norm=1.0,
            )
        self.step_number = 0

    def steps(self, count: int) -> None:
        import torch

        for _ in range(count):
            self.step_number += 1
            batch = batch_for(self.setting, self.rank, self.step_number)
            if self.checks is not None:
                result = self.checks.step(self.step_number, batch)
                if result.alarm is not None:
                    raise RuntimeError(f"an alarm in a clean benchmark run: {result.alarm}")
            else:
                self.optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(self.ddp, batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.ddp.parameters(), 1.0)
                self.optimizer.step()
                float(loss.detach())  # the checks read the loss on every step too
            if self.setting.device == "cuda":
                torch.cuda.synchronize()  # the step's time is the GPU's too


def worker(rank: int, port: int, setting: Setting, messages: queue.Queue[Any]) -> None:
    """One rank: every variant, `warmup` steps each, then `rounds` rounds of `steps` steps of each,
    the variants taking turns step by step. A step's time runs from a barrier (all ranks start
    it together) to the end of this rank's step, whose collectives wait for the others."""
    os.environ.update(
        {"NODE_NAME": f"bench-node-{rank}", "RANK": str(rank), "WORLD_SIZE": str(WORLD)}
    )
    try:
        from trainer_emitter.checks.determinism import CUBLAS_WORKSPACE

        # cuBLAS reads it when its first handle is made: before any step of any variant.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
        )
        variants = {name: Variant(setting, rank, schedule) for name, schedule in VARIANTS.items()}
        for variant in variants.values():
            variant.steps(setting.warmup)
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(setting.rounds):
            spent = dict.fromkeys(variants, 0.0)
            for _ in range(setting.steps):
                for name, variant in variants.items():
                    dist.barrier()
                    started = time.perf_counter()
                    variant.steps(1)
                    spent[name] += time.perf_counter() - started
            for name, total in spent.items():
                seconds[name].append(total)
        dist.barrier()
        dist.destroy_process_group()
        messages.put(("done", rank, seconds))
    except BaseException:
        messages.put(("error", rank, traceback.format_exc()))


def measure(setting: Setting = CPU, timeout: float = 900.0) -> dict[str, list[float]]:
    """Rank 0's seconds per round, per variant."""
    from sdc_remediation.infra.local.ranks import run_ranks

    found: dict[int, dict[str, list[float]]] = {}

    def collect(message: tuple[str, int, Any]) -> bool:
        kind, rank, payload = message
        if kind == "error":
            raise RuntimeError(f"rank {rank} failed:\n{payload}")
        found[rank] = payload
        return len(found) == WORLD

    run_ranks(
        worker,
        WORLD,
        (setting,),
        collect,
        timeout=timeout,
        timed_out=lambda: TimeoutError(f"the overhead benchmark did not finish in {timeout:g} s"),
    )
    return found[0]


def run(setting: Setting = CPU) -> list[dict[str, Any]]:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return [_row("overhead: torch is not installed", None, "", None, str(exc))]
    seconds = measure(setting)
    best = {name: min(times) / setting.steps for name, times in seconds.items()}
    plain = best["plain DDP"]
    parameters = sum(p.numel() for p in decoder(setting).parameters())
    where = f"{WORLD} gloo ranks" + (" on one GPU" if setting.device == "cuda" else "")
    rows = [
        _row(
            f"step, plain DDP ({parameters / 1e6:.2f}M-parameter decoder, {where})",
            plain,
            "s",
            1.0,
            f"best of {setting.rounds} rounds of {setting.steps} steps",
        )
    ]
    for name in VARIANTS:
        if name == "plain DDP":
            continue
        ratio = best[name] / plain
        rows.append(
            _row(
                f"step, {name}",
                best[name],
                "s",
                ratio,
                f"{_percent(ratio)} here; seed {SEED_PERCENT[name]:+.1f} % (953M, 32 H100s)",
            )
        )
    return rows


def _percent(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def _row(
    name: str, value: float | None, unit: str, ratio: float | None, goal: str
) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}
