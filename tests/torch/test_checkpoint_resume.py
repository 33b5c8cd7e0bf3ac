"""Resume from the right checkpoint: the 4-rank gloo job saves every 5 steps with torch's
distributed checkpoint, one weight of rank 2 goes wrong right after step 31, and the next check
fires at step 36. The newest finished checkpoint is step 35's, saved inside the suspect window;
`safe_checkpoint` names step 30's, which an audit and a weight check passed after (step 31), and
the job resumed from it compares its replicas right after the load: they agree."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sdc_remediation.infra.local.ddp_job import Fault, JobResult, run_job
from sdc_remediation.infra.local.drill.scenarios import NODES
from tests.torch.harness import run_group
from trainer_emitter.checkpoints import (
    Manifest,
    SafeCheckpoint,
    dcp_step,
    read_directory,
    safe_checkpoint,
)
from trainer_emitter.checkpoints.store import LocalStore

pytestmark = pytest.mark.torch

# A job that saves on its own schedule (no weight check gates the save) and confirms each save
# with an audit and a weight check on the next step; scheduled checks every 10 steps.
SETTINGS = dict(
    fault_rank=2,
    fault_step=31,
    factor=0.5,
    audit_every=10,
    check_every=10,
    ckpt_every=5,
    check_on_checkpoint=False,
    confirm_checkpoints=True,
)


@dataclass
class AfterAlarm:
    job: JobResult
    manifests: dict[int, Manifest]
    safe: SafeCheckpoint
    dcp_step: int


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ckpt")


@pytest.fixture(scope="module")
def after_alarm(directory) -> AfterAlarm:
    job = run_job(
        NODES, checkpoint_dir=str(directory), last_step=45, fault=Fault.WEIGHTS, **SETTINGS
    )
    return AfterAlarm(
        job,
        read_directory(LocalStore(directory)).manifests,
        safe_checkpoint(directory),
        dcp_step(directory),
    )


@pytest.fixture(scope="module")
def resumed(after_alarm, directory) -> JobResult:
    return run_job(
        NODES, checkpoint_dir=str(directory), last_step=41, resume=True, fault=None, **SETTINGS
    )


def test_the_check_after_the_fault_fires_with_a_window_that_starts_after_the_last_passes(
    after_alarm,
):
    assert after_alarm.job.fired == [31]
    assert after_alarm.job.alarm["step"] == 36
    assert after_alarm.job.alarm["suspect_window"] == [32, 36]


def test_step_35_was_saved_and_finished_but_no_check_passed_after_it(after_alarm, directory):
    assert (directory / "step-35" / ".metadata").is_file()  # a newest-finished loader takes it
    assert sorted(after_alarm.manifests) == [5, 10, 15, 20, 25, 30, 35]
    assert after_alarm.manifests[35].clean_through is None
    assert after_alarm.manifests[30].clean_through == 31


def test_after_the_alarm_safe_checkpoint_names_step_30_never_35(after_alarm, directory):
    safe = after_alarm.safe

    assert safe.step == 30
    assert safe.location == str(directory / "step-30")
    assert "before the suspect window starting at step 32" in safe.reason
    assert safe.skipped == ("step 35: at or after step 32, where a suspect window starts",)
    assert after_alarm.dcp_step == 30


def test_the_resumed_run_loads_step_30_and_find_divergent_ranks_passes(after_alarm, resumed):
    assert resumed.resumed_from == 30
    assert resumed.replicas_agree is True
    assert resumed.loaded_fingerprint == after_alarm.manifests[30].fingerprint


def test_the_resumed_run_trains_on_without_an_alarm(resumed):
    assert resumed.alarm is None
    assert [s["step"] for s in resumed.steps] == list(range(31, 42))
    assert all(s["applied"] for s in resumed.steps)


def test_after_the_resumed_run_its_own_confirmed_save_is_the_safe_one(resumed, directory):
    # the resumed run rewrote step 35's manifest, resolved the alarm (its window starts after
    # step 30), and confirmed step 40 at step 41
    safe = safe_checkpoint(directory)

    assert safe.step == 40
    assert "no alarm is open" in safe.reason


@pytest.fixture(scope="module")
def remembered() -> dict:
    """Rank 0's result of a loop that saves by itself and records each save with
    `remember_checkpoint` (scenario `remembered_saves`)."""
    return run_group(["remembered_saves"])["remembered_saves"][0]


def test_a_checkpoint_recorded_with_remember_checkpoint_gets_a_manifest_like_a_driver_save(
    remembered,
):
    # step 5's was confirmed at step 10; remembering it again after step 12 left it alone
    assert remembered["manifests"] == {
        5: {"location": "mem://ckpt/step-5", "clean_through": 10, "fingerprinted": True},
        10: {"location": "mem://ckpt/step-10", "clean_through": None, "fingerprinted": True},
    }


def test_safe_checkpoint_finds_the_remembered_save_a_later_check_confirmed_not_the_newest(
    remembered,
):
    assert remembered["safe"]["step"] == 5
    assert remembered["safe"]["location"] == "mem://ckpt/step-5"
