"""`make bench-gpu`: the checks on one GPU, in under five minutes. Figures, not timed tests.

    .venv/bin/python -m tests.bench.gpu [--out bench-gpu.json] [--skip-tests]

1. parity: the fused kernel (`checks/fused.py`) against the definition computed on the host, bit
   for bit: every dtype, sizes 0, 1, 63, 64, 65, 2^18 ± 1 and 10M + 19, non-contiguous views, a
   batch of mixed tensors in one call; and the torch path on the GPU (without the kernel).
2. throughput: the fingerprint of 1 GiB of float32 against `torch.sum` of the same bytes (float32,
   and the exact int64 sum of the same int32 words), and the torch path for contrast.
3. weight check: the local fingerprints of a 953M-parameter fp32 model (a decoder's tensors),
   against the goal of 5 ms (the seed's weight check took 31.1 ms on an H100).
4. step overhead: `tests/bench/bench_overhead.py`'s decoder, larger, its 4 gloo ranks sharing
   the one GPU: the checks under the seed's schedules against plain DDP.
5. the fingerprint test suites (`tests/torch/test_fused_fingerprint.py` runs the kernel on CUDA
   tensors when a GPU is present; `test_fingerprint.py`, the definition).

Prints one table and writes the rows as JSON. Exits 0 when every part ran and parity held, 1
when a part failed or a fingerprint differed, 2 (with a message, nothing measured) where no CUDA
device is.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from tests.bench.__main__ import _print  # noqa: E402
from tests.bench.bench_overhead import Setting  # noqa: E402
from tests.bench.bench_overhead import run as overhead_run  # noqa: E402

SIZES = [0, 1, 63, 64, 65, (1 << 18) - 1, (1 << 18) + 1, 10_000_019]
THROUGHPUT_BYTES = 1 << 30
MODEL_PARAMETERS = 953_000_000
WEIGHT_CHECK_GOAL_S = 0.005
SEED_WEIGHT_CHECK_S = 0.0311
GPU_OVERHEAD = Setting(
    vocab=4096,
    width=256,
    layers=4,
    heads=4,
    context=256,
    batch=8,
    steps=100,
    rounds=2,
    device="cuda",
)
NO_GPU = (
    "make bench-gpu: no CUDA device here (torch.cuda.is_available() is False, torch {version}). "
    "It measures the checks on one GPU; nothing was measured."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-gpu")
    parser.add_argument("--out", default="bench-gpu.json")
    parser.add_argument("--skip-tests", action="store_true", help="leave out part 5")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("make bench-gpu: torch is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(NO_GPU.format(version=torch.__version__), file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    rows: list[dict[str, Any]] = [
        _row("device", None, "", None, torch.cuda.get_device_name(device)),
    ]
    failed = False
    parts: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
        ("parity", lambda: parity(device, SIZES)),
        ("throughput", lambda: throughput(device, THROUGHPUT_BYTES)),
        ("weight check", lambda: weight_check(device, MODEL_PARAMETERS)),
        ("step overhead", lambda: overhead_run(GPU_OVERHEAD)),
    ]
    for name, part in parts:
        started = time.perf_counter()
        try:
            found = part()
        except Exception as exc:
            traceback.print_exc()
            found = [_row(f"{name}: failed", None, "", None, f"{type(exc).__name__}: {exc}")]
        failed = failed or any(row.get("failed") for row in found) or "failed" in found[0]["name"]
        rows += [{"suite": name, **row} for row in found]
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        torch.cuda.empty_cache()
    if not args.skip_tests:
        code = run_tests()
        rows.append(
            {
                "suite": "tests",
                **_row("fingerprint test suites on this GPU", code, "exit", None, "0"),
            }
        )
        failed = failed or code != 0
    _print([{"suite": row.get("suite", "gpu"), **row} for row in rows])
    Path(args.out).write_text(
        json.dumps(
            {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=2
        )
    )
    print(f"\nwritten: {args.out}")
    return 1 if failed else 0


def parity(device: Any, sizes: list[int]) -> list[dict[str, Any]]:
    """The kernel (one tensor per call, and all in one call) and the torch path, on `device`,
    against the definition computed on the host: rows of how many tensors differ."""
    import torch

    from tests.torch.test_fingerprint import SUPPORTED_DTYPES, random_bits
    from trainer_emitter.checks import fused
    from trainer_emitter.checks.fingerprint import chunked_sums, raw_words

    cases = [
        random_bits(dtype, size, seed=index * 1000 + size % 997)
        for index, dtype in enumerate(SUPPORTED_DTYPES)
        for size in sizes
    ]
    matrix = random_bits(torch.float16, 65 * 9, seed=4).reshape(65, 9)
    expected = [tuple(chunked_sums(raw_words(t)).tolist()) for t in [*cases, *_views(matrix)]]
    words = [raw_words(t.to(device)) for t in cases] + [
        raw_words(view) for view in _views(matrix.to(device))
    ]
    found = {
        "kernel, one tensor per call": [
            tuple(fused.fingerprints([w], device)[0].tolist()) for w in words
        ],
        "kernel, all tensors in one call": [
            tuple(row) for row in fused.fingerprints(words, device).tolist()
        ],
        "torch path on the device": [tuple(chunked_sums(w).tolist()) for w in words],
    }
    rows = []
    for name, got in found.items():
        differ = sum(a != b for a, b in zip(got, expected, strict=True))
        rows.append(
            {
                **_row(
                    f"parity, {name}: tensors that differ from the definition",
                    differ,
                    "",
                    None,
                    f"0 of {len(expected)}",
                ),
                "failed": differ != 0,
            }
        )
    return rows


def _views(matrix: Any) -> list[Any]:
    return [matrix.t(), matrix[::2], matrix[:, 3], matrix.t()[1:, ::3]]


def throughput(device: Any, size_bytes: int) -> list[dict[str, Any]]:
    import torch

    from trainer_emitter.checks.fingerprint import chunked_sums, fingerprint, raw_words

    data = torch.randn(size_bytes // 4, device=device)
    words = data.view(torch.int32)
    seconds = {
        "fingerprint (fused)": gpu_seconds(lambda: fingerprint(data)),
        "torch.sum, float32": gpu_seconds(lambda: torch.sum(data)),
        "torch.sum of the int32 words, exact int64": gpu_seconds(
            lambda: torch.sum(words, dtype=torch.int64)
        ),
        "fingerprint, torch path (contrast)": gpu_seconds(
            lambda: chunked_sums(raw_words(data)), repeats=2
        ),
    }
    speed = {name: size_bytes / s for name, s in seconds.items()}
    yardstick = speed["torch.sum, float32"]
    return [
        _row(f"{name}, {size_bytes >> 20} MiB", value, "B/s", value / yardstick, goal)
        for (name, value), goal in zip(
            speed.items(),
            ["ratio >= 0.9 (one read of the bytes)", "yardstick", "none", "none"],
            strict=True,
        )
    ]


def weight_check(
    device: Any, count: int, *, width: int = 2048, vocab: int = 50304
) -> list[dict[str, Any]]:
    """The local part of a weight check (every parameter's fingerprint, on the GPU, with the
    results back on the host) for a decoder-shaped set of fp32 tensors of about `count`
    parameters."""
    import torch

    from trainer_emitter.checks.fingerprint import fingerprints

    shapes = decoder_shapes(count, width=width, vocab=vocab)
    tensors = [torch.randn(shape, device=device) for shape in shapes]
    total = sum(t.numel() for t in tensors)
    started = time.perf_counter()
    fingerprints(tensors).tolist()
    first = time.perf_counter() - started
    best = gpu_seconds(lambda: fingerprints(tensors).tolist(), repeats=10)
    label = f"{total / 1e6:.0f}M fp32 parameters in {len(tensors)} tensors"
    return [
        _row(f"weight check, {label}, first call (kernel build, tables)", first, "s", None, "-"),
        {
            **_row(
                f"weight check, {label}",
                best,
                "s",
                best / WEIGHT_CHECK_GOAL_S,
                f"<= 5 ms (ratio <= 1); seed {SEED_WEIGHT_CHECK_S * 1e3:.1f} ms on an H100",
            ),
        },
        _row(
            "weight check, read bandwidth",
            total * 4 / best,
            "B/s",
            None,
            "bytes of parameters over the time",
        ),
    ]


def decoder_shapes(count: int, width: int = 2048, vocab: int = 50304) -> list[tuple[int, ...]]:
    """A decoder's parameter shapes (embedding, blocks of attention and a 4x MLP with their
    norms and biases), as many blocks as bring it closest to `count`."""
    block = [
        (3 * width, width),
        (3 * width,),
        (width, width),
        (width,),
        (4 * width, width),
        (4 * width,),
        (width, 4 * width),
        (width,),
        (width,),
        (width,),
        (width,),
        (width,),
    ]
    per_block = sum(_numel(shape) for shape in block)
    embedding = vocab * width
    blocks = max(1, round((count - embedding) / per_block))
    return [(vocab, width)] + block * blocks + [(width,), (width,)]


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def gpu_seconds(action: Callable[[], Any], repeats: int = 10) -> float:
    """Best wall time of `action` with the GPU's work finished (synchronised after each; the
    same without a GPU, where the tests run the parts on CPU tensors)."""
    import torch

    def finish() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    action()
    finish()
    best = float("inf")
    for _ in range(repeats):
        finish()
        started = time.perf_counter()
        action()
        finish()
        best = min(best, time.perf_counter() - started)
    return best


def run_tests() -> int:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "tests/torch/test_fused_fingerprint.py",
        "tests/torch/test_fingerprint.py",
    ]
    return subprocess.run(command, cwd=ROOT, env={**os.environ}, check=False).returncode


def _row(
    name: str, value: float | None, unit: str, ratio: float | None, goal: str
) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}


if __name__ == "__main__":
    sys.exit(main())
