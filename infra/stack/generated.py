"""A table generated from the code and kept in a doc between two markers: read back by the drift
tests (`between`), rewritten by each table's own command with `--write` (`table_command`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class GeneratedTable:
    doc: str
    """The doc, relative to the repository (`docs/settings.md`)."""
    start: str
    end: str

    def between(self, text: str) -> str:
        """The table as the doc holds it (between the markers)."""
        start = text.index(self.start) + len(self.start)
        return text[start : text.index(self.end)].strip()

    def write(self, table: str) -> None:
        path = REPO / self.doc
        text = path.read_text(encoding="utf-8")
        start = text.index(self.start) + len(self.start)
        path.write_text(text[:start] + "\n" + table + "\n" + text[text.index(self.end) :])


def table_command(
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str | None,
    where: GeneratedTable,
    build: Callable[[], str],
) -> int:
    """Print the table `build` makes; `--write` puts it into its doc instead."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {where.doc}")
    args = parser.parse_args(argv)
    table = build()
    if args.write:
        where.write(table)
    else:
        print(table)
    return 0
