"""The Lambda code asset, built with pip and no Docker.

The asset is `lambdas/`, the contract of `trainer_emitter/` (the names both sides share and the
report schema), a pinned boto3/botocore (the Lambda runtime's own boto3 may predate
`start_cluster_health_check` / `batch_replace_cluster_nodes`), Powertools with its tracer extra,
fastjsonschema (an SDC Report is checked against its JSON Schema) and tzdata (the approval
deadline in the approvers' time zone: `zoneinfo` falls back to it where the runtime has no time
zone database). pip fetches Linux wheels for the Lambda runtime's CPython (`--platform
manylinux2014_x86_64 --only-binary=:all:`), so the build needs no Docker and runs on any host.

Offline: `pip download` fills a wheelhouse once (`default_wheelhouse()`, outside the work tree),
and the install runs from it with `--no-index`. pip's own HTTP cache is not enough for that:
pip revalidates index pages online even when it holds the wheels.

The build is keyed by a hash of its inputs (the pip arguments and every source file), so it
reruns only when they change. Nothing is written beside the code: an installed, read-only
package synthesizes too. Everything goes to a cache folder of the user's (`asset_root()`:
`$SDC_ASSET_DIR`, else `$XDG_CACHE_HOME` or `~/.cache`, under `sdc-remediation/`):

    lambda-wheels/<deps key>/    the downloaded wheels (`$SDC_WHEELHOUSE` moves them alone)
    lambda-deps/<deps key>/      the pip install, reused while the pins stay the same
    lambda-asset-<asset key>/    deps (hard links) + sources; the asset CDK uploads
    lambda-asset-<asset key>.key the key it holds, touched on each use; one unused for
                                 `STALE_AFTER_DAYS` is removed when another is built
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]

PYTHON_VERSION: Final = "3.13"
"""CPython of the Lambda runtime (functions.py derives the runtime from it)."""

PLATFORM: Final = "manylinux2014_x86_64"
"""Wheels for the x86_64 Lambda architecture."""

REQUIREMENTS: Final = (
    "boto3==1.44.5",
    "botocore==1.44.5",
    "aws-lambda-powertools[tracer]==3.37.0",
    "fastjsonschema==2.22.3",
    "tzdata==2026.6",  # the approvers' time zone: the Amazon Linux 2023 runtimes ship no tz database
    # The transitive closure, pinned too so that the same key always means the same asset.
    "aws-xray-sdk==2.15.0",
    "jmespath==1.1.0",
    "python-dateutil==2.9.0.post0",
    "s3transfer==0.19.3",
    "six==1.17.0",
    "typing-extensions==4.16.0",
    "urllib3==2.8.0",
    "wrapt==2.5.2",
)

SOURCES: Final = (
    "lambdas",
    "trainer_emitter/__init__.py",
    "trainer_emitter/contract.py",
    "trainer_emitter/schemas",
)
"""What of the repository the functions run: all of `lambdas/`, and of the training side only
the contract and the report schema (the emitter, its spool, sinks and checks stay out)."""
SOURCE_SUFFIXES: Final = (".py", ".json")

PipRunner = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class LambdaAsset:
    """A built asset directory and the hash of its inputs (used as the CDK asset hash)."""

    path: Path
    key: str


def _platform_arguments() -> list[str]:
    return [
        "--platform",
        PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--only-binary=:all:",
    ]


def download_arguments(wheelhouse: Path) -> list[str]:
    """`pip download` of the pinned wheels into the wheelhouse (needs the index or pip's cache)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--dest",
        str(wheelhouse),
        *_platform_arguments(),
        *REQUIREMENTS,
    ]


def install_arguments(target: Path, wheelhouse: Path) -> list[str]:
    """`pip install --target` from the wheelhouse only: no index, so no network."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--no-index",
        "--find-links",
        str(wheelhouse),
        "--target",
        str(target),
        *_platform_arguments(),
        *REQUIREMENTS,
    ]


def asset_root() -> Path:
    """The folder the asset is built in, outside the code so that a read-only install
    synthesizes: `$SDC_ASSET_DIR`, else `$XDG_CACHE_HOME` or `~/.cache`, under
    `sdc-remediation/`."""
    if os.environ.get("SDC_ASSET_DIR"):
        return Path(os.environ["SDC_ASSET_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sdc-remediation"


def default_wheelhouse() -> Path:
    """Where the downloaded wheels are kept, outside the work tree so that a fresh clone on the
    same machine builds offline: `$SDC_WHEELHOUSE`, else `lambda-wheels/` in `asset_root()`."""
    if os.environ.get("SDC_WHEELHOUSE"):
        return Path(os.environ["SDC_WHEELHOUSE"])
    return asset_root() / "lambda-wheels"


def _run_pip(args: Sequence[str]) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            "building the Lambda asset failed: pip could not fetch or install the pinned "
            "dependencies (offline before the wheels were ever downloaded?)\n"
            f"command: {' '.join(args)}\n{result.stdout}\n{result.stderr}"
        )


def source_files(repo_root: Path = REPO_ROOT) -> list[Path]:
    """The files of `SOURCES` that go into the asset, sorted."""
    files = []
    for source in SOURCES:
        root = repo_root / source
        for path in root.rglob("*") if root.is_dir() else [root]:
            if (
                path.is_file()
                and path.suffix in SOURCE_SUFFIXES
                and "__pycache__" not in path.relative_to(repo_root).parts
            ):
                files.append(path)
    return sorted(files)


def deps_key() -> str:
    spec = "\n".join([PYTHON_VERSION, PLATFORM, *REQUIREMENTS])
    return hashlib.sha256(spec.encode()).hexdigest()


def asset_key(repo_root: Path = REPO_ROOT) -> str:
    """Hash of every input of the asset: the dependency spec and each source file's path and bytes."""
    digest = hashlib.sha256(deps_key().encode())
    for path in source_files(repo_root):
        digest.update(b"\0" + path.relative_to(repo_root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def build_lambda_asset(
    out_dir: Path | None = None,
    *,
    repo_root: Path = REPO_ROOT,
    pip: PipRunner = _run_pip,
    wheelhouse: Path | None = None,
) -> LambdaAsset:
    """Build (or reuse) the asset at `out_dir` (default `lambda-asset-<key>` in `asset_root()`,
    never beside the code); return it.

    Rebuilds only when `asset_key()` differs from the key recorded at the last build, and reruns
    pip only when the dependency pins changed. Safe against a concurrent build (file lock).
    """
    key = asset_key(repo_root)
    if out_dir is None:
        out_dir = asset_root() / f"{ASSET_PREFIX}{key[:16]}"
    out_dir = out_dir.resolve()
    build_root = out_dir.parent
    build_root.mkdir(parents=True, exist_ok=True)
    stamp = out_dir.with_name(out_dir.name + ".key")

    with locked(build_root / f".{out_dir.name}.lock"):
        if out_dir.is_dir() and stamp.is_file() and stamp.read_text().strip() == key:
            stamp.touch()
            return LambdaAsset(path=out_dir, key=key)

        _remove_stale_assets(build_root, keep=out_dir.name)
        staging = out_dir.with_name(f"{out_dir.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        # the dependencies are shared by every asset of the same pins: one builder at a time
        with locked(build_root / ".lambda-deps.lock"):
            deps = _ensure_deps(build_root / "lambda-deps", wheelhouse or default_wheelhouse(), pip)
            shutil.copytree(deps, staging, copy_function=_link_or_copy, ignore=_ignore_marker)
        for path in source_files(repo_root):
            target = staging / path.relative_to(repo_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)

        stamp.unlink(missing_ok=True)
        shutil.rmtree(out_dir, ignore_errors=True)
        staging.rename(out_dir)
        stamp.write_text(key + "\n")
    return LambdaAsset(path=out_dir, key=key)


_COMPLETE: Final = ".complete"
ASSET_PREFIX: Final = "lambda-asset-"
STALE_AFTER_DAYS: Final = 14
"""An asset of other sources (another clone, an older commit) unused this long is removed."""


def _remove_stale_assets(build_root: Path, *, keep: str) -> None:
    cutoff = time.time() - STALE_AFTER_DAYS * 86400
    for stamp in build_root.glob(f"{ASSET_PREFIX}*.key"):
        folder = stamp.with_suffix("")
        if folder.name != keep and stamp.stat().st_mtime < cutoff:
            stamp.unlink(missing_ok=True)
            shutil.rmtree(folder, ignore_errors=True)


def _ensure_deps(root: Path, wheelhouse_root: Path, pip: PipRunner) -> Path:
    key = deps_key()
    target = root / key[:16]
    if (target / _COMPLETE).is_file():
        return target
    wheels = wheelhouse_root / key[:16]
    if not (wheels / _COMPLETE).is_file():
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir(parents=True)
        pip(download_arguments(wheels))
        (wheels / _COMPLETE).write_text(key + "\n")
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.iterdir():
        shutil.rmtree(stale, ignore_errors=True)
    pip(install_arguments(target, wheels))
    # pip --target drops console scripts into bin/; the functions never run them.
    shutil.rmtree(target / "bin", ignore_errors=True)
    (target / _COMPLETE).write_text(key + "\n")
    return target


def _ignore_marker(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n in (_COMPLETE, "__pycache__")]


def _link_or_copy(src: str, dst: str) -> object:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing): one builder at a time across
    processes (parallel test workers share build/)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
