"""Small, strict readers for JSON payloads: each failure names the dotted path of the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdc_remediation.lambdas.models.errors import MalformedEvent

_MISSING = object()


def obj(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedEvent(path, f"expected an object, got {type(value).__name__}")
    return value


def get(parent: Mapping[str, Any], key: str, path: str) -> Any:
    value = parent.get(key, _MISSING)
    if value is _MISSING:
        raise MalformedEvent(_join(path, key), "missing")
    return value


def text(parent: Mapping[str, Any], key: str, path: str) -> str:
    """A required, non-empty string."""
    value = get(parent, key, path)
    if not isinstance(value, str) or not value.strip():
        raise MalformedEvent(_join(path, key), f"expected a non-empty string, got {value!r}")
    return value


def nullable_text(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedEvent(_join(path, key), f"expected a string or null, got {value!r}")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
