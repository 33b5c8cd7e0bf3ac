"""Reading a stored record into a dataclass: the keys it knows, nothing else."""

from __future__ import annotations

import dataclasses
from typing import Any


def known_fields(cls: type, record: dict[str, Any]) -> dict[str, Any]:
    """The items of `record` that name a field of the dataclass `cls` (an older or newer writer
    may have left others)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in record.items() if k in names}


def present(**values: Any) -> dict[str, Any]:
    """The items whose value is not None: keys a step writes only once it knows them."""
    return {k: v for k, v in values.items() if v is not None}
