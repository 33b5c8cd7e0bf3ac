"""How a context value reads, whatever the key: one error shape (`fail`), JSON given as a
string on the command line (`json_if_string`), an integer in a range given as a number or its
text (`integer`). The settings' parsers and `sdc:idleSweep`'s fields share them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sdc_remediation.lambdas.models.errors import SettingsError


def fail(key: str, value: Any, expected: str) -> SettingsError:
    return SettingsError(f"context key {key}={value!r}: expected {expected}")


def json_if_string(key: str, value: Any, expected: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise fail(key, value, expected + " (as JSON)") from err
    return value


def integer(low: int, high: int) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        parsed: int
        if isinstance(value, bool):
            raise fail(key, value, f"an integer in {low}..{high}")
        if isinstance(value, int):
            parsed = value
        elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            parsed = int(value)
        else:
            raise fail(key, value, f"an integer in {low}..{high}")
        if not low <= parsed <= high:
            raise fail(key, value, f"an integer in {low}..{high}")
        return parsed

    return parse
