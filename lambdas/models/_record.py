"""A dataclass as a stored record and back, driven by its fields.

`record_of` writes each field under its own name, in field order: a nested dataclass as its
`to_record()`, an enum as its value, tuples and lists as new lists, dicts as new dicts.
`read_record` reads each field back by its annotation: a dataclass by its `from_record` (one
given already as that dataclass is kept), an enum by value, a list as a tuple where the field is
a tuple. A key that names no field is ignored (an
older or newer writer may have left it); a missing key, or None stored for a field that cannot be
None, takes the field's default. The names in a model's annotations must be importable when it
is read (not only under TYPE_CHECKING): `typing.get_type_hints` resolves them, once per class.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Collection, Mapping
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")


def record_of(
    obj: Any, *, omit_none: Collection[str] = (), skip: Collection[str] = ()
) -> dict[str, Any]:
    """The record of the dataclass instance `obj`: every field but those in `skip` (keys its
    state does not write), and those in `omit_none` only when they are not None (keys a step
    writes once it knows them)."""
    names = [f.name for f in dataclasses.fields(obj)]
    if unknown := (set(omit_none) | set(skip)) - set(names):
        raise ValueError(f"{type(obj).__name__} has no fields {sorted(unknown)}")
    record = {}
    for name in names:
        value = getattr(obj, name)
        if name not in skip and not (value is None and name in omit_none):
            record[name] = _write(value)
    return record


def read_record(cls: type[T], record: Mapping[str, Any]) -> T:
    """The dataclass `cls` a stored record describes (the module docstring)."""
    values = {}
    for name, read, skips_none in _readers(cls):
        if name not in record:
            continue
        value = record[name]
        if value is None and skips_none:
            continue
        values[name] = read(value)
    return cls(**values)


_READERS: dict[type, tuple[tuple[str, Callable[[Any], Any], bool], ...]] = {}


def _readers(cls: type) -> tuple[tuple[str, Callable[[Any], Any], bool], ...]:
    """Each field's name, the reader of its annotation (resolved: the models use `from
    __future__ import annotations`), and whether a stored None takes its default (it has one and
    cannot be None); worked out once per class."""
    if cls not in _READERS:
        hints = typing.get_type_hints(cls)
        _READERS[cls] = tuple(
            (f.name, _reader(hints[f.name]), _has_default(f) and not _optional(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
    return _READERS[cls]


def _write(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_record = getattr(value, "to_record", None)
        return to_record() if to_record else record_of(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_write(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _write(v) for k, v in value.items()}
    return value


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _optional(hint: Any) -> bool:
    return _is_union(hint) and type(None) in typing.get_args(hint)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


@functools.cache
def _reader(hint: Any) -> Callable[[Any], Any]:
    """What reads a stored value back as `hint` says, worked out once per annotation: a
    dataclass by its `from_record` (one given already as that dataclass is kept), an enum by
    value, a list as a tuple where the field is a tuple, the others as stored."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) != 1:
            return _as_stored
        inner = _reader(kinds[0])
        return lambda value: value if value is None else inner(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        cls = hint
        from_record = getattr(cls, "from_record", None)

        def read_dataclass(value: Any) -> Any:
            if isinstance(value, cls):
                return value
            return from_record(value) if from_record else read_record(cls, value)

        return read_dataclass
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    if origin is tuple:
        if args[-1:] == (Ellipsis,):
            each = _reader(args[0])
            return lambda value: tuple(map(each, value))
        readers = tuple(_reader(a) for a in args)
        return lambda value: tuple(r(v) for r, v in zip(readers, value, strict=True))
    if origin is list:
        each = _reader(args[0])
        return lambda value: list(map(each, value))
    if origin in (dict, Mapping):
        each = _reader(args[1])
        return lambda value: {k: each(v) for k, v in value.items()}
    return _as_stored


def _as_stored(value: Any) -> Any:
    return value
