"""What stored text looks like: a format sample for coded columns, padding called out.

A model that has to filter ``flight_days`` or a date kept as text needs the stored format, not
a guess (``'1-3-5'`` or ``'135'``? ``'2024-03-01'`` or ``'03/01/2024'``?); and a value stored as
``'Aberdeen '`` matches no ``= 'Aberdeen'``. The value index (``structq sync --values``) already
holds the distinct values of the columns whose values may be read — text columns that are not
keys, not denied, not on row-filtered tables — so the notes come from it and from nothing
else: a column it does not hold gets no note.

A column is *formatted* when most of its values share one shape (digits → 9, letters → A/a,
everything else as written, runs collapsed) and that shape has digits or punctuation — codes,
dates, times, phone-like patterns; plain words and names are not formats.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["shape", "column_note"]

#: Share of a column's values that must share its commonest shape for it to count as a format.
FORMAT_SHARE = 0.8
#: Values needed before a shape says anything.
MIN_VALUES = 3
_RUN = re.compile(r"(.)\1+")


def shape(value: str) -> str:
    """``'2024-03-01'`` → ``'9-9-9'``; ``'AB12'`` → ``'A9'``: character classes, runs collapsed."""
    out = []
    for ch in value:
        out.append("9" if ch.isdigit() else "A" if ch.isalpha() and ch.isupper() else "a" if ch.isalpha() else ch)
    return _RUN.sub(r"\1", "".join(out))


def column_note(values: list[str]) -> str | None:
    """A short note on a column's stored values: its format with a sample, padding; or None."""
    notes = []
    if len(values) >= MIN_VALUES:
        shapes = Counter(shape(v.strip()) for v in values)
        common, count = shapes.most_common(1)[0]
        if count / len(values) >= FORMAT_SHARE and re.search(r"[^Aa ]", common):
            sample = next(v.strip() for v in values if shape(v.strip()) == common)
            notes.append(f"stored like {sample!r}")
    padded = [v for v in values if v != v.strip()]
    if padded:
        notes.append(f"some values have leading/trailing spaces (e.g. {padded[0]!r}): compare with TRIM() or "
                     "write them exactly as stored")
    return "; ".join(notes) or None
