"""The linking index: BM25 over what the manifests say about each table, and the FK graph.

Each table (or search index) is one document made of weighted fields: its name and synonyms
count most, then its description, its columns' names and synonyms, their descriptions, the
codes and meanings of their ``values``, the questions of verified examples that read it, and
a little of its source's name and description. Each column is also a document of its own, so
pruning can rank the columns of a wide table. Scores are BM25 (k1 = 1.2, b = 0.75) with the
question's terms (``tokens.terms``) weighted as the tokenizer says.

The FK graph joins tables of one source through ``references``; pruning closes the kept
tables over its shortest paths. Built once per catalogue fingerprint and cached; each
manifest's share of it (``parts.py``) once per manifest fingerprint, so a changed manifest
rebuilds its own part and the merge.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, overload

from . import persist
from .entities import Entity, Member
from .languages import Reach
from .memo import Memo
from .parts import W_EXAMPLE, Part, add_terms, build_part, parts

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

__all__ = ["LinkingIndex", "linking_index"]

K1, B = 1.2, 0.75
#: How many documents a common term nominates per query (``_Bm25``): the bound on linking's
#: work per question term, calibrated on ``bench/linking.py`` (docs/performance.md, "Linking index cache").
NOMINATE = 500
_TABLE_REF = re.compile(r"\b(?:from|join)\s+[`\"\[]?([\w.]+)", re.I)


class _Bm25:
    """A BM25 scorer over weighted bags of terms, whose cost per query does not grow with the
    number of documents.

    Postings are kept per term (document → its BM25 term-frequency factor, computed once). A
    term found in at most ``NOMINATE`` documents is a *rare* term: every document holding it
    becomes a candidate. A *common* term (``id``, ``status``, a word in every table's
    description) nominates only its ``NOMINATE`` best documents (highest factor: the term is
    in their name, or most of what they say); its weight is then added to every candidate that
    holds it. So each candidate's score is exact, the candidates are at most ``NOMINATE`` per
    query term, and a common term — whose inverse document frequency is low anyway — cannot
    drag ten thousand tables into the ranking.
    """

    def __init__(self, bags: list[Counter]) -> None:
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        lengths = [sum(bag.values()) for bag in bags]
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        for doc, bag in enumerate(bags):
            norm = K1 * (1 - B + B * (lengths[doc] / (avg or 1.0)))
            for term, tf in bag.items():
                self.postings[term][doc] = tf * (K1 + 1) / (tf + norm)
        self.postings = dict(self.postings)
        total = len(bags)
        self.idf = {t: math.log(1 + (total - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}
        #: The largest idf (the unit of ``confidence.MIN_SCORE``), computed once.
        self.max_idf = max(self.idf.values(), default=1.0) or 1.0
        #: Common term → the documents it nominates, best first.
        self.leaders: dict[str, tuple[int, ...]] = {
            t: tuple(sorted(p, key=p.__getitem__, reverse=True)[:NOMINATE])  # ties: in document order
            for t, p in self.postings.items() if len(p) > NOMINATE}

    def score(self, query: dict[str, float]) -> dict[int, float]:
        """Candidate document → BM25 score of ``query`` (term → weight)."""
        out: dict[int, float] = {}
        common: list[tuple[float, dict[int, float]]] = []
        for term, qw in query.items():
            postings = self.postings.get(term)
            if postings is None:
                continue
            weight = qw * self.idf[term]
            leaders = self.leaders.get(term)
            if leaders is None:
                for doc, factor in postings.items():
                    out[doc] = out.get(doc, 0.0) + weight * factor
            else:
                common.append((weight, postings))
                for doc in leaders[: max(1, int(NOMINATE * min(qw, 1.0)))]:  # a weak term nominates fewer
                    out.setdefault(doc, 0.0)
        for weight, postings in common:  # every candidate is nominated: add what the common terms say of it
            for doc in out.keys() & postings.keys():
                out[doc] += weight * postings[doc]
        return out


def _example_tables(capabilities: "CapabilitySet") -> list[tuple[str, set[tuple[str, str]]]]:
    """(question, {(source, table)}) of every verified example, tables read by its steps."""
    out = []
    for _, example in capabilities.examples():
        read: set[tuple[str, str]] = set()
        for step in example.steps:
            if step.index:
                read.add((step.source, step.index.lower()))
            elif isinstance(step.query, str):
                read |= {(step.source, name.split(".")[-1].lower()) for name in _TABLE_REF.findall(step.query)}
        out.append((example.question, read))
    return out


class _StoredEntities(Sequence[Entity]):
    """The entities of an index read back from disk, kept as the plain rows they were stored
    as and each made an ``Entity`` the first time it is read.

    Most of the time to read an index back went to making its entities and their members
    (10,000 tables: some 60,000 objects) while a question reads a few hundred of them; rows of
    plain values load several times faster (``docs/performance.md``, "Linking index cache")."""

    __slots__ = ("_rows", "_made")

    def __init__(self, rows: list[tuple]) -> None:
        self._rows = rows
        self._made: list[Entity | None] = [None] * len(rows)

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> Entity: ...
    @overload
    def __getitem__(self, i: slice) -> list[Entity]: ...

    def __getitem__(self, i: int | slice) -> Entity | list[Entity]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._rows)))]
        made = self._made[i]
        if made is None:
            made = self._made[i] = _entity_of(self._rows[i])
        return made

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return _StoredEntities, (self._rows,)


def _row_of(entity: Entity) -> tuple:
    """``entity`` as plain values (``_entity_of`` makes it again), its members as rows too."""
    members = tuple(tuple(getattr(m, f.name) for f in fields(Member)) for m in entity.members)
    return tuple(members if f.name == "members" else getattr(entity, f.name) for f in fields(Entity))


def _entity_of(row: tuple) -> Entity:
    values = dict(zip((f.name for f in fields(Entity)), row))
    values["members"] = tuple(Member(*member) for member in values["members"])
    return Entity(**values)


@dataclass
class LinkingIndex:
    """Everything ``select`` needs that depends only on the manifests.

    Kept on disk (``persist.py``) as plain values: the entities as rows, made ``Entity``
    objects again one by one as a question reads them (``_StoredEntities``)."""

    entities: Sequence[Entity]
    position: dict[tuple[str, str], int]
    tables: _Bm25
    columns: _Bm25
    column_keys: list[tuple[int, int]]  # column document → (entity, member)
    graph: dict[int, set[int]]
    examples: list[tuple[str, set[int]]]
    total_tokens: int
    #: (the full-weight terms of a table's name or one synonym, the table)
    names: list[tuple[frozenset[str], int]]
    #: Estimated tokens of each source's header lines (paid once when any of its tables is kept)
    source_tokens: dict[str, int]
    #: A term → the ``names`` entries filed under it (each under its rarest term, so the
    #: entries looked at per question are few however many tables share a word)
    named_by: dict[str, list[int]]
    #: Each source's languages (``languages.Reach``), read from the kept index instead of every
    #: manifest's prose again in each process
    reach: dict[str, Reach]
    #: Each entity's source, by entity number: ranking reads it for every candidate, and reading
    #: it here does not make the candidate's record (``_StoredEntities``)
    source_of: list[str]

    def __reduce__(self) -> tuple:
        """Pickled with its entities as plain rows (see ``_StoredEntities``)."""
        rows = self.entities._rows if isinstance(self.entities, _StoredEntities) else [_row_of(e) for e in self.entities]
        values = [getattr(self, f.name) for f in fields(self)]
        values[0] = _StoredEntities(rows)
        return LinkingIndex, tuple(values)

    def named(self, query_terms: set[str]) -> set[int]:
        """Tables whose name or a synonym is written in the question (all its words/bigrams)."""
        return {self.names[k][1] for term in query_terms for k in self.named_by.get(term, ())
                if self.names[k][0] <= query_terms}

    @classmethod
    def build(cls, capabilities: "CapabilitySet") -> "LinkingIndex":
        """The index of ``capabilities``, every manifest's part built afresh."""
        return cls.merge([build_part(m) for m in capabilities], capabilities)

    @classmethod
    def merge(cls, parts: list[Part], capabilities: "CapabilitySet") -> "LinkingIndex":
        """The index of ``capabilities`` from its manifests' ``parts`` (in manifest order),
        which are read, never changed: they are reused by the next catalogue's merge."""
        found: list[Entity] = []
        bags: list[Counter] = []
        column_bags: list[Counter] = []
        column_keys: list[tuple[int, int]] = []
        names: list[tuple[frozenset[str], int]] = []
        headers: dict[str, int] = {}
        reaches: dict[str, Reach] = {}
        for part in parts:
            offset = len(found)
            found += part.entities
            bags += part.bags
            column_bags += part.column_bags
            column_keys += [(offset + i, j) for i, j in part.column_keys]
            names += [(needed, offset + i) for needed, i in part.names]
            headers[part.source] = part.header_tokens
            reaches[part.source] = part.reach
        position = {e.key: i for i, e in enumerate(found)}
        examples = [(q, {position[k] for k in read if k in position}) for q, read in _example_tables(capabilities)]
        own: set[int] = set()  # bags copied from their part before an example's question is added
        for question, read in examples:
            for i in read:
                if i not in own:
                    bags[i] = Counter(bags[i])
                    own.add(i)
                add_terms(bags[i], question, W_EXAMPLE)
        counts = Counter(term for needed, _ in names for term in needed)
        named_by: dict[str, list[int]] = defaultdict(list)
        for k, (needed, _) in enumerate(names):
            named_by[min(needed, key=lambda term: (counts[term], term))].append(k)
        return cls(found, position, _Bm25(bags), _Bm25(column_bags), column_keys, _graph(found, position),
                   examples, sum(e.tokens for e in found) + sum(headers.values()), names, headers,
                   dict(named_by), reaches, [e.source for e in found])

    def paths_from(self, start: int, max_hops: int) -> dict[int, int]:
        """Shortest FK paths from ``start``: each reachable table → the table before it."""
        previous = {start: start}
        frontier = deque([(start, 0)])
        while frontier:
            node, hops = frontier.popleft()
            if hops >= max_hops:
                continue
            for nxt in sorted(self.graph.get(node, ())):
                if nxt not in previous:
                    previous[nxt] = node
                    frontier.append((nxt, hops + 1))
        return previous


def _graph(found: list[Entity], position: dict[tuple[str, str], int]) -> dict[int, set[int]]:
    """Undirected FK edges between tables of one source."""
    graph: dict[int, set[int]] = defaultdict(set)
    for i, e in enumerate(found):
        for member in e.members:
            if member.references:
                target = position.get((e.source, member.references.split(".")[0].lower()))
                if target is not None and target != i:
                    graph[i].add(target)
                    graph[target].add(i)
    return graph


_CACHE: Memo[LinkingIndex] = Memo()


def linking_index(capabilities: "CapabilitySet") -> LinkingIndex:
    """The index of ``capabilities``, built once per manifest fingerprint (a few kept; on disk too)."""
    fingerprint = capabilities.fingerprint()
    return _CACHE.get(fingerprint, lambda: persist.cached(
        fingerprint, lambda: LinkingIndex.merge(parts(capabilities), capabilities), LinkingIndex))
