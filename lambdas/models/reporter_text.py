"""Text a reporter wrote: data, never layout.

Every string a report carries (a job name, a node name, a suspect's reasons, the emitter's
errors, a checkpoint location) comes from a party the pipeline cannot authenticate. Before it
reaches a card, a notice, an audit summary, a label or a log line it is cleaned: control,
format (bidirectional overrides, zero-width marks) and line or paragraph separator characters
are removed, so it cannot start a line or reorder what is around it, and it is clipped. Where
people read it, it is shown quoted, so where it starts and ends is plain.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

_REMOVED: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories removed: control, format (U+202E and the other bidirectional controls,
zero-width marks), surrogates, private use, unassigned, line and paragraph separators."""

ELLIPSIS: Final = "..."
_SPACES: Final = re.compile(" {2,}")


def clean(value: Any, limit: int = 200) -> str:
    """`value` as text with nothing that can shape its surroundings, at most `limit`
    characters (a clipped text ends with `...`)."""
    text = value if isinstance(value, str) else str(value)
    kept = "".join(" " if c in "\t\r\n" else c for c in text)
    kept = "".join(c for c in kept if unicodedata.category(c) not in _REMOVED)
    kept = _SPACES.sub(" ", kept)
    if len(kept) > limit:
        kept = kept[: max(limit - len(ELLIPSIS), 0)] + ELLIPSIS
    return kept


def quoted(value: Any, limit: int = 200) -> str:
    """`clean(value)` in double quotes, a quote or backslash inside escaped as JSON does."""
    return json.dumps(clean(value, limit), ensure_ascii=False)


def clean_or_none(value: Any, limit: int = 200) -> str | None:
    return None if value is None else clean(value, limit)
