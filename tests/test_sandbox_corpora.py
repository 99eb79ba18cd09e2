"""The sandbox against third-party corpora (``../shared/corpora``; skipped where it is absent).

Legit: every gold query of defog, Spider (English and German) and BIRD is checked against a
manifest built from its own database's schema. At least 99.5% of what sqlglot can parse must be
accepted, per corpus and overall, and every rejection must be one listed, with its code and
message, in ``tests/fixtures/corpora_rejections.tsv`` (each reviewed as a real rule, not a gap:
its ``reason`` column says which rule, from ``REJECTION_REASONS``).
The list is kept true both ways: a new rejection fails, and so does a listed query that is now
accepted. Regenerate it with ``STRUCTQ_UPDATE_REJECTIONS=1 pytest tests/test_sandbox_corpora.py``
and review the diff.

Hostile: every complete statement of the hostile corpus is either rejected, or accepted as a
single read-only query over declared tables and allowed columns and functions with the enforced
LIMIT — checked on a fresh parse of the text that would run, not on the sandbox's own tree.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from corpora import (
    ENGINE_DIALECTS,
    LEGIT_LOADERS,
    GoldQuery,
    Outcome,
    Rejection,
    accepted_violations,
    hostile_manifest,
    hostile_outcomes,
    one_line,
    quiet_sqlglot,
    read_rejections,
    rejection_reason,
    sandbox_outcome,
    sqlglot_parses,
    write_rejections,
)
from structq.errors import SandboxViolation
from structq.safety import SafeQuery

REJECTIONS_FILE = Path(__file__).parent / "fixtures" / "corpora_rejections.tsv"
UPDATE_REJECTIONS = os.environ.get("STRUCTQ_UPDATE_REJECTIONS") == "1"
MIN_ACCEPTANCE = 0.995


# ============================================================================================
# Legit corpora
# ============================================================================================


@dataclass
class LegitTally:
    """What the sandbox made of one corpus."""

    name: str
    total: int = 0
    parseable: int = 0
    accepted_parseable: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.accepted_parseable / self.parseable if self.parseable else 1.0

    def add(self, query: GoldQuery, parses: bool, outcome: Outcome) -> None:
        self.total += 1
        self.parseable += parses
        if isinstance(outcome, SafeQuery):
            self.accepted_parseable += parses
        elif isinstance(outcome, SandboxViolation):
            self.rejections.append(Rejection(
                query.corpus, query.dialect, query.database, outcome.code,
                one_line(outcome.message), rejection_reason(outcome.code), query.origin, query.sql,
            ))
        else:
            self.crashes.append(f"{query.origin} [{query.dialect}] {type(outcome).__name__}: {outcome}\n  {query.sql}")

    def merge(self, other: LegitTally) -> None:
        self.total += other.total
        self.parseable += other.parseable
        self.accepted_parseable += other.accepted_parseable
        self.rejections += other.rejections
        self.crashes += other.crashes

    def line(self) -> str:
        codes = Counter(r.code for r in self.rejections)
        by_code = ", ".join(f"{code} {n}" for code, n in codes.most_common()) or "none"
        return (f"{self.name:<10} {self.total:>5} queries, {self.parseable:>5} parse, "
                f"{self.accepted_parseable:>5} accepted ({self.rate:.2%}); rejected: {by_code}")


def tally_corpus(name: str, root: Path) -> LegitTally:
    quiet_sqlglot()
    corpus = LEGIT_LOADERS[name](root)
    tally = LegitTally(name)
    for query in corpus.queries:
        manifest = corpus.manifest_for(query)
        tally.add(query, sqlglot_parses(query.sql, query.dialect), sandbox_outcome(query.sql, manifest))
    return tally


@pytest.fixture(scope="module")
def legit_tally(shared_corpora: Path) -> Callable[[str], LegitTally]:
    """Each corpus is checked once per module, however many tests read its tally."""
    cache: dict[str, LegitTally] = {}

    def get(name: str) -> LegitTally:
        if name not in cache:
            cache[name] = tally_corpus(name, shared_corpora)
        return cache[name]

    return get


@pytest.mark.parametrize("corpus", sorted(LEGIT_LOADERS))
def test_legit_corpus_is_accepted(corpus: str, legit_tally: Callable[[str], LegitTally]) -> None:
    tally = legit_tally(corpus)
    print(tally.line())
    assert not tally.crashes, "check_sql raised something other than SandboxViolation:\n" + "\n".join(tally.crashes[:20])
    assert tally.rate >= MIN_ACCEPTANCE, tally.line()


def test_legit_corpora_overall(legit_tally: Callable[[str], LegitTally], capsys: pytest.CaptureFixture[str]) -> None:
    """The figures of every corpus and of all of them, printed even without ``-s``."""
    overall = LegitTally("overall")
    lines = []
    for name in sorted(LEGIT_LOADERS):
        tally = legit_tally(name)
        lines.append(tally.line())
        overall.merge(tally)
    lines.append(overall.line())
    with capsys.disabled():
        print("\nsandbox acceptance on legit corpora (of queries sqlglot parses):")
        print("\n".join("  " + line for line in lines))
    assert overall.rate >= MIN_ACCEPTANCE, overall.line()


def test_legit_rejections_are_the_listed_ones(legit_tally: Callable[[str], LegitTally]) -> None:
    """Every rejection is listed with the same code and message, and every listed one still
    happens; ``STRUCTQ_UPDATE_REJECTIONS=1`` rewrites the list from what the sandbox does now."""
    current = {r.key: r for name in sorted(LEGIT_LOADERS) for r in legit_tally(name).rejections}
    if UPDATE_REJECTIONS:
        write_rejections(REJECTIONS_FILE, current.values())
        pytest.skip(f"rewrote {REJECTIONS_FILE.name} with {len(current)} rejections: review the diff")
    listed = read_rejections(REJECTIONS_FILE)
    problems = [f"NOT LISTED  [{r.code}] {r.message}\n    {r.origin} {r.dialect}: {r.sql}"
                for key, r in current.items() if key not in listed]
    problems += [f"NOW ACCEPTED  {r.origin} {r.dialect}: {r.sql}" for key, r in listed.items() if key not in current]
    problems += [f"NO REVIEWED REASON  [{r.code}] {r.origin}: {r.sql}" for r in current.values()
                 if r.reason.startswith("NOT REVIEWED")]
    problems += [
        f"REASON CHANGED  {r.origin}: listed [{listed[key].code}] {listed[key].message}, now [{r.code}] {r.message}"
        for key, r in current.items()
        if key in listed and (listed[key].code, listed[key].message) != (r.code, r.message)
    ]
    assert not problems, (
        f"{len(problems)} differences from {REJECTIONS_FILE.name} "
        "(fix the sandbox, or rerun with STRUCTQ_UPDATE_REJECTIONS=1 and review):\n" + "\n".join(problems[:40])
    )


# ============================================================================================
# Hostile corpus
# ============================================================================================


@dataclass
class HostileTally:
    """Accepted and rejected counts of one dialect, and every broken promise."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def line(self, dialect: str) -> str:
        codes = ", ".join(f"{code} {n}" for code, n in self.rejected.most_common())
        return f"{dialect:<9} accepted {self.accepted:>4}, rejected {sum(self.rejected.values()):>4}: {codes}"


def test_hostile_statements_are_rejected_or_harmless(shared_corpora: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tallies: dict[str, HostileTally] = {}
    manifests = {dialect: hostile_manifest(dialect) for dialect in ENGINE_DIALECTS}
    for statement, outcome in hostile_outcomes(shared_corpora):
        tally = tallies.setdefault(statement.dialect, HostileTally())
        where = f"{statement.origin} [{statement.dialect}]: {statement.sql}"
        if isinstance(outcome, SandboxViolation):
            tally.rejected[outcome.code] += 1
        elif isinstance(outcome, SafeQuery):
            tally.accepted += 1
            for problem in accepted_violations(outcome, manifests[statement.dialect]):
                tally.failures.append(f"{problem}\n    {where}\n    ran as: {outcome.text}")
        else:
            tally.failures.append(f"raised {type(outcome).__name__}: {outcome}\n    {where}")
    with capsys.disabled():
        print("\nsandbox on hostile statements:")
        print("\n".join("  " + tallies[d].line(d) for d in sorted(tallies)))
    failures = [f for d in sorted(tallies) for f in tallies[d].failures]
    assert not failures, f"{len(failures)} hostile statements broke the property:\n" + "\n".join(failures[:40])
