"""The size of the Lambda asset: the project's own sources in it, the whole directory, the zip.

The asset is built the way the tests and `cdk synth` build it (offline, from the wheelhouse).
The zip is what CDK uploads: the directory deflated at level 9, as CDK zips an asset.
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path
from typing import Any

from sdc_remediation.infra.stack.asset import build_lambda_asset

PROJECT_PACKAGES = ("lambdas", "trainer_emitter", "sdc_remediation")
"""The asset's top-level folders that hold the project's own code."""


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _zipped_bytes(root: Path) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "asset.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
            for path in _files(root):
                out.write(path, path.relative_to(root).as_posix())
        return archive.stat().st_size


def _row(name: str, value: float, unit: str, ratio: float | None = None) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": "-"}


def run() -> list[dict[str, Any]]:
    root = build_lambda_asset().path
    everything = _files(root)
    own = [p for p in everything if p.relative_to(root).parts[0] in PROJECT_PACKAGES]
    own_bytes = sum(p.stat().st_size for p in own)
    all_bytes = sum(p.stat().st_size for p in everything)
    return [
        _row("project source files", len(own), "files"),
        _row("project source bytes", own_bytes / 1024, "KiB", own_bytes / all_bytes),
        _row("asset files", len(everything), "files"),
        _row("asset bytes", all_bytes / 1024, "KiB"),
        _row("asset zipped", _zipped_bytes(root) / 1024, "KiB"),
    ]
