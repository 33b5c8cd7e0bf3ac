"""Check 2's local half: a replay recomputes a micro-batch bit for bit and leaves no trace."""

from __future__ import annotations

import pytest
import torch

from tests.torch.scenarios import TinyNet, batch_for, loss_fn
from trainer_emitter.checks.fingerprint import fingerprints
from trainer_emitter.checks.replay import Package, make_record, recompute, snapshot_buffers

pytestmark = pytest.mark.torch

CPU = torch.device("cpu")


def trained_net() -> TinyNet:
    torch.manual_seed(0)
    net = TinyNet()
    loss_fn(net, batch_for(0, 1)).backward()  # some gradients and running statistics
    return net


def original_record(net: TinyNet, package: Package) -> torch.Tensor:
    """What the training forward and backward of `package` produce, as a result record."""
    params = list(net.parameters())
    saved = [p.grad for p in params]
    for p in params:
        p.grad = None
    with torch.random.fork_rng():
        torch.set_rng_state(package.cpu_rng)
        loss = loss_fn(net, package.batch)
        loss.backward()
    record = make_record(loss.detach(), fingerprints(p.grad for p in params), len(params), CPU)
    for p, grad in zip(params, saved, strict=True):
        p.grad = grad
    return record


def package_of(net: TinyNet, step: int) -> Package:
    package = Package.capture(batch_for(1, step), CPU)
    package.buffers = snapshot_buffers(net)
    return package


def test_a_replay_reproduces_the_loss_and_gradient_fingerprints_of_the_original():
    net = trained_net()
    package = package_of(net, 2)
    expected = original_record(net, package)

    got = recompute(
        net, loss_fn, package, parameters=list(net.parameters()), with_grads=True, device=CPU
    )

    assert got.tolist() == expected.tolist()


def test_a_replay_with_another_rng_state_computes_other_bits():
    # Dropout draws from the RNG: without the target's state the replay could not match.
    net = trained_net()
    package = package_of(net, 2)
    expected = original_record(net, package)
    package.cpu_rng = torch.Generator().manual_seed(12345).get_state()

    got = recompute(
        net, loss_fn, package, parameters=list(net.parameters()), with_grads=True, device=CPU
    )

    assert got.tolist() != expected.tolist()


def test_a_replay_leaves_gradients_buffers_and_rng_state_as_they_were():
    net = trained_net()
    params = list(net.parameters())
    grads = [p.grad.clone() for p in params]
    buffers = snapshot_buffers(net)
    rng = torch.get_rng_state()
    package = package_of(net, 3)
    package.buffers = {name: value + 1 for name, value in package.buffers.items()}

    recompute(net, loss_fn, package, parameters=params, with_grads=True, device=CPU)

    assert all(torch.equal(p.grad, g) for p, g in zip(params, grads, strict=True))
    assert all(torch.equal(b, buffers[n]) for n, b in net.named_buffers())
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_replay_without_gradients_compares_the_loss_alone():
    net = trained_net()
    package = package_of(net, 2)

    got = recompute(
        net, loss_fn, package, parameters=list(net.parameters()), with_grads=False, device=CPU
    )

    assert got[:2].tolist() == original_record(net, package)[:2].tolist()
    assert not got[2:].any()


def test_a_package_survives_the_trip_through_bytes():
    net = trained_net()
    package = package_of(net, 4)

    back = Package.from_bytes(package.to_bytes(), CPU)

    assert torch.equal(back.batch[0], package.batch[0])
    assert torch.equal(back.cpu_rng, package.cpu_rng)
    assert back.buffers.keys() == package.buffers.keys()
