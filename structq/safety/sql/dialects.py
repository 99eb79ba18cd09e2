"""The sqlglot objects each ``check_sql`` call needs, built once per dialect and reused.

``Dialect.get_or_raise("postgres")`` builds a new dialect, and ``dialect.parse(text)`` a new
tokenizer (whose construction alone costs a tenth of a parse) and parser, on every call. A
dialect is immutable once built, so one instance per name is shared. Tokenizers and parsers
keep the state of the text they are reading, so each thread gets its own pair per dialect;
both reset that state at the start of every call (``TokenizerCore.tokenize``,
``Parser._parse``), so reuse cannot carry anything from one query into the next.

A generator is reused the same way (building one costs ~0.05× a parse), with its one piece of
state that outlives a call made new before each: the counter for the names it invents (``_t0``,
``_t1``…), or it would write different SQL for the same tree depending on what it wrote
before. (Its list of unsupported constructs is reset by ``Generator.generate`` itself.) A
generator that raised is dropped, not reused.

Every select's generation first runs the dialect's rewrite steps (``transforms.preprocess``):
SQLite, PostgreSQL and MySQL rewrite DISTINCT ON, QUALIFY and SEMI / ANTI joins, MySQL also a
FULL OUTER join and ``UNNEST(GENERATE_DATE_ARRAY(…))`` in FROM — the last found by walking
each select's whole subtree, nested selects again for each level (~0.3× the generation of a
MySQL query). In a tree without those constructs every step is a Python call per select that
changes nothing. A caller that knows the tree holds none asks for a lean generator
(``lean=True``), whose selects go straight to ``select_sql`` (what the steps hand over to), so
it writes the same text; a dialect whose select handler is anything else keeps its own.

SQLite's ``cast_sql`` asks whether the target is ``"date"``, ``"datetime"``, … by name, and
sqlglot parses each name into a type on every call: five parses per ``CAST`` (~50 µs, more
than the parse of the whole query it is in; 177 of the corpora's 2,986 SQLite queries cast). Every
generator here asks with those types built once instead (``_sqlite_cast_sql``), which is the
same test (``DataType.is_type`` builds a type from a name, and takes a type as it is) — used
only if it writes what the dialect's own method writes for a cast to every type sqlglot
knows (``_writes_casts_alike``), checked once per process, when a generator first writes a
cast (the check writes some 260 casts: a process that writes none, a ``structq run`` of a
plan without one, does not pay for it).

Where a query or its manifest has a name that needs quotes sqlglot would not write (a word
the database reserves, a name that is not a plain identifier), the generator also quotes every
identifier that needs them (``quoting.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlglot import exp, transforms
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator
from sqlglot.helper import name_sequence
from sqlglot.parser import Parser
from sqlglot.tokens import Token, Tokenizer

from .quoting import reserved_in_any_case, reserved_words

__all__ = ["dialect", "generate_text", "parse_text"]

_dialects: dict[str, Dialect] = {}
_local = threading.local()


def dialect(name: str) -> Dialect:
    """The shared ``Dialect`` called ``name`` (as ``Dialect.get_or_raise`` reads it)."""
    found = _dialects.get(name)
    if found is None:
        found = _dialects[name] = Dialect.get_or_raise(name)
    return found


def _readers(name: str, of: Dialect) -> tuple[Tokenizer, Parser]:
    readers: dict[str, tuple[Tokenizer, Parser]] | None = getattr(_local, "readers", None)
    if readers is None:
        readers = _local.readers = {}
    pair = readers.get(name)
    if pair is None:
        pair = readers[name] = (of.tokenizer(), of.parser())
    return pair


def parse_text(name: str, text: str, inspect: Callable[[list[Token]], None] | None = None) -> tuple[list, list[Token]]:
    """``dialect(name).parse(text)`` with this thread's tokenizer and parser for ``name``;
    returns the statements and the tokens they were parsed from (``rules/output_names.py`` reads the select
    list from them: the parser reads tokens and never changes one, so they are what a second
    ``tokenize`` would return, at no second cost). ``inspect`` sees the tokens before the parser
    does (and may refuse them: ``bounds.check_tokens``)."""
    tokenizer, parser = _readers(name, dialect(name))
    tokens = tokenizer.tokenize(text)
    if inspect is not None:
        inspect(tokens)
    return parser.parse(tokens, text), tokens


#: The select steps a lean generator leaves out: each rewrites only a construct that the
#: caller vouches the tree does not hold (module docstring).
_SKIPPED = frozenset({transforms.eliminate_distinct_on, transforms.eliminate_qualify,
                      transforms.eliminate_semi_and_anti_joins, transforms.eliminate_full_outer_join,
                      transforms.unnest_generate_date_array_using_recursive_cte})


def _only_skipped_steps(generator: Generator) -> bool:
    """Whether the generator's select handler is ``transforms.preprocess`` of skipped steps
    only, handing over to ``select_sql`` (its closure's ``transforms`` and ``generator``)."""
    handler = generator._dispatch.get(exp.Select)
    code, closure = getattr(handler, "__code__", None), getattr(handler, "__closure__", None)
    if code is None or closure is None:
        return False
    cells = {name: cell.cell_contents for name, cell in zip(code.co_freevars, closure)}
    steps = cells.get("transforms")
    return "generator" in cells and cells["generator"] is None and steps is not None and set(steps) <= _SKIPPED


#: SQLite's cast targets that are written as calls (``DATE(x)``), as its ``cast_sql`` names them.
_SQLITE_DATE_TYPES = tuple(exp.DataType.build(name, udt=True) for name in ("date",))
_SQLITE_DATETIME_TYPES = tuple(exp.DataType.build(name, udt=True) for name in ("datetime", "timestamp", "timestampntz"))
_SQLITE_TIME_TYPES = tuple(exp.DataType.build(name, udt=True) for name in ("time",))


def _sqlite_cast_sql(generator: Generator, expression: exp.Cast) -> str:
    """SQLite's ``cast_sql`` with its target types built once (module docstring)."""
    to = expression.to
    if to.is_type(*_SQLITE_DATE_TYPES):
        return generator.func("DATE", expression.this)
    if to.is_type(*_SQLITE_DATETIME_TYPES):
        return generator.func("DATETIME", expression.this)
    if to.is_type(*_SQLITE_TIME_TYPES):
        return generator.func("TIME", expression.this)
    return Generator.cast_sql(generator, expression)


#: Per dialect: the handlers that replace the generator's own, if they write the same text.
_FASTER: dict[str, dict[type[exp.Expr], object]] = {"sqlite": {exp.Cast: _sqlite_cast_sql}}
_alike: dict[str, bool] = {}


def _writes_casts_alike(name: str) -> bool:
    """Whether ``_FASTER[name]``'s cast writes what the dialect's own does, for a cast of a
    column to every type sqlglot has (and a user-defined one), decided once per dialect."""
    found = _alike.get(name)
    if found is None:
        own, faster = dialect(name).generator(comments=False), dialect(name).generator(comments=False)
        faster._dispatch = {**faster._dispatch, **_FASTER[name]}
        targets = [exp.DataType.build(kind) for kind in exp.DataType.Type] + [exp.DataType.build("my_type", udt=True)]
        casts = [exp.Cast(this=exp.column("x"), to=target) for target in targets]
        found = _alike[name] = all(own.generate(c, copy=True) == faster.generate(c, copy=True) for c in casts)
    return found


def _cast_handler(name: str, own: Callable[[Generator, exp.Cast], str]) -> Callable[[Generator, exp.Cast], str]:
    """A cast handler that writes with ``_FASTER[name]``'s once it is shown to write what the
    dialect's ``own`` writes (``_writes_casts_alike``, decided at the first cast), else with ``own``."""
    faster = _FASTER[name][exp.Cast]

    def cast_sql(generator: Generator, expression: exp.Cast) -> str:
        return faster(generator, expression) if _writes_casts_alike(name) else own(generator, expression)

    return cast_sql


def _quoting(words: frozenset[str], any_case: bool) -> Callable[[Generator, exp.Identifier], str]:
    """An identifier handler that writes quoted an unquoted identifier whose text needs quotes
    (``quoting.needs_quotes_bare``, lower-cased where ``any_case``), and every other as the
    generator does. (That test written out here: the handler runs for every identifier.)"""
    write = Generator.identifier_sql

    def identifier_sql(generator: Generator, identifier: exp.Identifier) -> str:
        args = identifier.args
        text = args["this"]
        if args.get("quoted") or (text.isidentifier() and (text.lower() if any_case else text) not in words):
            return write(generator, identifier)
        return write(generator, exp.Identifier(this=text, quoted=True))

    return identifier_sql


def _new_generator(name: str, lean: bool, quote_names: bool) -> Generator:
    generator = dialect(name).generator(comments=False)
    dispatch = generator._dispatch
    if lean and _only_skipped_steps(generator):
        dispatch = {**dispatch, exp.Select: type(generator).select_sql}
    if name in _FASTER:
        alike = _alike.get(name)  # None: not decided yet, at the first cast (module docstring)
        if alike:
            dispatch = {**dispatch, **_FASTER[name]}
        elif alike is None:
            dispatch = {**dispatch, exp.Cast: _cast_handler(name, dispatch[exp.Cast])}
    if quote_names:
        dispatch = {**dispatch, exp.Identifier: _quoting(reserved_words(name), reserved_in_any_case(name))}
    generator._dispatch = dispatch
    return generator


def generate_text(name: str, tree: exp.Expr, *, lean: bool = False, quote_names: bool = False) -> str:
    """``dialect(name).generate(tree, copy=False, comments=False)`` with this thread's
    generator for ``name``; ``lean``: the tree holds none of the constructs the dialect's select
    steps rewrite (see the module docstring); ``quote_names``: an identifier may need quotes
    sqlglot would not write (``quoting.py``; a handler per identifier costs ~0.1 µs, so only
    then)."""
    generators: dict[tuple[str, bool, bool], Generator] | None = getattr(_local, "generators", None)
    if generators is None:
        generators = _local.generators = {}
    key = (name, lean, quote_names)
    generator = generators.pop(key, None)  # taken while in use: one that raises is not put back
    if generator is None:
        generator = _new_generator(name, lean, quote_names)
    else:
        generator._next_name = name_sequence("_t")  # as ``Generator.__init__`` starts it
    sql = generator.generate(tree, copy=False)
    generators[key] = generator
    return sql
