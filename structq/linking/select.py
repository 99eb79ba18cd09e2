"""Pruning: the sub-catalogue a question needs, and why each part of it was kept.

    question ─ terms ─→ BM25 over tables and columns ─┐
             ─ value index ─→ matched stored values ──┴→ seed tables (best first)
             → FK closure (shortest join paths between seeds of one source)
             → columns: all of a narrow table; of a wide one the keys, enums, matched and
               best-scoring columns
             → stop at the token budget

When the whole catalogue fits ``Budget.prompt_tokens`` nothing is pruned: a small catalogue
loses nothing by being shown whole, and the model sees every table. Pruning changes only what
the prompt shows; the sandbox checks every query against the full manifests, as always.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .confidence import Confidence, judge
from .entities import Entity, estimate_tokens
from .index import LinkingIndex, linking_index
from .languages import question_language
from .lexicon import Bridge, bridge
from .shapes import column_note
from .tokens import STOP_WORDS, latin_words, stem, terms

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Example, Manifest
    from structq.capabilities.objects import Table

    from .route import Route
    from .values import ValueIndex, ValueMatch

__all__ = ["Budget", "Kept", "Selection", "select"]

#: A Chinese question whose content words the lexicon translated at least this share of (by
#: characters) counts as bridged to names in Latin letters (``confidence.judge``).
BRIDGE_SHARE = 0.6

#: A stored value matched in more tables than this does not force them into the prompt.
MAX_VALUE_TABLES = 3

#: A table the question names outright (its name or a synonym, every word of it) gains this
#: share of the best lexical score: naming is stronger evidence than sharing words.
NAME_BONUS = 0.5


@dataclass(frozen=True)
class Budget:
    """The knobs of pruning (``STRUCTQ_PROMPT_TOKENS``, ``STRUCTQ_LINK_TOKENS``, ``STRUCTQ_LINK_COLUMNS``)."""

    #: A catalogue this small (estimated tokens of manifest text) is never pruned.
    prompt_tokens: int = 8000
    #: The size a pruned catalogue is filled up to, best-ranked tables first.
    linked_tokens: int = 3000
    #: The catalogue map of a routing call (``route.py``); 0: never route.
    route_tokens: int = 2000
    #: Columns shown of a wide table besides its keys, enum and matched columns.
    columns: int = 12
    #: Longest FK path (in joins) the closure follows between two kept tables.
    max_hops: int = 3
    #: Weight of a table's source's score (its best tables' scores summed) in the table's rank:
    #: a question's tables usually come from one source, so its neighbours rise with it.
    source_weight: float = 0.3


@dataclass
class Kept:
    """A kept table and the members shown (None: all of them), with the reasons."""

    entity: Entity
    score: float
    reasons: list[str] = field(default_factory=list)
    members: dict[str, list[str]] | None = None  # member name → reasons, when pruned

    def shown(self) -> list[str]:
        if self.members is None:
            return [m.name for m in self.entity.members]
        return [m.name for m in self.entity.members if m.name in self.members]

    def tokens(self) -> int:
        if self.members is None:
            return self.entity.tokens
        return self.entity.header_tokens + sum(m.tokens for m in self.entity.members if m.name in self.members) + 8


@dataclass
class Selection:
    """What the planner is shown for one question."""

    question: str
    capabilities: "CapabilitySet"
    kept: dict[tuple[str, str], Kept]
    matches: list["ValueMatch"]
    pruned: bool
    full_tokens: int
    budget: Budget
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: Whether linking trusts this choice (``confidence.py``); a whole catalogue is always trusted.
    confidence: Confidence = field(default_factory=lambda: Confidence(True))
    #: Where the routing call said to look (``route.py``), when this selection was routed.
    route: "Route | None" = None
    #: (source, table, column) → what its stored values look like (``shapes.column_note``).
    column_notes: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def confident(self) -> bool:
        return self.confidence.confident

    @property
    def tokens(self) -> int:
        """Estimated tokens of the rendered sub-catalogue (``entities.estimate_tokens``)."""
        return estimate_tokens(self.render())

    def keeps(self, source: str, table: str, column: str | None = None) -> bool:
        kept = self.kept.get((source, table.lower()))
        if kept is None or column is None:
            return kept is not None
        return kept.members is None or any(c.lower() == column.lower() for c in kept.members)

    def _noted(self, source: str, t: "Table") -> "Table":
        """``t`` with the notes on its stored values added to its columns' descriptions."""
        notes = {c: n for (s, tb, c), n in self.column_notes.items() if s == source and tb == t.name}
        if not notes:
            return t
        columns = [c.model_copy(update={"description": f"{c.description} ({notes[c.name]})" if c.description
                                        else notes[c.name]}) if c.name in notes else c for c in t.columns]
        return t.model_copy(update={"columns": columns})

    def manifests(self) -> list["Manifest"]:
        """The manifests cut down to the kept tables and columns (examples left out)."""
        if not self.pruned:
            if not self.column_notes:
                return list(self.capabilities)
            return [m.model_copy(update={"tables": [self._noted(m.source, t) for t in m.tables]})
                    for m in self.capabilities]
        out = []
        for m in self.capabilities:
            tables = []
            for t in m.tables:
                kept = self.kept.get((m.source, t.name.lower()))
                if kept is None:
                    continue
                if kept.members is not None:
                    t = t.model_copy(update={"columns": [c for c in t.columns if c.name in kept.members]})
                tables.append(self._noted(m.source, t))
            indices = [i for i in m.indices if (m.source, i.name.lower()) in self.kept]
            operations = [o for o in m.operations if (m.source, o.name.lower()) in self.kept]
            if tables or indices or operations:
                out.append(m.model_copy(update={"tables": tables, "indices": indices, "operations": operations,
                                                "examples": []}))
        return out

    def render(self) -> str:
        """The sub-catalogue as prompt text, saying how much was left out."""
        from structq.capabilities.render import render_manifest

        if not self.pruned:
            return "\n\n".join(render_manifest(m) for m in self.manifests())
        blocks = []
        for m in self.manifests():
            text = render_manifest(m)
            full = self.capabilities[m.source]
            hidden = len(full.objects) - len(m.objects)
            narrowed = [t.name for t in m.tables if len(t.columns) < len(full.table(t.name).columns)]  # type: ignore[union-attr]
            if hidden:
                text += f"\n  (+{hidden} tables not shown)"
            if narrowed:
                text += f"\n  (some columns of {', '.join(narrowed)} not shown)"
            blocks.append(text)
        others = len(self.capabilities) - len(blocks)
        if others:
            blocks.append(f"(+{others} sources not shown; tables and columns not shown were judged "
                          "irrelevant to this question and can still be used by their exact names)")
        if not self.kept:
            blocks.append(self._directory())
        return "\n\n".join(blocks)

    def _directory(self) -> str:
        """Nothing in the question matched: table names only, so the model can still find its
        way (and the repair round shows the one it picks), cut at the pruning budget."""
        limit = min(self.budget.linked_tokens, self.budget.prompt_tokens)
        lines = ["No table matched the question's words. Tables by source (names only):"]
        used = estimate_tokens(lines[0])
        for m in self.capabilities:
            line = f"- {m.source}: " + ", ".join([t.name for t in m.tables] + [i.name for i in m.indices])
            cost = estimate_tokens(line)
            if used + cost > limit:
                lines.append("- … (more sources)")
                break
            lines.append(line)
            used += cost
        return "\n".join(lines)

    def examples(self) -> list["Example"]:
        """Verified examples that read only kept tables."""
        index = linking_index(self.capabilities)
        kept = {index.position[k] for k in self.kept}
        chosen = [q for q, read in index.examples if read <= kept]
        return [e for _, e in self.capabilities.examples() if e.question in chosen]

    def to_dict(self) -> dict[str, Any]:
        """The stable shape of ``structq plan --explain-linking --json``."""
        return {
            "question": self.question,
            "pruned": self.pruned,
            "tokens": self.tokens,
            "full_tokens": self.full_tokens,
            "budget_tokens": self.budget.prompt_tokens,
            "milliseconds": round(self.seconds * 1000, 2),
            "confident": self.confident,
            "confidence": self.confidence.to_dict(),
            "route": self.route.to_dict() if self.route is not None else None,
            "values": [m.to_dict() for m in self.matches],
            "tables": [
                {"source": k.entity.source, "table": k.entity.name, "score": round(k.score, 3), "reasons": k.reasons,
                 "columns": ({c: r for c, r in k.members.items()} if k.members is not None else "all")}
                for k in self.kept.values()
            ],
            "notes": self.notes,
        }


def _query(question: str, bridged: dict[str, float] | None = None) -> dict[str, float]:
    """The question's terms, plus adjacent English words joined (``high schoolers`` also
    asks for ``highschooler``: names are often compounds written as one word), plus the
    ``bridged`` terms of its Chinese words (``lexicon.bridge``)."""
    out: dict[str, float] = dict(bridged or {})
    for term, weight in terms(question):
        out[term] = max(out.get(term, 0.0), weight)
    words = latin_words(question)
    for a, b in zip(words, words[1:]):
        if a.isalpha() and b.isalpha() and a not in STOP_WORDS and b not in STOP_WORDS:
            out.setdefault(stem(a + b), 1.0)
    return out


def _seed_scores(index: LinkingIndex, question: str, matches: list["ValueMatch"], bridged: dict[str, float] | None = None,
                 ) -> tuple[dict[int, float], dict[int, dict[int, float]]]:
    """Table scores (tables' own BM25 plus their best column's) and per-table column scores."""
    query = _query(question, bridged)
    scores = dict(index.tables.score(query))
    columns: dict[int, dict[int, float]] = {}
    for doc, s in index.columns.score(query).items():
        entity, member = index.column_keys[doc]
        columns.setdefault(entity, {})[member] = s
    for entity, by_member in columns.items():
        scores[entity] = scores.get(entity, 0.0) + 0.5 * max(by_member.values())
    best = max(scores.values(), default=1.0)
    for i in index.named(set(query)):
        scores[i] = scores.get(i, 0.0) + NAME_BONUS * best
    for m in matches:
        i = index.position.get((m.source, m.table.lower()))
        if i is not None:
            scores[i] = scores.get(i, 0.0) + best * (0.5 if m.exact else 0.3)
    return scores, columns


def select(question: str, capabilities: "CapabilitySet", *, budget: Budget | None = None,
           values: "ValueIndex | None" = None,
           extra: Iterable[tuple[str, str, str | None]] = (), route: "Route | None" = None) -> Selection:
    """The sub-catalogue for ``question``; ``extra`` (source, table, column) are always kept.

    With a ``route`` (``route.py``: the routing call's answer) its terms join the question's,
    its tables are kept, and only its sources compete; the result counts as confident — the
    doubt was what the call was for, and there is no second one."""
    started = time.perf_counter()
    budget = budget or Budget()
    index = linking_index(capabilities)
    matches = values.match(question) if values is not None else []
    notes = list(values.notes) if values is not None else []
    if values is not None and not len(values) and not notes:
        notes.append("no value index: `structq sync --values` lets stored names in questions find their columns")
    if index.total_tokens <= budget.prompt_tokens:
        kept = {e.key: Kept(e, 0.0, ["the whole catalogue fits the prompt budget"]) for e in index.entities}
        return Selection(question, capabilities, kept, matches, False, index.total_tokens, budget,
                         time.perf_counter() - started, notes, column_notes=_column_notes(values, kept))
    routed_terms = " ".join(route.terms) if route else ""
    language = question_language(question)
    crossing = bridge(question) if language == "zh" else Bridge()
    scores, column_scores = _seed_scores(index, f"{question} {routed_terms}".strip(), matches, crossing.terms)
    if route and route.sources:
        allowed = set(route.sources)
        scores = {i: s for i, s in scores.items() if index.source_of[i] in allowed}
    builder = _Builder(index, budget, scores, column_scores, matches)
    builder.force_values()
    builder.force(list(extra), "named by a failed query (repair)")
    if route:
        builder.force([(source, table, None) for source, table in route.tables], "named by the routing call")
    builder.seed()
    if route:
        confidence = Confidence(True, language=language, signals={"routed": True})
    else:
        bridged = frozenset({"latin"}) if crossing.covered >= BRIDGE_SHARE else frozenset()
        lexicon = ({"lexicon": {zh: list(en) for zh, en in crossing.words},
                    "lexicon_covered": round(crossing.covered, 2)} if crossing.words else None)
        confidence = judge(index, question, scores, set(builder.kept), matched_values=bool(matches),
                           bridged=bridged, notes=lexicon)
    kept = builder.finish()
    shown = [m for m in matches if (m.source, m.table.lower()) in kept]  # hints only for tables shown
    return Selection(question, capabilities, kept, shown, True, index.total_tokens, budget,
                     time.perf_counter() - started, notes, confidence, route, _column_notes(values, kept))


def _column_notes(values: "ValueIndex | None", kept: dict[tuple[str, str], Kept]) -> dict[tuple[str, str, str], str]:
    """Notes on the stored values of the kept tables' columns the value index holds."""
    if values is None:
        return {}
    out = {}
    for (source, table, column), stored in values.columns.items():
        shown = kept.get((source, table.lower()))
        if shown is None or (shown.members is not None and column not in shown.members):
            continue
        note = column_note(stored)
        if note:
            out[(source, table, column)] = note
    return out


#: Ranked tables considered at most; tables refused for size before giving up; tokens left
#: at which the budget counts as full. They bound the work per question, not the result.
_CANDIDATES, _GIVE_UP, _NEARLY_FULL = 300, 40, 20


class _Builder:
    """Grows the kept set: forced tables, seeds with their FK paths, then columns, in budget."""

    def __init__(self, index: LinkingIndex, budget: Budget, scores: dict[int, float],
                 column_scores: dict[int, dict[int, float]], matches: list["ValueMatch"]) -> None:
        self.index, self.budget, self.scores, self.column_scores = index, budget, scores, column_scores
        self.matches = matches
        self.kept: dict[int, Kept] = {}
        self.forced_columns: dict[int, dict[str, str]] = {}
        self.used = 0
        self._trees: dict[int, dict[int, int]] = {}

    def _cost(self, i: int, sources: set[str]) -> int:
        """Tokens table ``i`` adds, its source's header included when that source is new."""
        entity = self.index.entities[i]
        cost = Kept(entity, 0.0, [], self._members(i)).tokens()
        return cost if entity.source in sources else cost + self.index.source_tokens.get(entity.source, 0)

    def _keep(self, i: int, reason: str, *, force: bool = False, joins: tuple[int, ...] = ()) -> bool:
        """Keep ``i`` together with its join paths to ``joins`` — all of it within budget, or nothing."""
        if i in self.kept:
            if reason not in self.kept[i].reasons:
                self.kept[i].reasons.append(reason)
            return True
        adding: dict[int, str] = {i: reason}
        for other in joins:
            for node in self._path(other, i):
                adding.setdefault(node, f"on the join path {self.index.entities[other].name} – "
                                        f"{self.index.entities[i].name}")
        sources = {k.entity.source for k in self.kept.values()}
        cost = 0
        for node in adding:
            cost += self._cost(node, sources)
            sources.add(self.index.source_of[node])
        if not force and self.used + cost > min(self.budget.linked_tokens, self.budget.prompt_tokens):
            return False
        for node, why in adding.items():
            self.kept[node] = Kept(self.index.entities[node], self.scores.get(node, 0.0), [why], self._members(node))
        self.used += cost
        return True

    def force(self, extra: list[tuple[str, str, str | None]], reason: str) -> None:
        for source, table, column in extra:
            i = self.index.position.get((source, table.lower()))
            if i is None:
                continue
            self._keep(i, reason, force=True)
            if column:
                self.forced_columns.setdefault(i, {})[column] = reason

    def force_values(self) -> None:
        """Keep the tables whose stored values the question names, with the matched column —
        when the value is one few tables hold: a value found in many tables (a country name in
        every database of a catalogue) says nothing about which one the question is about, and
        only adds to their scores."""
        holders: dict[str, set[tuple[str, str]]] = {}
        for m in self.matches:
            holders.setdefault(m.value.lower(), set()).add((m.source, m.table.lower()))
        for m in self.matches:
            if len(holders[m.value.lower()]) > MAX_VALUE_TABLES:
                continue
            i = self.index.position.get((m.source, m.table.lower()))
            if i is not None:
                self._keep(i, f"value {m.value!r} matched in {m.column}", force=True)
                self.forced_columns.setdefault(i, {})[m.column] = f"matched value {m.value!r}"

    def seed(self) -> None:
        """Keep tables best-ranked first (own score, their source's, FK neighbours') within budget."""
        anchors: dict[str, list[int]] = {}
        for i in self.kept:
            anchors.setdefault(self.index.source_of[i], []).append(i)
        limit = min(self.budget.linked_tokens, self.budget.prompt_tokens)
        refused = 0
        for i, (score, reason) in self._ranked():
            if score <= 0 or refused >= _GIVE_UP or self.used >= limit - _NEARLY_FULL:
                break
            same_source = anchors.setdefault(self.index.source_of[i], [])
            if i in self.kept or not self._keep(i, reason, joins=tuple(same_source)):
                refused += i not in self.kept
                continue
            same_source.append(i)

    def _ranked(self) -> list[tuple[int, tuple[float, str]]]:
        by_source: dict[str, list[float]] = {}
        for i, score in self.scores.items():
            by_source.setdefault(self.index.source_of[i], []).append(score)
        source_score = {src: sum(sorted(v, reverse=True)[:3]) for src, v in by_source.items()}
        weight = self.budget.source_weight
        source_of = self.index.source_of
        ranked: dict[int, tuple[float, int]] = {}  # table → (rank score, the table it joins or -1)
        for i, score in self.scores.items():
            ranked[i] = (score + weight * source_score[source_of[i]], -1)
        best = heapq.nlargest(_CANDIDATES, ranked.items(), key=lambda kv: kv[1][0])
        for i, (score, _) in best:
            for n in self.index.graph.get(i, ()):
                if 0.5 * score > ranked.get(n, (0.0, -1))[0]:
                    ranked[n] = (0.5 * score, i)
        out = []
        for i, (score, via) in heapq.nsmallest(_CANDIDATES, ranked.items(), key=lambda kv: (-kv[1][0], kv[0])):
            if via < 0:
                own = self.scores.get(i, 0.0)
                reason = f"matches the question (score {own:.1f}, its source {score - own:.1f})"
            else:
                reason = f"joins {self.index.entities[via].name} (score {score:.1f})"
            out.append((i, (score, reason)))
        return out

    def _path(self, a: int, b: int) -> list[int]:
        """The tables strictly between ``a`` and ``b`` on their shortest FK path (none if too long)."""
        tree = self._trees.get(a)
        if tree is None:
            tree = self._trees[a] = self.index.paths_from(a, self.budget.max_hops)
        if a == b or b not in tree:
            return []
        path = [tree[b]]
        while path[-1] != a:
            path.append(tree[path[-1]])
        return [node for node in path[:-1] if node not in self.kept]

    def finish(self) -> dict[tuple[str, str], Kept]:
        for i, kept in self.kept.items():
            kept.members = self._members(i)
        return {k.entity.key: k for k in self.kept.values()}

    def _members(self, i: int) -> dict[str, list[str]] | None:
        entity = self.index.entities[i]
        forced = self.forced_columns.get(i, {})
        if entity.kind == "index" or len(entity.members) <= self.budget.columns + 4:
            return None
        out: dict[str, list[str]] = {}
        for member in entity.members:
            if member.primary_key:
                out.setdefault(member.name, []).append("primary key")
            if member.references:
                out.setdefault(member.name, []).append(f"joins {member.references}")
            if member.values:
                out.setdefault(member.name, []).append("has values")
            if member.name in forced:
                out.setdefault(member.name, []).append(forced[member.name])
        by_score = self.column_scores.get(i, {})
        ranked = sorted(by_score, key=lambda j: -by_score[j])
        for j in ranked[: self.budget.columns]:
            out.setdefault(entity.members[j].name, []).append(f"matches the question (score {by_score[j]:.1f})")
        for member in entity.members:  # fill up to the column budget in manifest order
            if len(out) >= self.budget.columns + 4:
                break
            out.setdefault(member.name, ["listed early in the table"])
        return out
