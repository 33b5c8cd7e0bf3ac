"""The emitter's spool is the user's own: a folder someone else owns or can write to is refused
when the emitter is built, spool files are never followed through a link, and a replay sends
only records that are valid reports, setting the others aside."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import load_fixture
from trainer_emitter import Emitter, MemorySink
from trainer_emitter import spool as spool_module
from trainer_emitter.spool import SpoolError


def emitter(spool_dir: Path, sink: MemorySink | None = None) -> Emitter:
    return Emitter(
        cluster_name="ml-cluster-1",
        job_name="llama-pretrain",
        region="us-west-2",
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        sink=sink or MemorySink(),
        spool_dir=spool_dir,
        deadline=2.0,
    )


def record_line(**report_changes) -> str:
    report = {**load_fixture("events", "sdc_report")["detail"], **report_changes}
    return json.dumps(
        {
            "spool_version": 1,
            "spooled_at": "2026-11-30T08:15:00+00:00",
            "reason": "deadline",
            "namespace": "SDC/Training",
            "pending": ["event"],
            "datapoints": [],
            "report": report,
        }
    )


def test_a_missing_spool_folder_is_created_private_to_the_user(tmp_path):
    spool_dir = tmp_path / "spool"

    emitter(spool_dir)

    assert spool_dir.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_spool_folder_others_can_write_to_is_refused_when_the_emitter_is_built(tmp_path, mode):
    spool_dir = tmp_path / "world-writable"
    spool_dir.mkdir()
    spool_dir.chmod(mode)

    with pytest.raises(SpoolError, match="writable by group or others"):
        emitter(spool_dir)


def test_a_spool_folder_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: os.lstat(tmp_path).st_uid + 1)

    with pytest.raises(SpoolError, match="owned by uid"):
        emitter(tmp_path)


def test_a_spool_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")

    with pytest.raises(SpoolError, match="not a folder"):
        emitter(tmp_path / "link")


def test_a_spool_file_planted_as_a_link_is_not_written_through(tmp_path):
    spool_dir = tmp_path / "spool"
    failing = MemorySink(fail=True)
    emitting = emitter(spool_dir, failing)
    target = tmp_path / "victim"
    target.write_text("untouched\n")
    emitting.spool_path.symlink_to(target)

    result = emitting.report(load_fixture("alarms", "weights_no_majority"))

    assert not result.spooled and target.read_text() == "untouched\n"


def test_replay_sets_an_invalid_record_aside_and_sends_only_the_valid_ones(tmp_path):
    path = tmp_path / "sdc-spool.rank0.1.jsonl"
    valid = json.loads(record_line())["report"]["report_id"]
    path.write_text(record_line() + "\n" + record_line(report_id="forged", cluster_name=7) + "\n")
    sink = MemorySink()

    result = spool_module.replay([tmp_path], sink)

    assert [e["report_id"] for e in sink.events] == [valid]
    assert result.delivered == [valid] and result.invalid == ["forged"] and not result.ok
    aside = path.with_suffix(".jsonl.invalid").read_text().splitlines()
    assert [json.loads(line)["report"]["report_id"] for line in aside] == ["forged"]


def test_replay_does_not_follow_a_spool_file_that_is_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text(record_line() + "\n")
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    (spool_dir / "sdc-spool.rank0.1.jsonl").symlink_to(elsewhere)
    sink = MemorySink()

    with pytest.raises(OSError):
        spool_module.replay([spool_dir / "sdc-spool.rank0.1.jsonl"], sink)

    assert sink.events == [] and elsewhere.read_text() == record_line() + "\n"


def planted(tmp_path: Path, mode: int) -> Path:
    """A spool folder with one valid record in it, its mode set to `mode`."""
    spool_dir = tmp_path / "planted"
    spool_dir.mkdir()
    (spool_dir / "sdc-spool.rank0.1.jsonl").write_text(record_line() + "\n")
    spool_dir.chmod(mode)
    return spool_dir


@pytest.mark.parametrize("given", ["folder", "file"])
def test_replay_refuses_a_folder_others_can_write_to_as_the_writer_does(tmp_path, given):
    # Given a world-writable folder holding a planted record
    spool_dir = planted(tmp_path, 0o1777)
    path = spool_dir if given == "folder" else spool_dir / "sdc-spool.rank0.1.jsonl"
    sink = MemorySink()
    # When it is replayed (the folder itself, or a file in it)
    with pytest.raises(SpoolError, match="writable by group or others") as refused:
        spool_module.replay([path], sink)
    # Then nothing is sent, the record stays, and the refusal is the writer's
    assert sink.events == []
    assert (spool_dir / "sdc-spool.rank0.1.jsonl").read_text() == record_line() + "\n"
    with pytest.raises(SpoolError) as written:
        emitter(spool_dir)
    assert str(refused.value) == str(written.value)


def test_replay_refuses_a_folder_owned_by_another_user(tmp_path, monkeypatch):
    spool_dir = planted(tmp_path, 0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.lstat(spool_dir).st_uid + 1)
    sink = MemorySink()

    with pytest.raises(SpoolError, match="owned by uid"):
        spool_module.replay([spool_dir], sink)

    assert sink.events == []


def test_the_replay_command_refuses_an_unsafe_folder_with_one_message_before_sending(
    tmp_path, capsys
):
    spool_dir = planted(tmp_path, 0o777)

    code = spool_module.main([str(spool_dir), "--region", "us-west-2"])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == spool_module.REFUSED_EXIT
    assert len(err) == 1 and "writable by group or others" in err[0] and str(spool_dir) in err[0]
