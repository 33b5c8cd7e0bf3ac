"""The manifests beside each checkpoint, the alarm markers, and `safe_checkpoint` on a local
directory: no torch, no training, the ledger driven the way the driver drives it."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainer_emitter.checkpoints import (
    CheckpointLedger,
    CheckpointMismatch,
    LocalStore,
    NoSafeCheckpoint,
    dcp_step,
    nemo_resume_path,
    read_directory,
    safe_checkpoint,
    torchtitan_load_step,
)
from trainer_emitter.checkpoints.manifest import manifest_name, marker_name
from trainer_emitter.checks import Schedule

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def tags(audit: int | None, weights: int | None) -> dict[str, int | None]:
    return {"last_audit_pass": audit, "last_weight_check_pass": weights}


def ledger(directory: Path) -> CheckpointLedger:
    return CheckpointLedger(directory, clock=lambda: NOW, run="run-1")


def save(book: CheckpointLedger, directory: Path, step: int) -> None:
    """A finished DCP-style save at `step` (a folder with `.metadata`), checked at its step."""
    folder = directory / f"step-{step}"
    folder.mkdir()
    (folder / ".metadata").write_bytes(b"")
    book.saved(step, tags(step, step), location=str(folder), fingerprint="sha256:00")


def written(directory: Path, step: int) -> dict:
    return json.loads((directory / manifest_name(step)).read_text())


# ---- the manifest -----------------------------------------------------------------------------


def test_a_save_writes_a_versioned_manifest_with_the_passes_at_save_time(tmp_path):
    book = ledger(tmp_path)

    book.saved(30, tags(30, 28), location="/fsx/ckpt/step-30", fingerprint="sha256:ab")

    assert written(tmp_path, 30) == {
        "schema": "sdc.checkpoint-manifest",
        "version": 1,
        "step": 30,
        "saved_at": "2026-12-05T12:00:00+00:00",
        "location": "/fsx/ckpt/step-30",
        "last_audit_pass": 30,
        "last_weight_check_pass": 28,
        "fingerprint": "sha256:ab",
        "clean_through": None,
        "run": "run-1",
    }


def test_the_checks_at_the_save_s_own_step_do_not_make_it_clean(tmp_path):
    book = ledger(tmp_path)
    book.saved(30, tags(30, 30))

    assert book.passed(30, 30) == []
    assert written(tmp_path, 30)["clean_through"] is None


def test_a_later_audit_alone_does_not_make_it_clean(tmp_path):
    book = ledger(tmp_path)
    book.saved(30, tags(30, 30))

    book.passed(31, 30)

    assert written(tmp_path, 30)["clean_through"] is None


def test_a_later_audit_and_weight_check_make_it_clean_through_the_older_of_the_two(tmp_path):
    book = ledger(tmp_path)
    book.saved(30, tags(30, 30))

    (marked,) = book.passed(40, 35)

    assert marked.step == 30
    assert written(tmp_path, 30)["clean_through"] == 35


def test_after_an_alarm_no_check_of_this_run_confirms_an_earlier_save(tmp_path):
    book = ledger(tmp_path)
    book.saved(35, tags(30, 30))
    book.alarm({"step": 36, "check": "weights", "suspect_window": [32, 36]})

    assert book.passed(40, 40) == []
    assert written(tmp_path, 35)["clean_through"] is None


def test_an_alarm_writes_its_suspect_window_beside_the_checkpoints(tmp_path):
    ledger(tmp_path).alarm({"step": 36, "check": "weights", "suspect_window": [32, 36]})

    marker = json.loads((tmp_path / marker_name(36)).read_text())

    assert marker["schema"] == "sdc.alarm-marker"
    assert marker["version"] == 1
    assert (marker["step"], marker["check"], marker["suspect_window"]) == (36, "weights", [32, 36])
    assert marker["resolved"] is None


# ---- safe_checkpoint --------------------------------------------------------------------------


def test_a_checkpoint_never_followed_by_a_passing_check_is_not_returned(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    save(book, tmp_path, 35)  # no check after it: the job stopped

    safe = safe_checkpoint(tmp_path)

    assert safe.step == 30
    assert safe.skipped == ("step 35: no audit and weight check passed after it",)


def test_with_no_clean_checkpoint_it_says_plainly_that_none_is(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 35)

    safe = safe_checkpoint(tmp_path)

    assert safe.manifest is None and safe.step is None
    assert safe.reason.startswith("no checkpoint is safe: none of the 1 with a manifest is clean")
    with pytest.raises(NoSafeCheckpoint, match="no checkpoint is safe"):
        safe.require()


def test_a_clean_checkpoint_inside_a_suspect_window_is_not_returned(tmp_path):
    book = ledger(tmp_path)
    for step in (20, 30):
        save(book, tmp_path, step)
        book.passed(step + 1, step + 1)
    book.alarm({"step": 40, "check": "compute", "suspect_window": [26, 40]})

    safe = safe_checkpoint(tmp_path)

    assert safe.step == 20
    assert "before the suspect window starting at step 26 (compute alarm at step 40" in safe.reason


def test_every_recorded_window_counts_the_earliest_start_wins(tmp_path):
    book = ledger(tmp_path)
    for step in (10, 20, 30):
        save(book, tmp_path, step)
        book.passed(step + 1, step + 1)
    ledger(tmp_path).alarm({"step": 40, "check": "weights", "suspect_window": [32, 40]})
    ledger(tmp_path).alarm({"step": 41, "check": "compute", "suspect_window": [15, 41]})

    assert safe_checkpoint(tmp_path).step == 10


def test_a_torn_manifest_is_ignored_with_a_warning(tmp_path, caplog):
    book = ledger(tmp_path)
    for step in (20, 30):
        save(book, tmp_path, step)
        book.passed(step + 1, step + 1)
    whole = (tmp_path / manifest_name(30)).read_bytes()
    (tmp_path / manifest_name(30)).write_bytes(whole[: len(whole) // 2])

    with caplog.at_level(logging.WARNING, logger="trainer_emitter.checkpoints"):
        safe = safe_checkpoint(tmp_path)

    assert safe.step == 20
    assert len(safe.ignored) == 1 and "not JSON (a torn write?)" in safe.ignored[0]
    assert "manifest ignored, not trusted" in caplog.text


@pytest.mark.parametrize(
    "change",
    [
        {"schema": "someone.else"},
        {"version": 2},
        {"step": 31},  # not the step its name says
        {"clean_through": 30},  # not after its step
        {"last_audit_pass": "30"},
    ],
)
def test_a_foreign_or_malformed_manifest_is_never_trusted(tmp_path, change):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    body = {**written(tmp_path, 30), **change}
    (tmp_path / manifest_name(30)).write_text(json.dumps(body))

    safe = safe_checkpoint(tmp_path)

    assert safe.manifest is None
    assert len(safe.ignored) == 1


def test_an_unreadable_alarm_marker_leaves_nothing_safe(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    (tmp_path / marker_name(36)).write_text('{"schema": "sdc.alarm-marker", "vers')

    safe = safe_checkpoint(tmp_path)

    assert safe.manifest is None
    assert "an alarm marker cannot be read" in safe.reason


def test_an_alarm_without_a_window_leaves_nothing_safe(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    ledger(tmp_path).alarm({"step": None, "check": "weights", "suspect_window": None})

    safe = safe_checkpoint(tmp_path)

    assert safe.manifest is None
    assert "an alarm named no suspect window" in safe.reason


def test_an_empty_or_missing_directory_has_no_safe_checkpoint(tmp_path):
    assert safe_checkpoint(tmp_path / "nothing").reason == (
        "no checkpoint is safe: the directory holds no checkpoint manifest"
    )


# ---- a resumed run ----------------------------------------------------------------------------


def test_resuming_before_the_window_retires_later_manifests_and_resolves_the_alarm(tmp_path):
    book = ledger(tmp_path)
    for step in (30, 35):
        save(book, tmp_path, step)
    book.passed(31, 31)
    book.alarm({"step": 36, "check": "weights", "suspect_window": [32, 36]})

    CheckpointLedger(tmp_path, clock=lambda: NOW, run="run-2").resumed(30)

    held = read_directory(LocalStore(tmp_path))
    assert sorted(held.manifests) == [30]
    assert held.markers[36].resolved == {"resumed_from": 30, "at": NOW.isoformat()}
    assert safe_checkpoint(tmp_path).step == 30


def test_resuming_inside_the_window_keeps_the_alarm_open(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 35)
    book.passed(36, 36)
    ledger(tmp_path).alarm({"step": 40, "check": "compute", "suspect_window": [32, 40]})

    CheckpointLedger(tmp_path, run="run-2").resumed(35)

    assert read_directory(LocalStore(tmp_path)).markers[40].resolved is None
    assert safe_checkpoint(tmp_path).manifest is None


# ---- atomic writes ----------------------------------------------------------------------------


def test_a_write_that_fails_before_the_rename_keeps_the_old_manifest_and_no_temporary(
    tmp_path, monkeypatch, caplog
):
    book = ledger(tmp_path)
    book.saved(30, tags(30, 30))
    before = (tmp_path / manifest_name(30)).read_bytes()

    def crash(*_):
        raise OSError("no space left on device")

    monkeypatch.setattr(os, "fsync", crash)
    with caplog.at_level(logging.ERROR, logger="trainer_emitter.checkpoints"):
        assert book.passed(31, 31) == []  # logged, never raised into training

    assert (tmp_path / manifest_name(30)).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [manifest_name(30)]
    assert "no space left on device" in caplog.text


def test_a_temporary_left_by_a_crash_is_never_read_as_a_manifest(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    (tmp_path / f".{manifest_name(35)}.0a1b2c.tmp").write_text('{"step": 3')

    safe = safe_checkpoint(tmp_path)

    assert (safe.step, safe.ignored) == (30, ())


# ---- the loaders' values ----------------------------------------------------------------------


def test_dcp_and_torchtitan_pass_over_a_safe_checkpoint_whose_save_did_not_finish(tmp_path):
    book = ledger(tmp_path)
    for step in (20, 30):
        save(book, tmp_path, step)
        book.passed(step + 1, step + 1)
    (tmp_path / "step-30" / ".metadata").unlink()

    assert dcp_step(tmp_path) == 20
    assert torchtitan_load_step(tmp_path) == 20
    assert safe_checkpoint(tmp_path).step == 30  # the manifest alone knows nothing of DCP


def test_nemo_gets_the_safe_checkpoint_s_path(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)

    assert nemo_resume_path(tmp_path) == str(tmp_path / "step-30")


def test_every_loader_refuses_with_the_reason_rather_than_fall_back_to_the_newest(tmp_path):
    save(ledger(tmp_path), tmp_path, 30)

    for loader in (dcp_step, torchtitan_load_step, nemo_resume_path):
        with pytest.raises(NoSafeCheckpoint, match="none of the 1 with a manifest is clean"):
            loader(tmp_path)


# ---- the schedule -----------------------------------------------------------------------------


def test_confirm_checkpoints_audits_and_checks_weights_on_the_step_after_each_save():
    schedule = Schedule(audit_every=10, check_every=10, ckpt_every=5, confirm_checkpoints=True)

    assert [s for s in range(1, 22) if schedule.is_audit(s)] == [6, 10, 11, 16, 20, 21]
    assert [s for s in range(1, 22) if schedule.is_weight_check(s)] == [
        5,
        6,
        10,
        11,
        15,
        16,
        20,
        21,
    ]


def test_confirm_checkpoints_must_be_a_flag():
    with pytest.raises(ValueError, match=r"Schedule\.confirm_checkpoints must be True or False"):
        Schedule(confirm_checkpoints=1)  # type: ignore[arg-type]


# ---- a location named twice -------------------------------------------------------------------


def test_a_clean_manifest_whose_location_a_later_save_names_too_is_not_returned(tmp_path):
    # Given a clean save at step 30 and a save at step 35, inside the suspect window, whose
    # manifest names the same location (the bytes there are step 35's)
    book = ledger(tmp_path)
    save(book, tmp_path, 20)
    book.passed(21, 21)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    book.saved(35, tags(31, 31), location=str(tmp_path / "step-30"), fingerprint="sha256:35")
    book.alarm({"step": 36, "check": "weights", "suspect_window": [32, 36]})
    # When the safe checkpoint is chosen
    safe = safe_checkpoint(tmp_path)
    # Then step 30 is passed over, saying why, and the older save with its own location is named
    assert safe.step == 20
    assert any(
        line.startswith("step 30:") and "also named by the manifest of step 35" in line
        for line in safe.skipped
    )


def test_every_loader_refuses_a_location_two_manifests_name(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)
    book.passed(31, 31)
    book.saved(35, tags(31, 31), location=str(tmp_path / "step-30"), fingerprint="sha256:35")
    book.passed(36, 36)

    for loader in (dcp_step, torchtitan_load_step, nemo_resume_path):
        with pytest.raises(NoSafeCheckpoint, match="also named by the manifest of step"):
            loader(tmp_path)


def test_the_loaded_weights_must_carry_the_fingerprint_the_manifest_recorded(tmp_path):
    book = ledger(tmp_path)
    save(book, tmp_path, 30)  # recorded fingerprint "sha256:00"
    book.passed(31, 31)
    safe = safe_checkpoint(tmp_path)

    safe.verify_loaded("sha256:00")
    with pytest.raises(CheckpointMismatch, match=r"step 30.*sha256:35.*sha256:00"):
        safe.verify_loaded("sha256:35")
