"""Check 1 inside backward: a DDP communication hook that looks at each bucket before the
all-reduce mixes the ranks' gradients.

Per bucket it records the local gradient norm (a NaN/Inf/overflow on this rank shows up here and
only here: after the all-reduce every rank holds it), and, on deterministic audit steps, each
parameter's gradient fingerprint (before the standard all-reduce hook divides the bucket in
place). Then it runs that standard all-reduce. Nothing here synchronises with the host.

No `from __future__ import annotations` here: DDP checks the hook's annotations at run time.
"""

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from trainer_emitter.checks.fingerprint import DEFAULT_CHUNK_ELEMENTS, fingerprints


class GradientWatch:
    """The hook's state: what the buckets of the current backward showed on this rank."""

    def __init__(
        self,
        parameters: Sequence[torch.nn.Parameter],
        process_group: dist.ProcessGroup | None = None,
        *,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    ) -> None:
        self.process_group = process_group
        self.chunk_elements = chunk_elements
        self._index = {id(p): i for i, p in enumerate(parameters)}
        self._count = len(parameters)
        self.fingerprint_grads = False
        self.norms: list[torch.Tensor] = []
        self.grad_fingerprints: torch.Tensor | None = None
        self._bucket_places: dict[tuple[int, torch.device, tuple[int, ...]], torch.Tensor] = {}

    def begin(self, *, fingerprint_grads: bool) -> None:
        """Forget the last backward; fingerprint gradients in the next one or not."""
        self.fingerprint_grads = fingerprint_grads
        self.norms = []
        self.grad_fingerprints = None

    def record(self, bucket: dist.GradBucket) -> None:
        buffer = bucket.buffer()
        self.norms.append(torch.linalg.vector_norm(buffer, dtype=torch.float32))
        if not self.fingerprint_grads:
            return
        if self.grad_fingerprints is None:
            self.grad_fingerprints = torch.zeros(
                (self._count, 2), dtype=torch.int64, device=buffer.device
            )
        places: list[int] = []
        gradients: list[torch.Tensor] = []
        for parameter, gradient in zip(bucket.parameters(), bucket.gradients(), strict=True):
            index = self._index.get(id(parameter))
            if index is not None:
                places.append(index)
                gradients.append(gradient)
        if not places:
            return
        # One batched fingerprint per bucket (on a GPU: a few kernel launches for all of them).
        rows = fingerprints(gradients, device=buffer.device, chunk_elements=self.chunk_elements)
        self.grad_fingerprints.index_copy_(0, self._places(bucket.index(), places, buffer), rows)

    def _places(self, bucket: int, places: list[int], buffer: torch.Tensor) -> torch.Tensor:
        """The bucket's parameter indices on its device, copied there once per bucket."""
        key = (bucket, buffer.device, tuple(places))
        found = self._bucket_places.get(key)
        if found is None:
            found = torch.tensor(places, dtype=torch.int64).to(buffer.device)
            self._bucket_places[key] = found
        return found

    def local_norm(self, device: torch.device) -> torch.Tensor:
        """This rank's local gradient norm over every bucket, shape (1,), float32."""
        if not self.norms:
            return torch.zeros(1, dtype=torch.float32, device=device)
        return torch.linalg.vector_norm(torch.stack(self.norms)).reshape(1).to(device)


def comm_hook(state: GradientWatch, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Register with `ddp_model.register_comm_hook(GradientWatch(params), comm_hook)` before the
    first backward (`SdcChecks` does it for you)."""
    state.record(bucket)
    return allreduce_hook(state.process_group, bucket)  # type: ignore[arg-type]
