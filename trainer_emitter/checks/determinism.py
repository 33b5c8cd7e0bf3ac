"""`deterministic()`: bit-reproducible kernels for the audit steps."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

CUBLAS_WORKSPACE = ":4096:8"


@contextmanager
def deterministic(*, warn_only: bool = False) -> Iterator[None]:
    """Deterministic algorithms, deterministic cuDNN and no cuDNN autotuning inside; the previous
    settings come back on exit.

    cuBLAS needs `CUBLAS_WORKSPACE_CONFIG` for deterministic results; it is set to `:4096:8` when
    unset (and kept: cuBLAS reads it once). Set it before the first CUDA call to be sure.
    `warn_only=True` warns instead of raising on an operation that has no deterministic kernel."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    enabled = torch.are_deterministic_algorithms_enabled()
    warned = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn_deterministic = torch.backends.cudnn.deterministic
    cudnn_benchmark = torch.backends.cudnn.benchmark
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warned)
        torch.backends.cudnn.deterministic = cudnn_deterministic
        torch.backends.cudnn.benchmark = cudnn_benchmark
