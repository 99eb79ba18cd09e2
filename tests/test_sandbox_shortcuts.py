"""Where a pass answers from what an earlier pass recorded instead of walking the tree, the
answer is what the walk would give, query by query.

``Check.shared_nodes`` answers the shared filters of ``check_growth`` and ``check_patterns``
without a walk: nothing when ``parse.scan`` saw no node they want (``Check.shared_wanted``),
else the nodes the scan listed, while no pass has copied expressions into the tree. A node
missed would let a ``repeat`` or a ``LIKE`` through unchecked, so the answer is compared with
a walk of the tree, just before ``check_growth`` runs, over every query of the third-party
corpora (legit and hostile) and of the limit tests: the same nodes, each once. (Their order
may differ from the walk's, which decides no outcome: each node is checked on its own.)

``output_names.record_output_names`` finds a star of columns in the select list from the stars
``parse.scan`` listed, instead of searching each projection; compared with that search. It
names a list of columns, aliased items and stars from their identifiers' positions, without
reading the tokens; compared with the names read from the tokens.

``double_quoted_strings.py`` reads the names the query gives columns from the aliases ``parse.scan`` listed;
compared with a walk of the tree.

``parse.scan`` reads a name it has seen on the same source from ``Derived.plain_names``
instead of testing it again; what it records (the normalised identifiers, whether a name needs
quotes, the refusal of an invisible character) is compared with a scan that remembers nothing.

``generate`` asks for a lean generator (``dialects.generate_text``: no select rewrite steps)
when the tree holds nothing those steps rewrite; its text is compared with the dialect's own
generator's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from corpora import LEGIT_LOADERS, hostile_manifest, load_hostile, quiet_sqlglot
from sqlglot import exp
from test_sandbox_limits import ACCEPTED, REFUSED

import structq.safety.sql as sandbox
from structq.capabilities import Manifest
from structq.errors import PlanError, SandboxViolation
from structq.safety.sql import dialects, memo, walk
from structq.safety.sql.rules import double_quoted_strings as strings
from structq.safety.sql.rules import output_names as names
from structq.safety.sql.dialects import dialect
from structq.safety.sql.schema import PLAIN_NAME_LENGTH, derived
from structq.safety.sql.rules.growth import check_growth
from structq.safety.sql.quoting import needs_quotes_bare, reserved_in_any_case, reserved_words


#: The module (the package exports its pass function under the same name).
generate_pass = importlib.import_module("structq.safety.sql.rules.generate")
parse_pass = importlib.import_module("structq.safety.sql.rules.parse")


def _shared_nodes_as_walked(check: sandbox.Check) -> None:
    assert check.tree is not None
    for wanted in walk._registered:
        found = sorted(id(node) for node in check.shared_nodes(wanted))
        assert found == sorted(id(node) for node in wanted(check.tree)), check.text


def _stars_as_searched(check: sandbox.Check) -> None:
    select = names._outer_select(check.tree) if check.tree is not None else None
    if select is None:
        return
    searched = any(
        any(not isinstance(star.parent, exp.Func) for star in projection.find_all(exp.Star))
        for projection in select.expressions
    )
    assert names._has_star_of_columns(check, select) == searched, check.text
    stars = [names.is_star_item(p) for p in select.expressions] if searched else None
    from_identifiers = names._names_of_identifiers(select, check.parsed_text, stars)
    if from_identifiers is not None:
        assert from_identifiers == names._names_of_tokens(check, select, stars), check.text


def _aliases_as_walked(check: sandbox.Check) -> None:
    assert check.tree is not None
    walked: set[str] = set()
    for node in check.tree.find_all(exp.Alias, exp.TableAlias):
        if isinstance(node, exp.Alias):
            walked.add(node.alias.lower())
        else:
            walked.update(c.name.lower() for c in node.columns)
    assert strings._query_names(check) == walked, check.text


#: Each comparison, and the pass it runs before (on the tree that pass is given).
_COMPARISONS = {check_growth: _shared_nodes_as_walked, names.record_output_names: _stars_as_searched,
                strings.read_double_quoted_strings: _aliases_as_walked}


def _text_as_generated(name: str, tree: exp.Expr, *, lean: bool = False, quote_names: bool = False) -> str:
    if lean:
        assert tree.find(exp.Unnest) is None, tree.sql(name)
    stock_tree = tree.copy()
    if quote_names:  # what the quoting handler does, done to the tree (``quoting.py``)
        for identifier in stock_tree.find_all(exp.Identifier):
            text = identifier.this.lower() if reserved_in_any_case(name) else identifier.this
            if not identifier.quoted and needs_quotes_bare(text, reserved_words(name)):
                identifier.set("quoted", True)
    stock = dialect(name).generate(stock_tree, comments=False)
    text = dialects.generate_text(name, tree, lean=lean, quote_names=quote_names)
    assert text == stock
    return text


@contextmanager
def _verified() -> Iterator[None]:
    """Every check compares the shortcuts with walks of the tree."""
    rules: list[Callable[[sandbox.Check], None]] = []
    for rule in sandbox.RULES:
        if rule in _COMPARISONS:
            rules.append(_COMPARISONS[rule])
        rules.append(rule)
    with mock.patch.object(sandbox, "RULES", tuple(rules)), \
            mock.patch.object(generate_pass, "generate_text", _text_as_generated):
        yield


def _check(sql: str, source: Manifest) -> None:
    memo.clear()  # a remembered check would skip the passes compared
    try:
        sandbox.check_sql(sql, source)
    except (SandboxViolation, PlanError):
        pass


@pytest.mark.parametrize("corpus", sorted(LEGIT_LOADERS))
def test_shortcuts_agree_with_walks_on_legit_corpus(corpus: str, shared_corpora: Path) -> None:
    quiet_sqlglot()
    loaded = LEGIT_LOADERS[corpus](shared_corpora)
    with _verified():
        for query in loaded.queries:
            _check(query.sql, loaded.manifest_for(query))


def test_shortcuts_agree_with_walks_on_hostile_corpus(shared_corpora: Path) -> None:
    quiet_sqlglot()
    manifests = {dialect: hostile_manifest(dialect) for dialect in ("sqlite", "postgres", "mysql")}
    with _verified():
        for statement in load_hostile(shared_corpora):
            if statement.dialect in manifests:
                _check(statement.sql, manifests[statement.dialect])


@pytest.mark.parametrize("dialect, query", [(d, q) for d, q in ACCEPTED] + [(d, q) for d, q, _ in REFUSED])
def test_shortcuts_agree_with_walks_on_patterns_and_strings(dialect: str, query: str) -> None:
    with _verified():
        _check(query, hostile_manifest(dialect))


@pytest.mark.parametrize("dialect, query", [
    ("postgres", "SELECT DISTINCT ON (u.status) u.name FROM users AS u ORDER BY u.status, u.name"),
    ("mysql", "SELECT u.name FROM users AS u FULL OUTER JOIN orders AS o ON o.user_id = u.id"),
    ("sqlite", "SELECT u.name FROM users AS u WHERE u.id IN (SELECT DISTINCT ON (o.status) o.user_id FROM orders AS o)"),
])
def test_what_select_steps_rewrite_gets_the_dialects_own_generator(dialect: str, query: str) -> None:
    asked: list[bool] = []

    def spy(name: str, tree: exp.Expr, *, lean: bool = False, quote_names: bool = False) -> str:
        asked.append(lean)
        return dialects.generate_text(name, tree, lean=lean, quote_names=quote_names)

    memo.clear()
    with mock.patch.object(generate_pass, "generate_text", spy):
        try:
            sandbox.check_sql(query, hostile_manifest(dialect))
        except SandboxViolation:
            pass
    assert asked in ([], [False])


@pytest.mark.parametrize("target", ["DATE", "DATETIME", "TIMESTAMP", "TIME", "REAL", "INTEGER", "TEXT", "BLOB",
                                    "NUMERIC(10, 2)", "VARCHAR(20)"])
def test_sqlite_casts_are_written_as_the_dialect_writes_them(target: str) -> None:
    tree = dialect("sqlite").parse(f"SELECT CAST(a AS {target}), CAST(CAST(b AS {target}) AS TEXT) FROM t")[0]
    assert dialects._writes_casts_alike("sqlite")  # the faster cast is in use with this sqlglot
    assert dialects.generate_text("sqlite", tree.copy(), lean=True) == dialect("sqlite").generate(tree.copy())
    assert dialects.generate_text("sqlite", tree.copy()) == dialect("sqlite").generate(tree.copy())


def test_a_faster_cast_that_writes_otherwise_is_not_used() -> None:
    def wrong(generator, expression: exp.Cast) -> str:
        return "CAST(nothing)"

    with mock.patch.dict(dialects._FASTER, {"sqlite": {exp.Cast: wrong}}), mock.patch.dict(dialects._alike, clear=True):
        assert not dialects._writes_casts_alike("sqlite")
        generator = dialects._new_generator("sqlite", lean=False, quote_names=False)
        assert generator._dispatch[exp.Cast] is not wrong
    assert dialects._writes_casts_alike("sqlite")


def test_the_faster_cast_is_decided_at_the_first_cast_written() -> None:
    """Writing a query without a cast does not run the check (some 260 casts); the first cast
    decides it, and is written as the dialect writes it."""
    tree = dialect("sqlite").parse("SELECT a FROM t WHERE b = 1")[0]
    cast = dialect("sqlite").parse("SELECT CAST(a AS DATE), CAST(b AS INTEGER) FROM t")[0]
    with mock.patch.dict(dialects._alike, clear=True), mock.patch.object(dialects._local, "generators", {}, create=True):
        assert dialects.generate_text("sqlite", tree.copy()) == dialect("sqlite").generate(tree.copy())
        assert "sqlite" not in dialects._alike
        assert dialects.generate_text("sqlite", cast.copy()) == dialect("sqlite").generate(cast.copy())
        assert dialects._alike["sqlite"] is True


def _scanned(sql: str, source: Manifest) -> tuple[object, ...]:
    """What ``parse`` (with its scan) records of ``sql``: the outcome, whether a name needs
    quotes, and every identifier's text."""
    name = source.sql_dialect
    check = sandbox.Check(text=sql, manifest=source, dialect=dialect(name), sql_dialect=name, references={},
                          variables={}, max_rows=10, slots={})
    try:
        parse_pass.parse(check)
    except SandboxViolation as violation:
        return ("refused", violation.code)
    except Exception as exc:  # noqa: BLE001 - whatever it is, it must be the same both times
        return ("error", type(exc).__name__)
    assert check.tree is not None
    return ("parsed", check.quote_names, [node.this for node in check.tree.find_all(exp.Identifier)])


def _scanned_twice(sql: str, source: Manifest) -> None:
    """``sql`` scanned with nothing remembered, then with its names remembered: the same."""
    derived(source).plain_names.clear()
    first = _scanned(sql, source)
    assert _scanned(sql, source) == first, sql


@pytest.mark.parametrize("corpus", sorted(LEGIT_LOADERS))
def test_names_seen_before_are_scanned_as_the_first_time_on_legit_corpus(corpus: str, shared_corpora: Path) -> None:
    quiet_sqlglot()
    loaded = LEGIT_LOADERS[corpus](shared_corpora)
    for query in loaded.queries:
        _scanned_twice(query.sql, loaded.manifest_for(query))


def test_names_seen_before_are_scanned_as_the_first_time_on_hostile_corpus(shared_corpora: Path) -> None:
    quiet_sqlglot()
    manifests = {dialect: hostile_manifest(dialect) for dialect in ("sqlite", "postgres", "mysql")}
    for statement in load_hostile(shared_corpora):
        if statement.dialect in manifests:
            _scanned_twice(statement.sql, manifests[statement.dialect])


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_only_visible_names_that_need_no_quotes_are_remembered(dialect: str) -> None:
    source = hostile_manifest(dialect)
    remembered = derived(source).plain_names
    remembered.clear()
    quote = {"sqlite": '"', "postgres": '"', "mysql": "`"}[dialect]
    spaced = f"{quote}two words{quote}"  # needs quotes in every dialect
    assert _scanned(f"SELECT Name, {spaced} FROM users", source)[:2] == ("parsed", True)
    assert remembered == {"Name": "name", "users": "users"}  # ``two words``: tested every time
    assert _scanned(f"SELECT name, {spaced} FROM users", source)[:2] == ("parsed", True)
    invisible = f"{quote}na\u200bme{quote}"
    for _ in range(2):  # refused each time: an invisible name is never remembered
        assert _scanned(f"SELECT {invisible} FROM users", source) == ("refused", "parse_error")
    assert "na\u200bme" not in remembered
    long_name = "x" * (PLAIN_NAME_LENGTH + 1)
    _scanned(f"SELECT {long_name} FROM users", source)
    assert long_name not in remembered
    with mock.patch.object(parse_pass, "PLAIN_NAMES", len(remembered)):
        _scanned("SELECT unseen FROM users", source)
    assert "unseen" not in remembered  # full: no more names kept
