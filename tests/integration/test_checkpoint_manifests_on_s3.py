"""The checkpoint manifests and alarm markers in S3 (moto): one PutObject per write, read back by
`safe_checkpoint("s3://…")`; a torn object is ignored as on disk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from trainer_emitter.checkpoints import CheckpointLedger, S3Store, nemo_resume_path, safe_checkpoint
from trainer_emitter.checkpoints.manifest import manifest_name

REGION = "us-west-2"
BUCKET = "training-ckpt"
PREFIX = "llama-70b/run-7"
URL = f"s3://{BUCKET}/{PREFIX}"


pytestmark = pytest.mark.usefixtures("fake_aws_credentials")


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield client


class CountingClient:
    """The S3 client, with the calls the store made, by operation."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.client, name)


def test_each_manifest_write_is_one_put_object(s3):
    counting = CountingClient(s3)
    ledger = CheckpointLedger(S3Store(URL, counting), run="run-1")

    ledger.saved(
        30, {"last_audit_pass": 30, "last_weight_check_pass": 30}, location=f"{URL}/step-30"
    )
    ledger.passed(31, 31)

    assert counting.calls == ["put_object", "put_object"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == [f"{PREFIX}/{manifest_name(30)}"]


def test_safe_checkpoint_reads_an_s3_directory_and_skips_the_window(s3):
    ledger = CheckpointLedger(URL, run="run-1")
    for step in (30, 35):
        ledger.saved(
            step,
            {"last_audit_pass": step, "last_weight_check_pass": step},
            location=f"{URL}/step-{step}",
        )
        ledger.passed(step + 1, step + 1)
    ledger.alarm({"step": 40, "check": "weights", "suspect_window": [33, 40]})

    safe = safe_checkpoint(URL)

    assert safe.step == 30
    assert safe.skipped == ("step 35: at or after step 33, where a suspect window starts",)
    assert nemo_resume_path(URL) == f"{URL}/step-30"


def test_a_torn_manifest_object_is_ignored(s3):
    ledger = CheckpointLedger(URL, run="run-1")
    ledger.saved(30, {"last_audit_pass": 30, "last_weight_check_pass": 30})
    ledger.passed(31, 31)
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{manifest_name(35)}", Body=b'{"schema": "sdc.ch')

    safe = safe_checkpoint(URL)

    assert safe.step == 30
    assert safe.ignored == (
        f"{URL}/{manifest_name(35)}: not JSON (a torn write?): "
        "Unterminated string starting at: line 1 column 12 (char 11)",
    )


def test_objects_beside_the_prefix_are_not_read(s3):
    CheckpointLedger(URL, run="run-1").saved(30, {})
    CheckpointLedger(f"{URL}-other", run="run-2").saved(40, {})

    assert S3Store(URL).names() == [manifest_name(30)]
