"""Linking on a large catalogue: bounded candidate sets with exact scores.

A common term (in more than ``NOMINATE`` documents) nominates only its best documents; every
candidate's score is still the full BM25 of the question. Proven by outcome against a
brute-force score over every document, never by timing.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from structq.capabilities import CapabilitySet, Manifest
from structq.linking import LinkingIndex, select
from structq.linking.index import NOMINATE, _Bm25
from structq.linking.select import _query

QUESTION = "total invoice amount per ledger status"
PER_SOURCE = 100
#: More than twice as many tables as a common term nominates; table ``RARE`` alone says ``ledger``.
COUNT = 2 * NOMINATE + PER_SOURCE
RARE = COUNT - 7


def _manifest(source: str, first: int, count: int, *, rare: int | None = None) -> dict[str, Any]:
    """``count`` tables that all say ``invoice``, ``amount``, ``status`` and ``total``; table
    ``rare`` (if given) is the only one that also says ``ledger``."""
    tables = []
    for i in range(first, first + count):
        words = "ledger invoice" if i == rare else "invoice"
        tables.append({"name": f"t{i}", "description": f"{words} records",
                       "columns": [{"name": "id", "type": "integer", "primary_key": True},
                                   {"name": "amount", "type": "numeric", "description": f"total {words} amount"},
                                   {"name": "status", "type": "text"}]})
    return {"source": source, "kind": "sql", "url": "sqlite://", "tables": tables}


@pytest.fixture(scope="module")
def large() -> CapabilitySet:
    return CapabilitySet([Manifest.model_validate(_manifest(f"s{n}", n * PER_SOURCE, PER_SOURCE, rare=RARE))
                          for n in range(COUNT // PER_SOURCE)])


def _brute_force(bm25: Any, query: dict[str, float]) -> dict[int, float]:
    """BM25 of ``query`` over every document, as if no term were common."""
    out: dict[int, float] = {}
    for term, weight in query.items():
        for doc, factor in bm25.postings.get(term, {}).items():
            out[doc] = out.get(doc, 0.0) + weight * bm25.idf[term] * factor
    return out


def test_a_common_term_nominates_a_bounded_set_with_exact_scores(large: CapabilitySet) -> None:
    index = LinkingIndex.build(large)
    query = _query(QUESTION)
    common = [t for t in query if len(index.tables.postings.get(t, ())) > NOMINATE]
    assert {"invoice", "amount", "status", "total"} <= set(common)
    scored = index.tables.score(query)
    assert len(scored) < len(index.entities)
    assert len(scored) <= NOMINATE * len(common) + sum(len(index.tables.postings.get(t, ())) for t in query
                                                       if t not in common)
    exact = _brute_force(index.tables, query)
    assert scored == pytest.approx({doc: exact[doc] for doc in scored})
    rare = index.position[(f"s{RARE // PER_SOURCE}", f"t{RARE}")]
    assert rare in scored and scored[rare] == pytest.approx(max(exact.values()))


def test_the_table_a_rare_word_names_is_kept_among_thousands_that_share_the_rest(large: CapabilitySet) -> None:
    selection = select(QUESTION, large)
    assert selection.pruned
    assert selection.keeps(f"s{RARE // PER_SOURCE}", f"t{RARE}")


# --- incremental rebuild: one changed manifest, one part built ----------------------------------


def _source(name: str, words: str, *, example: bool = False) -> dict[str, Any]:
    tables = [{"name": f"{name}_{w}", "description": f"{w} of {name}",
               "columns": [{"name": "id", "type": "integer", "primary_key": True},
                           {"name": f"{w}_amount", "type": "numeric"}]} for w in words.split()]
    manifest: dict[str, Any] = {"source": name, "kind": "sql", "url": "sqlite://", "tables": tables}
    if example:  # a verified example whose question is added to a table of this source
        manifest["examples"] = [{"question": "quarterly revenue by region", "steps": [
            {"output_key": "x", "source": name, "query": f"SELECT id FROM {tables[0]['name']}"}]}]
    return manifest


def _catalogue(changed: str = "refund") -> CapabilitySet:
    return CapabilitySet([Manifest.model_validate(m) for m in (
        _source("sales", "order invoice customer", example=True),
        _source("support", f"ticket {changed} agent"),
        _source("people", "employee department salary"))])


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """No index or part held in memory, as in a new process; the cache folder in ``tmp_path``."""
    from structq.linking import index as index_module, parts

    monkeypatch.setattr(index_module, "_CACHE", index_module.Memo())
    monkeypatch.setattr(parts, "_HELD", {})
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STRUCTQ_CACHE", raising=False)
    return parts


def _comparable(value: Any) -> Any:
    """``value`` as something ``==`` compares by content: a BM25 scorer has no ``__eq__`` of its
    own (``==`` would compare identity), so it is compared by everything it holds."""
    return vars(value) if isinstance(value, _Bm25) else value


def _assert_same(a: LinkingIndex, b: LinkingIndex) -> None:
    """Every field of ``a`` equals ``b``'s (a field added to ``LinkingIndex`` is compared too)."""
    names = [f.name for f in fields(LinkingIndex)]
    assert {"named_by", "source_tokens", "column_keys", "tables", "columns"} <= set(names)
    differ = [name for name in names if _comparable(getattr(a, name)) != _comparable(getattr(b, name))]
    assert differ == []


@pytest.mark.parametrize("name", [f.name for f in fields(LinkingIndex)])
def test_the_comparison_sees_every_field(name: str) -> None:
    """``_assert_same`` is not vacuous: whichever field differs, it fails."""
    index = LinkingIndex.build(_catalogue())
    _assert_same(index, replace(index))
    with pytest.raises(AssertionError):
        _assert_same(index, replace(index, **{name: object()}))


def test_a_changed_manifest_rebuilds_only_its_part(fresh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from structq.linking import index as index_module, linking_index

    monkeypatch.setenv("STRUCTQ_CACHE", "0")  # in memory only
    before = fresh.built
    first = linking_index(_catalogue())
    held = dict(fresh._HELD)
    assert fresh.built == before + 3
    changed = _catalogue("chargeback")
    second = linking_index(changed)
    assert fresh.built == before + 4  # the support manifest's part, nothing else
    reused = [key for key, part in fresh._HELD.items() if held.get(key) is part]
    assert len(reused) == 2 and len(fresh._HELD) == 3  # the same objects, not copies
    every_part = {**held, **fresh._HELD}
    # Forget the merged indexes, not the parts, and merge both catalogues again from the parts
    # held: a merge that changed a part it read (an example's question added to a shared bag)
    # would make these differ from the indexes merged before it and from a fresh build.
    merged_again = {}
    for name, catalogue in (("first", _catalogue()), ("second", changed)):
        monkeypatch.setattr(index_module, "_CACHE", index_module.Memo())
        monkeypatch.setattr(fresh, "_HELD", dict(every_part))
        merged_again[name] = linking_index(catalogue)
    assert fresh.built == before + 4  # merged from held parts: nothing built
    assert merged_again["first"] is not first and merged_again["second"] is not second
    _assert_same(merged_again["first"], first)
    _assert_same(merged_again["second"], second)
    _assert_same(second, LinkingIndex.build(changed))  # merged from reused parts = built afresh
    _assert_same(first, LinkingIndex.build(_catalogue()))
    assert select("chargeback tickets", changed).keeps("support", "support_chargeback")


def test_the_next_process_reads_the_unchanged_parts_from_the_cache(fresh: Any, tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from structq.linking import index as index_module, linking_index

    linking_index(_catalogue())
    folder = tmp_path / "cache" / "linking" / "parts"
    assert len(list(folder.glob("*.pickle"))) == 3
    monkeypatch.setattr(index_module, "_CACHE", index_module.Memo())  # a new process
    monkeypatch.setattr(fresh, "_HELD", {})
    before = fresh.built
    changed = _catalogue("chargeback")
    merged = linking_index(changed)
    assert fresh.built == before + 1
    assert len(list(folder.glob("*.pickle"))) == 4
    _assert_same(merged, LinkingIndex.build(changed))


def test_an_index_read_back_is_the_same_and_makes_entities_as_they_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from structq.linking import index as index_module

    built = LinkingIndex.build(_catalogue())
    made: list[tuple] = []
    real = index_module._entity_of
    monkeypatch.setattr(index_module, "_entity_of", lambda row: made.append(row) or real(row))
    read_back = pickle.loads(pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))
    assert made == []  # nothing made on reading
    first = read_back.entities[1]
    assert first == built.entities[1] and read_back.entities[1] is first and len(made) == 1
    _assert_same(read_back, built)  # every entity, made now, equals the built one
    assert len(made) == len(built.entities)
    again = pickle.loads(pickle.dumps(read_back, protocol=pickle.HIGHEST_PROTOCOL))  # stored again as rows
    _assert_same(again, built)


def _shipping_catalogue() -> CapabilitySet:
    """One source whose ``shipments`` reference ``carriers``, and thirty tables of another to prune."""
    def table(name: str, description: str, columns: list[dict]) -> dict:
        return {"name": name, "description": description, "columns": columns}

    key = {"name": "id", "type": "integer", "primary_key": True}
    logistics = {"source": "logistics", "kind": "sql", "url": "sqlite:///l.db", "tables": [
        table("shipments", "parcels sent to customers", [key, {"name": "weight_kg", "type": "numeric",
              "description": "parcel weight"}, {"name": "carrier_id", "type": "integer", "references": "carriers.id"}]),
        table("carriers", "firms", [key, {"name": "label", "type": "text"}])]}
    staff = {"source": "hr", "kind": "sql", "url": "sqlite:///h.db", "tables": [
        table(f"staff_{i}", f"employee records {i}", [key, {"name": "salary", "type": "numeric",
              "description": "monthly pay"}]) for i in range(30)]}
    return CapabilitySet([Manifest.model_validate(m) for m in (logistics, staff)])


@pytest.mark.parametrize("read_back", [False, True], ids=["built", "read back"])
def test_a_table_kept_for_a_join_says_which_table_it_joins(read_back: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from structq.linking import index as index_module
    from structq.linking.select import Budget

    monkeypatch.setenv("STRUCTQ_CACHE", "0")
    catalogue = _shipping_catalogue()
    index = LinkingIndex.build(catalogue)
    if read_back:  # the records of an index read back from disk are made as they are read
        index = pickle.loads(pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    monkeypatch.setattr(index_module, "_CACHE", index_module.Memo())
    index_module._CACHE.get(catalogue.fingerprint(), lambda: index)
    selection = select("average parcel weight of shipments", catalogue, budget=Budget(prompt_tokens=300, linked_tokens=300))
    reasons = {kept.entity.name: kept.reasons for kept in selection.kept.values()}
    assert set(reasons) == {"shipments", "carriers"}
    assert reasons["carriers"][0].startswith("joins shipments")
