"""moto's response serializer, remembering which keys to try.

moto answers every call through a generic serializer: for each member of each response shape it
asks up to six alias providers which keys of the answer object to try (the member's name, its
snake_case form, the shape's name, prefixes...), and it asks again for every item and every
attribute value. For a plain dict, which is what the DynamoDB backend answers with, those keys
depend only on the shape (and its parent) and the member's name; `remember_response_keys`
makes the serializer work them out once per shape and member and reuse them. The same keys are
tried in the same order, so every answer is the same; it takes about a quarter less CPU for
the tests and local runs that run the handlers on moto.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from moto.core.serialize import AttributePickerContext, XFormedAttributePicker

work_out_keys = XFormedAttributePicker.get_possible_keys
"""moto's own: asks the alias providers every time."""
_known: dict[tuple[int, int, int, str], tuple[Any, ...]] = {}
"""(shape, parent shape, alias providers, member) → the objects the ids stand for (kept alive,
so an id is never reused while it is a key) and the keys to try, last."""


def _possible_keys(self: XFormedAttributePicker, context: AttributePickerContext) -> Iterable[str]:
    shape = context.shape
    if type(context.obj) is not dict or shape is None:
        return work_out_keys(self, context)  # an object: its attributes and class may matter
    parent = getattr(shape, "parent", None)
    key = (id(shape), id(parent), id(self.alias_providers), context.key)
    known = _known.get(key)
    if known is None:
        known = (shape, parent, self.alias_providers, tuple(work_out_keys(self, context)))
        _known[key] = known
    keys: tuple[str, ...] = known[-1]
    return keys


def remember_response_keys() -> None:
    """From now on in this process, the serializer works the keys of a dict member out once."""
    XFormedAttributePicker.get_possible_keys = _possible_keys  # type: ignore[assignment,method-assign]
