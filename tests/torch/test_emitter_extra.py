"""The emitter's `[torch]` extra in a fresh virtual environment, as a training image installs it:
torch is the image's own (here: this interpreter's torch and what it requires, made visible to
the new environment as an image's site-packages would be, numpy left out), the emitter's wheel
is installed with its `[torch]` extra by pip, and `setup()` all-gathers the rank map under
torchrun (2 ranks, gloo).

pip resolves the extra from its configured sources (the build of the wheel itself is offline, as
in tests/unit/test_distributions.py); the extra brings numpy and boto3's few wheels, never torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.test_distributions import _emitter_wheel, _pip

pytestmark = [pytest.mark.slow, pytest.mark.torch]

WORLD = 2
PROBE = textwrap.dedent(
    """
    import json, os
    import torch.distributed as dist
    import trainer_emitter

    dist.init_process_group("gloo")
    emitter = trainer_emitter.setup(
        cluster_name="ml-cluster-1", region="us-west-2", sink=trainer_emitter.MemorySink()
    )
    # one file a rank: two ranks' prints can land on one line of torchrun's output
    with open(f"probe-{dist.get_rank()}.json", "w") as out:
        json.dump({
            "rank": dist.get_rank(),
            "rank_map": [entry["rank"] for entry in emitter.rank_map.to_list()],
            "emitter": trainer_emitter.__file__,
        }, out)
    dist.barrier()
    dist.destroy_process_group()
    """
)


def _image_torch(into: Path) -> set[str]:
    """Link this interpreter's torch and the distributions it requires into `into`, as a
    training image's site-packages holds them; returns their names."""
    into.mkdir()
    pending, seen = ["torch"], set()
    while pending:
        name = canonicalize_name(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        for raw in dist.requires or ():
            requirement = Requirement(raw)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            source, target = Path(str(dist.locate_file(top))), into / top
            if source.exists() and not target.exists() and not top.endswith(".pth"):
                target.symlink_to(source)
    return seen


def test_a_fresh_venv_with_the_torch_extra_runs_setup_under_torchrun(tmp_path):
    # Given a fresh venv whose only torch is the image's, and the emitter installed into it by
    # pip with its [torch] extra
    image = tmp_path / "image-site-packages"
    brought = _image_torch(image)
    assert "numpy" not in brought  # the extra must bring it
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    (site,) = (env / "lib").glob("python3*/site-packages")
    (site / "image.pth").write_text(f"{image}\n")
    wheel = _emitter_wheel(tmp_path)
    _pip("--python", str(python), "install", "-q", f"{wheel}[torch]")
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}

    # When setup() runs on two ranks under torchrun, from outside the work tree
    (tmp_path / "probe.py").write_text(PROBE)
    done = subprocess.run(
        [
            str(python),
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={WORLD}",
            "probe.py",
        ],
        cwd=tmp_path,
        env={
            "PATH": f"{env / 'bin'}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "NODE_NAME": "hyperpod-i-0aa00000000000001",
            "SDC_SPOOL_DIR": str(tmp_path / "spool"),
            "OMP_NUM_THREADS": "1",
            **{k: v for k, v in os.environ.items() if k in ("TMPDIR",)},
        },
        capture_output=True,
        text=True,
        timeout=240,
    )

    # Then every rank has the whole rank map, from the venv's emitter, and pip installed numpy
    # but no torch of its own
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    probes = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("probe-*.json"))]
    assert sorted(p["rank"] for p in probes) == list(range(WORLD))
    assert all(p["rank_map"] == list(range(WORLD)) for p in probes)
    assert all(p["emitter"].startswith(str(env)) for p in probes)
    assert "numpy" in installed and "torch" not in installed
