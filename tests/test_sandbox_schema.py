"""What the sandbox derives from a manifest (``safety/sql/schema.py``) is derived once per
manifest object, kept while that object lives and dropped with it, and the part only the full
path reads (``Derived.schema``) is what it was when every name was written by ``Expr.sql``.

Nothing here is timed (``bench/manifests.py`` prints what deriving costs per size); the tests
count derivations.
"""

from __future__ import annotations

import gc
from unittest import mock

import pytest
from sqlglot import exp
from sqlglot.schema import MappingSchema

from structq.capabilities import Manifest
from structq.safety import check_sql
from structq.safety.sql import memo, schema
from structq.safety.sql.schema import derived

#: Names that need quotes somewhere, beside plain ones (as in ``test_star_names.py``).
_NAMES = ["group", "order", "Index", "Shop ID", 'say "hi"', "back`tick", "[br]", "a.b", "1st", "Größe", "ÄÖ",
          "n'o", "id", "MixedCase"]


def _manifest(name: str, dialect: str = "sqlite", columns: list[str] | None = None,
              denied: frozenset[str] = frozenset()) -> Manifest:
    columns = columns or ["id", "name"]
    return Manifest.model_validate({
        "source": name, "kind": "sql", "url": "sqlite://", "dialect": dialect,
        "tables": [{"name": "items", "columns": [
            {"name": c, "type": "text", **({"access": "deny"} if c in denied else {})} for c in columns]}],
    })


@pytest.fixture
def derivations() -> mock.MagicMock:
    """``schema._derive``, counted (``derived`` looks it up on each call)."""
    with mock.patch.object(schema, "_derive", side_effect=schema._derive) as spy:
        yield spy


def test_each_of_many_live_manifests_is_derived_once(derivations: mock.MagicMock) -> None:
    # More sources than any fixed-size cache of the past held (64), asked in turn, as a
    # service for many teams asks them: each is derived on its first check only.
    sources = [_manifest(f"s{i}") for i in range(150)]
    for _ in range(3):
        for source in sources:
            memo.clear()
            check_sql("SELECT name FROM items WHERE id = '1'", source)
    assert derivations.call_count == len(sources)
    assert all(derived(source) is derived(source) for source in sources)
    assert derivations.call_count == len(sources)


def test_a_manifest_gone_takes_what_was_derived_from_it() -> None:
    memo.clear()  # a remembered check keeps its manifest alive
    gc.collect()  # earlier tests' manifests, if any are garbage still
    before = len(schema._derived)
    sources = [_manifest(f"gone{i}") for i in range(20)]
    for source in sources:
        derived(source)
    assert len(schema._derived) == before + 20
    del sources, source
    gc.collect()
    assert len(schema._derived) == before


def test_an_equal_manifest_is_another_object_and_derived_for_itself(derivations: mock.MagicMock) -> None:
    first, second = _manifest("twin"), _manifest("twin")
    assert first == second
    assert derived(first) is not derived(second)
    assert derivations.call_count == 2


def test_the_schema_is_built_once_per_manifest() -> None:
    source = _manifest("lazy")
    assert "schema" not in vars(derived(source))  # not before a check needs it
    memo.clear()
    check_sql("SELECT name FROM items", source)
    built = vars(derived(source))["schema"]
    check_sql("SELECT name FROM items WHERE name = 'x'", source)
    assert derived(source).schema is built


def _schema_as_before(source: Manifest) -> MappingSchema:
    """``Derived.schema`` as it was built when every name went through ``Expr.sql``."""
    dialect = source.sql_dialect
    quoted = lambda name: exp.to_identifier(name, quoted=True).sql(dialect)  # noqa: E731
    mapping = {quoted(t.name): {quoted(c.name): schema._TYPES[c.type] for c in t.allowed_columns}
               for t in source.tables}
    return MappingSchema(mapping, dialect=derived(source).names_dialect)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_the_full_path_schema_names_every_allowed_column_as_before(dialect: str) -> None:
    source = _manifest("awkward", dialect, _NAMES, denied=frozenset({"Größe", "id"}))
    built, before = derived(source).schema, _schema_as_before(source)
    assert built.mapping == before.mapping
    table = exp.to_table("items")
    assert built.column_names(table) == before.column_names(table)
    lower = derived(source).lower
    assert set(built.column_names(table)) == {lower(name) for name in _NAMES} - {lower("Größe"), "id"}
