"""The tail of a backward pass as time waiting in collectives (`BackwardTail`): it runs after
every callback the pass queued, DDP's wait for its last all-reduces among them (played here by a
callback that sleeps), and is measured from the last gradient accumulated."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch.autograd import Variable

from trainer_emitter.watch.hang import BackwardTail, CollectiveCounter

pytestmark = pytest.mark.torch

WAIT = 0.2


def backward_with(wait: float) -> float:
    """One backward pass of a small model whose pass ends with a callback sleeping `wait`,
    queued when its first gradient is accumulated (as DDP's reducer queues its wait); returns
    the seconds the tail counted."""
    counter = CollectiveCounter()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    tail = BackwardTail(counter).attach(model)
    queued = []

    def reducer_ready(_: torch.Tensor) -> None:
        if not queued:
            queued.append(True)
            Variable._execution_engine.queue_callback(lambda: time.sleep(wait))

    for parameter in model.parameters():
        parameter.register_post_accumulate_grad_hook(reducer_ready)
    try:
        model(torch.randn(4, 8)).sum().backward()
    finally:
        tail.detach()
    return counter.seconds


def test_the_wait_at_the_end_of_a_backward_pass_counts_as_waiting():
    assert backward_with(WAIT) >= WAIT


def test_a_pass_with_no_wait_at_its_end_counts_next_to_nothing():
    assert backward_with(0.0) < WAIT / 4
