"""Edit a YAML file's *text* where its nodes are, leaving every other byte alone.

Why not load, modify and dump with ruamel.yaml: its round trip re-indents, re-wraps and
re-attaches comments (a comment above the next table travels with the previous one when a
list grows). People's manifests must come back byte-for-byte wherever sync had nothing to
change. So ruamel.yaml is used only to *find* nodes (it records the line and column of every
key and item, and the raw ``${VAR}`` text is what it sees), and the edits are splices of text:
replace a scalar, insert lines after a list's last item, delete an item's lines, add or
remove a key.

Edits are recorded against the original coordinates and applied together at the end, from the
bottom of the file up, so one edit never shifts another's position.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from structq.errors import StructqError

__all__ = ["TextDocument", "YamlEditError", "scalar", "flow_map"]


class YamlEditError(StructqError):
    """The file's layout is one the text editor cannot change safely (say where and why)."""


_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", ""}
_PLAIN = re.compile(r"[A-Za-z_\u00a0-\uffff][\w\u00a0-\uffff./-]*")


def scalar(value: Any) -> str:
    """A YAML scalar that reads back as ``value`` under YAML 1.1 and 1.2 (quoted JSON when in doubt)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED and text[-1] not in ".-":
        return text
    return json.dumps(text, ensure_ascii=False)


def flow_map(items: Iterable[tuple[str, Any]]) -> str:
    """``{key: value, …}``; nested dicts become nested flow mappings."""
    parts = []
    for key, value in items:
        rendered = flow_map(value.items()) if isinstance(value, dict) else scalar(value)
        parts.append(f"{scalar(key)}: {rendered}")
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class _Splice:
    """Replace columns [start, end) of one line (intra-line edits)."""

    line: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Lines:
    """Replace lines [start, end) with ``lines`` (an insertion when start == end)."""

    start: int
    end: int
    lines: tuple[str, ...]
    order: int  # insertion order, to keep several insertions at one spot in sequence


class TextDocument:
    """A YAML text plus its round-trip node tree, for positional edits."""

    def __init__(self, text: str, file: str = "<manifest>") -> None:
        from ruamel.yaml import YAML

        self.text = text
        self.file = file
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith(("\n", "\r")):
            self._newline_at_end = False
            self.lines[-1] += "\n"
        else:
            self._newline_at_end = True
        self.newline = "\r\n" if self.lines and self.lines[0].endswith("\r\n") else "\n"
        self.root = YAML(typ="rt").load(io.StringIO(text))
        self._splices: list[_Splice] = []
        self._edits: list[_Lines] = []

    # --- reading the layout ---------------------------------------------------------------

    def _where(self, line: int) -> str:
        return f"{self.file}:{line + 1}"

    def _is_content(self, index: int) -> bool:
        stripped = self.lines[index].strip()
        return bool(stripped) and not stripped.startswith("#")

    @staticmethod
    def _indent(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    def _block_end(self, start: int, min_indent: int) -> int:
        """The line after the block that starts at ``start``: it runs until the first content
        line indented less than ``min_indent``, without the comments and blank lines that end
        it (those belong to whatever comes next)."""
        end = start + 1
        last_content = start
        while end < len(self.lines):
            if self._is_content(end):
                if self._indent(self.lines[end]) < min_indent:
                    break
                last_content = end
            end += 1
        return last_content + 1

    def _dash_column(self, seq: Any, i: int) -> int:
        line, col = seq.lc.item(i)
        text = self.lines[line]
        dash = text.rfind("-", 0, col)
        if dash < 0 or text[:dash].strip():
            raise YamlEditError(f"{self._where(line)}: cannot find the '-' of this list item")
        return dash

    def _require_block(self, node: Any, what: str) -> None:
        # ruamel does not mark an empty ``[]`` as flow style, and it has no item to anchor an edit
        if node.fa.flow_style() or not len(node):
            line = node.lc.line
            raise YamlEditError(f"{self._where(line)}: {what} is written in flow style ([…] or {{…}}); "
                                "write it as an indented block so sync can edit it")

    def item_extent(self, seq: Any, i: int) -> tuple[int, int]:
        """Lines [start, end) of item ``i`` of a block sequence."""
        self._require_block(seq, "this list")
        line, _ = seq.lc.item(i)
        return line, self._block_end(line, self._dash_column(seq, i) + 1)

    def item_indent(self, seq: Any) -> int:
        """Column of the '-' of the items of ``seq`` (which must have at least one)."""
        return self._dash_column(seq, 0)

    def key_column(self, mapping: Any) -> int:
        first = next(iter(mapping))
        return mapping.lc.key(first)[1]

    # --- edits ------------------------------------------------------------------------------

    def append_items(self, seq: Any, items: list[list[str]]) -> None:
        """Add items after the last one; each item is its lines *relative to the dash* (no indent)."""
        if not items:
            return
        self._require_block(seq, "this list")
        _, end = self.item_extent(seq, len(seq) - 1)
        pad = " " * self.item_indent(seq)
        lines = tuple(pad + text + self.newline for item in items for text in item)
        self._edits.append(_Lines(end, end, lines, len(self._edits)))

    def put_top_list(self, key: str, items: list[list[str]]) -> None:
        """Write top-level ``key:`` as a block list of ``items`` at the end of the file, in place
        of an absent, empty (``key:``) or flow-empty (``key: []``) value."""
        if key in self.root:
            value = self.root[key]
            if value is not None and len(value):
                raise YamlEditError(f"{self.file}: {key!r} already has items; append to it instead")
            self.remove_key(self.root, key)
        end = len(self.lines)
        lines = [f"{key}:"] + ["  " + text for item in items for text in item]
        self._edits.append(_Lines(end, end, tuple(text + self.newline for text in lines), len(self._edits)))

    def delete_item(self, seq: Any, i: int) -> None:
        start, end = self.item_extent(seq, i)
        line = self.lines[start]
        dash = self._dash_column(seq, i)
        if line[:dash].strip():
            raise YamlEditError(f"{self._where(start)}: this list item shares its line with other text")
        self._edits.append(_Lines(start, end, (), len(self._edits)))

    def set_value(self, mapping: Any, key: str, text: str) -> None:
        """Replace the scalar value of ``key`` (a one-line scalar) with ``text``."""
        line, col = mapping.lc.value(key)
        token = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^,}\]#\s]+(?:[ \t]+[^,}\]#\s]+)*")
        match = token.match(self.lines[line], col)
        if match is None:
            raise YamlEditError(f"{self._where(line)}: cannot find the value of {key!r}")
        self._splices.append(_Splice(line, col, match.end(), text))

    def add_key(self, mapping: Any, key: str, text: str) -> None:
        """Add ``key: text`` at the end of ``mapping`` (flow or block)."""
        self.add_keys(mapping, [(key, text)])

    def add_keys(self, mapping: Any, pairs: list[tuple[str, str]], *, after: str | None = None) -> None:
        """Add ``key: text`` pairs, in order, at the end of ``mapping`` — or, in a block mapping,
        right after the key ``after`` when it is there (``description`` after ``name``)."""
        if not pairs:
            return
        if mapping.fa.flow_style():
            line, col = self._flow_close(mapping)
            before = self.lines[line][:col].rstrip()
            sep = "" if before.endswith("{") else ", "
            self._splices.append(_Splice(line, col, col, sep + ", ".join(f"{k}: {t}" for k, t in pairs)))
            return
        anchor = after if after is not None and after in mapping else list(mapping)[-1]
        anchor_line, column = mapping.lc.key(anchor)
        end = self._block_end(anchor_line, column + 1)
        lines = tuple(" " * column + f"{k}: {t}{self.newline}" for k, t in pairs)
        self._edits.append(_Lines(end, end, lines, len(self._edits)))

    def remove_key(self, mapping: Any, key: str) -> None:
        """Remove ``key`` and its (one-line, scalar) value from ``mapping``."""
        line, col = mapping.lc.key(key)
        if not mapping.fa.flow_style():
            self._edits.append(_Lines(line, self._block_end(line, col + 1), (), len(self._edits)))
            return
        text = self.lines[line]
        value_line, value_col = mapping.lc.value(key)
        if value_line != line:
            raise YamlEditError(f"{self._where(line)}: the value of {key!r} spans lines")
        end = self._flow_value_end(text, value_col)
        start = col
        before = text[:col].rstrip()
        if before.endswith(","):
            start = len(before) - 1  # ", key: value" — take the comma before it
        elif end < len(text) and text[end] == ",":
            end += 1
            while end < len(text) and text[end] == " ":
                end += 1
        self._splices.append(_Splice(line, start, end, ""))

    # --- flow scanning ------------------------------------------------------------------------

    def _flow_close(self, mapping: Any) -> tuple[int, int]:
        """Line and column of the ``}`` that closes a flow mapping."""
        depth = 0
        for line, col, ch in _unquoted(self.lines, mapping.lc.line, mapping.lc.col, comments=True):
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return line, col
        raise YamlEditError(f"{self._where(mapping.lc.line)}: unterminated flow mapping")

    @staticmethod
    def _flow_value_end(text: str, col: int) -> int:
        """Column just past a value inside a flow mapping on one line (before ``,`` or ``}``)."""
        depth, end = 0, len(text)
        for _, at, ch in _unquoted([text], 0, col, comments=False):
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                if depth == 0:
                    end = at
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                end = at
                break
        while end > 0 and text[end - 1] == " ":
            end -= 1
        return end

    # --- result -------------------------------------------------------------------------------

    def result(self) -> str:
        """The edited text (the original, byte for byte, when nothing was edited)."""
        if not self._splices and not self._edits:
            return self.text
        lines = list(self.lines)
        for s in sorted(self._splices, key=lambda s: (s.line, s.start), reverse=True):
            text = lines[s.line]
            lines[s.line] = text[: s.start] + s.text + text[s.end:]
        # Bottom-up; at one position insertions go before the deletion that starts there, and
        # several insertions keep the order they were made in.
        for e in sorted(self._edits, key=lambda e: (e.start, e.end, e.order), reverse=True):
            lines[e.start:e.end] = list(e.lines)
        out = "".join(lines)
        if not self._newline_at_end and out.endswith(self.newline) and not self.text.endswith("\n"):
            out = out[: -len(self.newline)]
        return out


def _unquoted(lines: list[str], line: int, col: int, *, comments: bool) -> Iterator[tuple[int, int, str]]:
    """Each character outside quoted scalars from (line, col) on, as (line, col, char).

    Flow collections are scanned for their brackets and commas; a quoted scalar may contain
    either, and a ``#`` after a blank starts a comment (when ``comments``) that ends the line.
    """
    quote = ""
    while line < len(lines):
        text = lines[line]
        while col < len(text):
            ch = text[col]
            if quote:
                if ch == "\\" and quote == '"':
                    col += 1
                elif ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif comments and ch == "#" and col > 0 and text[col - 1] in " \t":
                break
            else:
                yield line, col, ch
            col += 1
        line, col = line + 1, 0
