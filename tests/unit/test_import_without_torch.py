"""The emitter's runtime dependency is boto3 alone: torch stays optional and lazily imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO, fixture_path

BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed here")
        return None
sys.meta_path.insert(0, _NoTorch())
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_trainer_emitter_does_not_import_torch():
    done = run(
        """
        import sys
        import trainer_emitter, trainer_emitter.checks, trainer_emitter.watch
        from trainer_emitter.checks import Schedule
        Schedule(audit_every=10)
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
        """
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_emitter_reports_an_alarm_where_torch_cannot_be_imported():
    done = run(
        BLOCK_TORCH
        + f"""
import json
from trainer_emitter import Emitter, MemorySink
rank_map = json.load(open({str(fixture_path("alarms", "rank_map"))!r}))
alarm = json.load(open({str(fixture_path("alarms", "replay_culprit"))!r}))
emitter = Emitter(
    cluster_name="ml-cluster-1", region="us-west-2", sink=MemorySink(), rank_map=rank_map, rank=0
)
result = emitter.report(alarm)
try:
    import torch  # noqa: F401
    print("torch imported")
except ImportError:
    pass
print(result.delivered, result.errors, [d.instance_id for d in result.datapoints])
"""
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True [] ['i-0bb00000000000002']"
