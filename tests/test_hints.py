"""A hint lists at most ``hints.LISTED`` names, whatever the size of what it lists from: of a
long list, the names most like the one that failed (``capabilities/hints.py``). Checked on the
helper and where a refusal lists declared names: tables, columns, sources, indices, fields.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from manifests import manifest_text  # noqa: E402

from structq.capabilities import CapabilitySet, Manifest, load_manifest_text  # noqa: E402
from structq.capabilities.hints import LISTED, listing  # noqa: E402
from structq.errors import PlanError, SandboxViolation  # noqa: E402
from structq.safety import check_dsl, check_sql  # noqa: E402


def test_a_short_list_is_shown_whole_in_its_order() -> None:
    names = [f"n{i}" for i in range(LISTED)]
    assert listing(names, near="n3") == ", ".join(names)
    assert listing([]) == ""


def test_a_long_list_shows_the_names_most_like_the_one_that_failed() -> None:
    names = [f"table_{i}" for i in range(1000)] + ["customers", "customer_orders"]
    text = listing(names, near="custmers")
    shown = text.split(", …")[0].split(", ")
    assert len(shown) == LISTED
    assert shown[:2] == ["customers", "customer_orders"]
    assert "1,002 in all" in text
    first = listing(names)
    assert first.split(", …")[0].split(", ") == names[:LISTED] and "first" in first


def _names_listed(hint: str, after: str) -> list[str]:
    """The names a hint lists after ``after``, up to the count (or the end)."""
    listed = hint.split(after, 1)[1].split(" (")[0].split(";")[0]
    return [name.strip() for name in listed.split(", ") if name.strip() and name.strip() != "…"]


@pytest.fixture(scope="module")
def big() -> Manifest:
    """1,000 tables (``t0`` … ``t999``) of 20 columns, and one table of 400."""
    text = manifest_text(1000)
    wide = "\n".join(f"      - {{name: w{k}, type: text}}" for k in range(400))
    text += f"  - name: wide\n    columns:\n{wide}\n"
    return load_manifest_text(text, env={})[0]


def test_an_unknown_table_of_a_large_catalogue_lists_the_closest_tables(big: Manifest) -> None:
    with pytest.raises(SandboxViolation) as caught:
        check_sql("SELECT id FROM t9990", big)
    hint = caught.value.hint or ""
    listed = _names_listed(hint, "declared tables: ")
    assert len(listed) == LISTED and listed[0] == "t999"
    assert "1,001 in all" in hint and len(hint) < 40 * LISTED


def test_an_unknown_column_of_a_wide_table_lists_the_closest_columns(big: Manifest) -> None:
    with pytest.raises(SandboxViolation) as caught:
        check_sql("SELECT w3999 FROM wide", big)
    assert caught.value.code == "unknown_column"
    listed = _names_listed(caught.value.hint or "", "wide: ")
    assert len(listed) == LISTED and listed[0] == "w399"


def test_an_unknown_source_among_many_lists_the_closest_sources() -> None:
    table = "tables:\n  - name: items\n    columns: [{name: id, type: integer}]\n"
    sources = [load_manifest_text(f"source: shop_{i}\nkind: sql\nurl: sqlite://\n{table}", env={})[0]
               for i in range(60)]
    with pytest.raises(KeyError) as caught:
        CapabilitySet(sources)["warehouse"]
    assert str(caught.value).count("shop_") == LISTED


def _search_manifest(indices: int, fields: int) -> Manifest:
    lines = ["source: docs", "kind: opensearch", "url: http://127.0.0.1:9200", "indices:"]
    for i in range(indices):
        lines += [f"  - name: index_{i}", "    fields:"]
        lines += [f"      - {{name: field_{k}, type: keyword}}" for k in range(fields)]
    return load_manifest_text("\n".join(lines) + "\n", env={})[0]


def test_an_unknown_field_of_a_wide_index_lists_the_closest_fields() -> None:
    source = _search_manifest(1, 300)
    with pytest.raises(SandboxViolation) as caught:
        check_dsl({"query": {"term": {"field_2999": "x"}}}, source, "index_0")
    listed = _names_listed(caught.value.hint or "", "fields: ")
    assert len(listed) == LISTED and listed[0] == "field_299"


def test_an_unknown_index_among_many_lists_the_closest_indices() -> None:
    source = _search_manifest(200, 1)
    with pytest.raises(SandboxViolation) as caught:
        check_dsl({"query": {"match_all": {}}}, source, "index_9999")
    listed = _names_listed(caught.value.hint or "", "declared indices: ")
    assert len(listed) == LISTED and listed[0] == "index_99"


def test_a_plan_step_on_an_unknown_index_lists_the_closest_indices() -> None:
    from structq.agent.plan import Plan

    source = _search_manifest(200, 1)
    plan = Plan.parse({"steps": [{"output_key": "r", "source": "docs", "index": "xyz_qqq",
                                  "query": {"query": {"match_all": {}}}}]})
    with pytest.raises(PlanError) as caught:
        plan.validate_against(CapabilitySet([source]))
    assert (caught.value.hint or "").count("index_") == LISTED


#: 200 enum values (``R0: region 0`` …), as the ``values:`` of a column or field.
_REGIONS = "\n".join(f"          R{k}: region {k}" for k in range(200))


def _enum_refusal(check: Callable[[Manifest], object], manifest: str) -> str:
    """The hint of the ``enum_value`` refusal ``check`` gets on the manifest ``manifest``."""
    with pytest.raises(SandboxViolation) as caught:
        check(load_manifest_text(manifest, env={})[0])
    assert caught.value.code == "enum_value"
    return caught.value.hint or ""


def test_a_value_not_among_many_enum_values_lists_the_closest_values() -> None:
    hint = _enum_refusal(
        lambda source: check_sql("SELECT region FROM sales WHERE region = 'R1999'", source),
        "source: shop\nkind: sql\nurl: sqlite://\ntables:\n  - name: sales\n    columns:\n"
        f"      - name: region\n        type: text\n        values:\n{_REGIONS}\n")
    assert hint.count("(region ") == LISTED
    assert "'R199' (region 199)" in hint


def test_a_value_not_among_many_enum_values_of_a_field_lists_the_closest_values() -> None:
    hint = _enum_refusal(
        lambda source: check_dsl({"query": {"term": {"region": "R1999"}}}, source, "reports"),
        "source: docs\nkind: opensearch\nurl: http://127.0.0.1:9200\nindices:\n  - name: reports\n"
        f"    fields:\n      - name: region\n        type: keyword\n        values:\n{_REGIONS}\n")
    assert hint.count("(region ") == LISTED
