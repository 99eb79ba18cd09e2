"""Plan references: the one grammar that says where ``<key>`` / ``<key.column>`` occurs.

A reference names an earlier step's result. In SQL it is a reference only where the source's
tokenizer sees ``<`` name [``.`` name] ``>`` as operator tokens: the same characters inside a
string literal (``WHERE name = '<none>'``), a quoted identifier or a comment are text, and
stay text. In a search body it is a JSON string value that is exactly ``"<key>"`` (text around
one is refused by the DSL sandbox; a key of an object is never a reference).

Plan validation, ``Engine``'s dependency order, the SQL sandbox's parameter binding and the
detection of which earlier results a ``local`` step reads all ask this module, so they cannot
disagree (a literal ``'<a>'`` creates no dependency on step ``a`` and is searched as text).

Pure functions of the text and the dialect; sqlglot is imported on first use. The grammar
sits beside the step model (``model.ExampleStep``: a verified example is a plan) in the lowest
layer, because manifests' examples are checked with it at load time; ``structq.safety``
exports it as the query-text analysis every later layer uses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOCAL_DIALECT",
    "LOCAL_SOURCE",
    "REFERENCE",
    "Reference",
    "find_references",
    "local_inputs",
    "reference_spans",
    "replace_references",
    "value_reference",
]

#: ``<key>`` or ``<key.column>`` as characters; ``reference_spans`` decides which are references.
REFERENCE = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?>")
#: The pseudo-source whose SQL runs over earlier steps' results.
LOCAL_SOURCE = "local"
#: The dialect a ``local`` step's SQL is written in (the local executor is SQLite).
LOCAL_DIALECT = "sqlite"


@dataclass(frozen=True)
class Reference:
    """``<key>`` (the step's single column) or ``<key.column>``."""

    key: str
    column: str | None = None

    @property
    def text(self) -> str:
        """The name the sandbox binds it under: ``key`` or ``key.column``."""
        return f"{self.key}.{self.column}" if self.column else self.key

    def __str__(self) -> str:
        return f"<{self.text}>"


@dataclass(frozen=True)
class Span:
    """Where a reference sits in a SQL text: ``text[start:end]`` is ``<…>``."""

    reference: Reference
    start: int
    end: int


@functools.cache
def _dialect(name: str) -> Any:
    """sqlglot's dialect object for ``name`` (immutable once built, so shared)."""
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise(name)


def _reference(match: re.Match[str]) -> Reference:
    return Reference(match.group(1), match.group(2))


@functools.lru_cache(maxsize=512)
def _spans(text: str, dialect: str) -> tuple[Span, ...]:
    matches = list(REFERENCE.finditer(text))
    if not matches:
        return ()
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    try:
        tokens = _dialect(dialect).tokenize(text)
    except TokenError:
        return ()  # unreadable text: the sandbox refuses it as a parse error
    opens = {t.start for t in tokens if t.token_type == TokenType.LT}
    closes = {t.end for t in tokens if t.token_type == TokenType.GT}
    return tuple(
        Span(_reference(m), m.start(), m.end())
        for m in matches
        if m.start() in opens and m.end() - 1 in closes
    )


def reference_spans(text: str, dialect: str) -> tuple[Span, ...]:
    """Every reference in SQL ``text`` read as ``dialect``, in order, with its position.

    ``<…>`` counts only when ``<`` and ``>`` are operator tokens: inside a string literal, a
    quoted identifier or a comment they are characters of that token. Text that does not
    tokenize has no references (the sandbox refuses it as a parse error).
    """
    if "<" not in text:
        return ()  # most queries: no look-up in the cache, whose key would hash the whole text
    return _spans(text, dialect)


def value_reference(value: Any) -> Reference | None:
    """The reference a search-body value stands for: a string that is exactly ``"<…>"``."""
    if isinstance(value, str) and (match := REFERENCE.fullmatch(value)):
        return _reference(match)
    return None


def _body_values(body: Any) -> Iterator[Any]:
    """Every value (not key) in a JSON body, depth first, without recursion."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed(node))
        else:
            yield node


def find_references(query: str | Mapping[str, Any], dialect: str) -> list[Reference]:
    """The references of one step's query, in order of first appearance, without repeats.

    ``query`` is SQL text (read as ``dialect``) or a search body (``dialect`` is ignored).
    """
    if isinstance(query, str):
        found: Sequence[Reference] = [span.reference for span in reference_spans(query, dialect)]
    else:
        found = [ref for value in _body_values(query) if (ref := value_reference(value)) is not None]
    return list(dict.fromkeys(found))


def replace_references(text: str, dialect: str, replacement: Callable[[Reference], str]) -> str:
    """SQL ``text`` with every reference replaced by ``replacement(reference)``; literals and
    comments that merely contain ``<…>`` are kept as written."""
    spans = reference_spans(text, dialect)
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for span in spans:
        pieces += [text[last : span.start], replacement(span.reference)]
        last = span.end
    pieces.append(text[last:])
    return "".join(pieces)


def local_inputs(sql: str, earlier: Sequence[str]) -> list[str]:
    """The earlier output keys a ``local`` step's SQL reads as tables, in ``earlier``'s order.

    A key counts when it is a table the query reads (CTE names excluded); a column, alias,
    literal, comment or ``<reference>`` that happens to spell a key does not.
    Table names match without regard to case, as the sandbox resolves them. SQL that does not
    parse, or nests too deeply to parse safely (``nesting.py``), reads nothing: the sandbox
    refuses it with its own message.
    """
    lowered = {name.lower() for name in _tables_read(sql)}
    return [key for key in earlier if key.lower() in lowered]


@functools.lru_cache(maxsize=256)
def _tables_read(sql: str) -> frozenset[str]:
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    from .nesting import measure

    reader = _dialect(LOCAL_DIALECT)
    text = replace_references(sql, LOCAL_DIALECT, lambda _: "NULL")
    try:
        tokens = reader.tokenize(text)
        if measure(tokens).excess() is not None:
            return frozenset()  # would recurse too deeply: the sandbox refuses it (too_complex)
        statements = reader.parser().parse(tokens, text)
    except (ParseError, TokenError, RecursionError):
        return frozenset()
    names: set[str] = set()
    for tree in statements:
        if tree is None:
            continue
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        names |= {t.name for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}
    return frozenset(names)
