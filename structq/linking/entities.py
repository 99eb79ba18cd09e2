"""What linking ranks: every table and search index of a capability set, flattened.

A table and an index look the same here (an ``Entity`` with ``Member`` columns or fields), so
retrieval, the FK graph and pruning need no per-kind branches. Denied members are left out at
this point, before anything is indexed: the linker must not even learn their names, or a
question could be steered by them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structq.capabilities.api import Operation
from structq.capabilities.objects import Index, Table
from structq.capabilities.render import render_index, render_table

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Member", "Entity", "estimate_tokens", "manifest_entities"]


def estimate_tokens(text: str) -> int:
    """Tokens of prompt text, estimated: ASCII at 4 characters a token, anything else 1 a character.

    cl100k-style tokenizers spend about one token per Chinese character and about four English
    characters per token; a plain ``len / 4`` would undercount Chinese manifests several-fold.
    """
    if text.isascii():  # the common case, without a loop over the characters
        return (len(text) + 3) // 4
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


@dataclass(frozen=True)
class Member:
    """A column or field the planner may use."""

    name: str
    type: str
    description: str = ""
    synonyms: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()
    primary_key: bool = False
    references: str | None = None
    tokens: int = 0

    @property
    def structural(self) -> bool:
        """Keys and enum columns: always shown with their table (joins and legal literals)."""
        return self.primary_key or self.references is not None or bool(self.values)


@dataclass(frozen=True)
class Entity:
    """A table (SQL) or an index (search) of one source."""

    source: str
    name: str
    kind: str  # "table" | "index"
    description: str
    synonyms: tuple[str, ...]
    members: tuple[Member, ...]
    #: Estimated prompt tokens of the table's header line and of the whole rendered table.
    header_tokens: int
    tokens: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.name.lower())

    @property
    def label(self) -> str:
        return f"{self.source}.{self.name}"


def _table_entity(t: Table, m: "Manifest") -> Entity:
    lines = render_table(t, m)
    members = tuple(
        Member(c.name, c.type, c.description, tuple(c.synonyms), tuple((c.values or {}).items()),
               c.primary_key, c.references, estimate_tokens(line))
        for c, line in zip(t.allowed_columns, lines[1:])
    )
    return Entity(m.source, t.name, t.word, t.description, tuple(t.synonyms), members,
                  estimate_tokens(lines[0]) + sum(estimate_tokens(x) for x in lines[1 + len(members):]),
                  estimate_tokens("\n".join(lines)))


def _index_entity(i: Index, m: "Manifest") -> Entity:
    lines = render_index(i, m)
    members = tuple(
        Member(path, f.type, f.description, tuple(f.synonyms), tuple((f.values or {}).items()), tokens=2)
        for path, f in i.readable_members().items()
    )
    return Entity(m.source, i.name, i.word, i.description, tuple(i.synonyms), members,
                  estimate_tokens(lines[0]), estimate_tokens("\n".join(lines)))


def _operation_entity(o: Operation, m: "Manifest") -> Entity:
    """An API operation: its response fields are its members (a GraphQL root field's rows are
    the shared types, always shown with the source)."""
    members = tuple(Member(name, f.type, f.description, tuple(f.synonyms), tuple((f.values or {}).items()), tokens=3)
                    for name, f in o.readable_members().items())
    header = estimate_tokens(f"  operation {o.name} — {o.description}") + 4 * (len(o.arguments) + len(o.parameters))
    return Entity(m.source, o.name, o.word, o.description, tuple(o.synonyms), members, header,
                  header + sum(member.tokens for member in members))


#: How one declared object becomes an entity, by what it is.
_ENTITY: dict[type, Callable[[Any, "Manifest"], Entity]] = {Table: _table_entity, Index: _index_entity,
                                                            Operation: _operation_entity}


def manifest_entities(manifest: "Manifest") -> list[Entity]:
    """Every table and index of one manifest, in its order."""
    return [_ENTITY[type(obj)](obj, manifest) for obj in manifest.objects]
