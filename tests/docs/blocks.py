"""The fenced code blocks of README.md and docs/*.md, each with what it says about itself.

Every block is preceded (blank lines aside) by one HTML comment, invisible where the Markdown is
rendered, that says how the tests run it or why they cannot:

    <!-- check: KIND [ARGUMENT] -->          tests/docs runs it as KIND (see test_markers.py)
    <!-- not run here: REASON -->            it needs what no test here has (an AWS account...)

A block with neither, or with a kind nobody runs, fails `make test`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

DOCUMENTS = ("README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")))

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<what>check|not run here):\s*(?P<say>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    """The line of the opening fence (1-based)."""
    lang: str
    text: str
    """The content, dedented by the fence's indent."""
    marker: tuple[str, str] | None
    """`("check", "KIND ARGUMENT")` or `("not run here", REASON)`; None without a marker."""

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def kind(self) -> str | None:
        if self.marker is None or self.marker[0] != "check":
            return None
        return self.marker[1].split(maxsplit=1)[0] if self.marker[1] else ""

    @property
    def argument(self) -> str:
        if self.marker is None or self.marker[0] != "check":
            return ""
        parts = self.marker[1].split(maxsplit=1)
        return parts[1] if len(parts) > 1 else ""


def read_blocks(document: str, text: str) -> list[Block]:
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f"{document}:{i + 1}: the code block is never closed")
        body = textwrap.dedent("\n".join(line[indent:] for line in lines[i + 1 : end]))
        found.append(Block(document, i + 1, opening["lang"], body, _marker_above(lines, i)))
        i = end + 1
    return found


def _marker_above(lines: list[str], fence: int) -> tuple[str, str] | None:
    above = fence - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    if above < 0:
        return None
    found = MARKER.match(lines[above])
    return (found["what"], found["say"]) if found else None


def all_blocks() -> list[Block]:
    return [b for doc in DOCUMENTS for b in read_blocks(doc, (REPO / doc).read_text())]


def blocks_of(kind: str) -> list[Block]:
    return [b for b in all_blocks() if b.kind == kind]


def in_document(document: str) -> Path:
    return REPO / document
