"""The fault suite's figures: each table-driven test records what it saw, and the suite prints
the totals at the end of the run (`pytest tests/faults`; tests/conftest.py prints them, and
under pytest-xdist collects them from the workers), for the issue note."""

from __future__ import annotations

from collections import Counter, defaultdict

FIGURES: defaultdict[str, Counter[str]] = defaultdict(Counter)


def record(category: str, outcome: str, count: int = 1) -> None:
    FIGURES[category][outcome] += count


def merge(figures: dict[str, dict[str, int]]) -> None:
    """Add figures recorded elsewhere (a pytest-xdist worker's) to this process's."""
    for category, counts in figures.items():
        FIGURES[category].update(counts)


def summary() -> list[str]:
    return [
        f"{category}: " + ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts.items()))
        for category, counts in sorted(FIGURES.items())
    ]
