"""Names in messages: the one closest to a name that failed ("did you mean …?"), and lists of
what is declared, bounded.

A hint that lists what may be used helps the person reading it and the model's repair, which
reads the hint with the error. Listing everything does not hold at every size: a catalogue of
1,000 tables, a table of 400 columns or a cluster of 300 indices would turn one refusal into
pages of names, and the repair prompt into the whole schema that schema linking keeps out of
it. So ``listing`` shows a list of up to ``LISTED`` names whole, in its own order, and of a
longer one the ``LISTED`` names most like the one that failed (most alike first), saying how
many it leaves out.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["LISTED", "closest", "listing"]

#: The most names a hint lists.
LISTED = 30


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option most like ``word`` (for "did you mean …?"), or None when nothing is close."""
    matches = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.5)
    return matches[0] if matches else None


def listing(names: Iterable[str], *, near: str | None = None, limit: int = LISTED) -> str:
    """``names`` joined with commas: all of them when there are at most ``limit``, else the
    ``limit`` most like ``near`` (the first ``limit`` without it) and how many more there are."""
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    if near:
        shown = difflib.get_close_matches(str(near), names, n=limit, cutoff=0.0)
        return ", ".join(shown) + f", … ({len(names):,} in all; these {limit} are the most like {near!r})"
    return ", ".join(names[:limit]) + f", … ({len(names):,} in all; the first {limit} shown)"
