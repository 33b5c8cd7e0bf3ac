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
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

import sdc_remediation.lambdas

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

LAMBDAS_PACKAGE: Final = sdc_remediation.lambdas.__name__
"""The functions' package, shipped in the asset at the place its name says (the handlers are
`<it>.handlers.<module>.handler`), with the `__init__.py` of the package above it, if any."""
CONTRACT: Final = ("__init__.py", "contract.py", "schemas")
"""What of `trainer_emitter` the functions run: the contract and the report schema (the emitter,
its spool, sinks and checks stay on the training side)."""
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


@dataclass(frozen=True)
class Sources:
    """Where the asset's code is read from: the folders of the packages it ships, found by
    import (a clone, or an installed package: the code's own folders are only read)."""

    lambdas: Path
    trainer_emitter: Path
    parent_init: Path | None
    """The `__init__.py` of the package that holds `lambdas`, where it has one."""

    @classmethod
    def imported(cls) -> Sources:
        parent = LAMBDAS_PACKAGE.rpartition(".")[0]
        return cls(
            lambdas=_folder(LAMBDAS_PACKAGE),
            trainer_emitter=_folder("trainer_emitter"),
            parent_init=_folder(parent) / "__init__.py" if parent else None,
        )

    @classmethod
    def in_tree(cls, root: Path) -> Sources:
        """A tree laid out as this repository is (the packages' folders at its top)."""
        parent = LAMBDAS_PACKAGE.rpartition(".")[0]
        return cls(
            lambdas=root / "lambdas",
            trainer_emitter=root / "trainer_emitter",
            parent_init=root / parent.replace(".", "/") / "__init__.py" if parent else None,
        )

    def files(self) -> list[tuple[Path, PurePosixPath]]:
        """Each file of the asset's code, with where it goes in the asset; sorted by the latter."""
        placed: list[tuple[Path, PurePosixPath]] = []
        package = PurePosixPath(*LAMBDAS_PACKAGE.split("."))
        placed += [(f, package / r) for f, r in _files_under(self.lambdas)]
        if self.parent_init is not None:
            placed.append((self.parent_init, package.parent / "__init__.py"))
        for part in CONTRACT:
            placed += [
                (f, PurePosixPath("trainer_emitter") / r)
                for f, r in _files_under(self.trainer_emitter / part, self.trainer_emitter)
            ]
        return sorted(placed, key=lambda item: item[1])


def _folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"building the Lambda asset: package {package} not found")
    return Path(next(iter(spec.submodule_search_locations)))


def _files_under(path: Path, base: Path | None = None) -> list[tuple[Path, PurePosixPath]]:
    base = base or path
    found = path.rglob("*") if path.is_dir() else [path]
    return [
        (f, PurePosixPath(f.relative_to(base).as_posix()))
        for f in found
        if f.is_file() and f.suffix in SOURCE_SUFFIXES and "__pycache__" not in f.parts
    ]


def deps_key() -> str:
    spec = "\n".join([PYTHON_VERSION, PLATFORM, *REQUIREMENTS])
    return hashlib.sha256(spec.encode()).hexdigest()


def asset_key(sources: Sources | Path | None = None) -> str:
    """Hash of every input of the asset: the dependency spec and each code file's place in the
    asset and bytes (the same from a clone and from an install)."""
    digest = hashlib.sha256(deps_key().encode())
    for path, place in _sources(sources).files():
        digest.update(b"\0" + place.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _sources(sources: Sources | Path | None) -> Sources:
    if sources is None:
        return Sources.imported()
    return Sources.in_tree(sources) if isinstance(sources, Path) else sources


def build_lambda_asset(
    out_dir: Path | None = None,
    *,
    repo_root: Sources | Path | None = None,
    pip: PipRunner = _run_pip,
    wheelhouse: Path | None = None,
) -> LambdaAsset:
    """Build (or reuse) the asset at `out_dir` (default `lambda-asset-<key>` in `asset_root()`,
    never beside the code); return it.

    Rebuilds only when `asset_key()` differs from the key recorded at the last build, and reruns
    pip only when the dependency pins changed. Safe against a concurrent build (file lock).
    """
    sources = _sources(repo_root)
    key = asset_key(sources)
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
        for path, place in sources.files():
            target = staging / place
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
