"""Without torch the DDP scenario fails at once with the fix in its message; nothing else changes."""

from __future__ import annotations

import sys

import pytest

from sdc_remediation.infra.local.ddp_job import TorchMissing, run_job
from sdc_remediation.infra.local.drill import __main__ as drill_cli
from sdc_remediation.infra.local.drill.scenarios import NODES


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError


def test_the_job_refuses_to_start_and_says_to_install_torch_and_the_torch_extra(no_torch):
    with pytest.raises(
        TorchMissing,
        match=r"install the CPU build of torch, then the torch extra \(pip install -e '\.\[torch\]'",
    ):
        run_job(NODES)


def test_the_drill_fails_the_ddp_scenario_with_that_message_before_standing_up_the_stack(
    no_torch, capsys, monkeypatch
):
    from sdc_remediation.infra.local.run import LocalRun

    opened = []
    monkeypatch.setattr(LocalRun, "open", lambda *args, **kwargs: opened.append(args))

    assert drill_cli.main(["--ddp"]) == 1

    out = capsys.readouterr().out
    assert opened == []
    assert "FAIL  ddp-replay: TorchMissing:" in out
    assert "the torch extra" in out


def test_listing_the_scenarios_needs_no_torch(no_torch, capsys):
    assert drill_cli.main(["--list"]) == 0

    assert "ddp-replay" in capsys.readouterr().out
