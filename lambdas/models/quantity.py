"""A number with its unit, the unit agreeing with the number: `1 minute`, `2 minutes`,
`1 window`. Every message that puts a count before a unit says it through `count`."""

from __future__ import annotations

IRREGULAR: dict[str, str] = {"entry": "entries"}
"""Units whose plural is not the singular with an `s`."""


def count(number: int | float, unit: str) -> str:
    """`number` and `unit`, the unit singular for exactly one and plural otherwise."""
    if number == 1:
        return f"{number:g} {unit}"
    return f"{number:g} {IRREGULAR.get(unit, unit + 's')}"
