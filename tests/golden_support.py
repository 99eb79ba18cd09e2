"""The SQL golden files' format, read and rewritten in one place (``test_sandbox_golden.py``'s
``rewrites_*.sql`` and ``test_sandbox_rules_golden.py``'s one file per rule).

A file is blocks separated by blank lines. A block whose first line is ``-- title`` and which
holds an ``-- expected`` marker (or, where the reader allows it, a ``-- refused:`` line) is a
case: the lines before any marker are its query, the lines after a marker (``-- expected``,
``-- by hand``) that marker's section, and ``-- name: value`` lines of the names the reader
asks for are its options, wherever they stand. Other blocks (a file's header) are skipped.

``STRUCTQ_UPDATE_GOLDEN=1`` rewrites each case's outcome — its ``-- expected`` block (with its
``-- names:`` line) or its ``-- refused:`` line — with what the code does now (``rewrite``),
when the tests run and never at import: collecting tests must not write into the repository.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["UPDATE", "Block", "blocks", "expected_outcome", "rewrite"]

#: Whether this run rewrites the golden files' outcomes (review the diff); the search DSL's
#: JSON golden file (``test_sandbox_dsl_golden.py``) reads it too.
UPDATE = os.environ.get("STRUCTQ_UPDATE_GOLDEN") == "1"


@dataclass(frozen=True)
class Block:
    """One case of a golden file as written."""

    title: str
    #: ``-- name: value`` lines, by name (the last one wins).
    options: dict[str, str]
    #: ``query`` (the lines before any marker) and each marker's lines (``expected``, ``by hand``),
    #: joined by spaces, without the final ``;``; a marker the block lacks is absent.
    sections: dict[str, str]


def blocks(path: Path, *, markers: Iterable[str] = ("expected",), options: Iterable[str] = ()) -> list[Block]:
    """The cases of the golden file ``path``: ``markers`` start sections, ``options`` are read as
    ``-- name: value`` lines (a ``refused`` option makes a block a case without ``-- expected``)."""
    marker_lines = {f"-- {marker}": marker for marker in markers}
    named = tuple(options)
    option = re.compile(r"-- (" + "|".join(map(re.escape, named)) + r"): (.*)$") if named else None
    out = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        lines = block.strip().splitlines()
        if not lines or not lines[0].startswith("-- "):
            continue
        found: dict[str, str] = {}
        sections: dict[str, list[str]] = {"query": []}
        current = "query"
        for line in lines[1:]:
            read = option.match(line) if option is not None else None
            if read is not None:
                found[read.group(1)] = read.group(2)
            elif line.strip() in marker_lines:
                current = marker_lines[line.strip()]
                sections[current] = []
            else:
                sections[current].append(line)
        if "expected" in sections or "refused" in found:
            out.append(Block(lines[0][3:], found, {name: " ".join(text).strip().rstrip(";")
                                                   for name, text in sections.items()}))
    return out


def expected_outcome(sql: str, names: Iterable[str] | None = None) -> str:
    """An accepted case's outcome as written: ``-- expected``, the SQL, and the result's names if given."""
    outcome = f"-- expected\n{sql};"
    return outcome if names is None else outcome + f"\n-- names: {', '.join(names)}"


def rewrite(path: Path, outcomes: Iterable[tuple[str, str]]) -> None:
    """Replace the outcome of each case ``(title, outcome)`` of ``path`` — the ``-- expected``
    line (with its ``-- names:`` line) or the ``-- refused:`` line after the title — by
    ``outcome``, leaving the rest of the file as it was."""
    text = path.read_text(encoding="utf-8")
    for title, outcome in outcomes:
        pattern = re.compile(r"(^-- " + re.escape(title) + r"\n(?:(?!-- expected|-- refused:).*\n)*?)"
                             r"(?:-- expected\n.*(?:\n-- names: .*)?|-- refused: .*)", re.M)
        text = pattern.sub(lambda m, o=outcome: m.group(1) + o, text, count=1)  # type: ignore[misc]
    path.write_text(text, encoding="utf-8")
