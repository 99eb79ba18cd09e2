"""The demo schema's references are declared from the tables they point to (``keys_of``), so a
foreign key cannot name a table or key that is not there."""

from __future__ import annotations

import pytest

from structq.demo.schema import EMPLOYEE_PERFORMANCE, PRODUCTS, PROJECT_MEMBERS, TABLES, keys_of


def test_keys_of_points_at_the_primary_key_by_its_name() -> None:
    assert keys_of(PRODUCTS) == {"product_id": "products(product_id)"}


def test_keys_of_refuses_a_composite_primary_key() -> None:
    with pytest.raises(ValueError):
        keys_of(PROJECT_MEMBERS)
    assert len(EMPLOYEE_PERFORMANCE.primary_key) == 2


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_reference_points_at_an_earlier_table_s_column(table) -> None:
    earlier = {t.name: t for t in TABLES[: TABLES.index(table) + 1]}
    for column, target in table.references.items():
        name, _, rest = target.partition("(")
        assert column in table.columns
        assert name in earlier and rest.rstrip(")") in earlier[name].columns
