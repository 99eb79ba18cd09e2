"""Profiled values are suggestions; accepted values are the only legal literals, compared the way
the database compares text.

A column whose ``values`` came from ``--profile-values`` is ``draft``: the prompt shows them as
values seen in the data and neither sandbox enforces them (``'Sunday'`` with no rows yet is a
weekday all the same). Once a person accepts them (drops ``draft``) they are enforced; where the
database ignores case (MySQL/MariaDB) ``'haiti'`` matches ``Haiti``, elsewhere it is refused
with the stored spelling in the hint.
"""

from __future__ import annotations

import pytest

from structq.capabilities import load_manifest_text, render_manifest
from structq.errors import SandboxViolation
from structq.safety import check_dsl, check_sql

_SQL = """\
source: geo
kind: sql
url: sqlite:///geo.db
dialect: {dialect}
tables:
  - name: visits
    columns:
      - {{name: country, type: text, values: {{Haiti: Haiti, Chile: Chile}}{draft}}}
      - {{name: weekday, type: text, values: {{Monday: Monday, Friday: Friday}}{draft}}}
"""

_SEARCH = """\
source: geo
kind: opensearch
url: http://127.0.0.1:9200
indices:
  - name: visits
    fields:
      - {{name: country, type: keyword, values: {{Haiti: Haiti, Chile: Chile}}{draft}}}
"""


def _manifest(template: str, *, draft: bool, dialect: str = "sqlite"):
    return load_manifest_text(template.format(dialect=dialect, draft=", draft: true" if draft else ""))[0]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
@pytest.mark.parametrize("where", ["weekday = 'Sunday'", "country IN ('Haiti', 'Peru')", "country <> 'haiti'"])
def test_profiled_values_are_not_enforced(dialect: str, where: str) -> None:
    manifest = _manifest(_SQL, draft=True, dialect=dialect)
    assert check_sql(f"SELECT country FROM visits WHERE {where}", manifest).text


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_accepted_values_are_enforced(dialect: str) -> None:
    manifest = _manifest(_SQL, draft=False, dialect=dialect)
    with pytest.raises(SandboxViolation) as info:
        check_sql("SELECT country FROM visits WHERE weekday = 'Sunday'", manifest)
    assert info.value.code == "enum_value" and "'Monday' (Monday)" in info.value.hint


@pytest.mark.parametrize("dialect", ["mysql", "tsql"])
def test_case_insensitive_databases_accept_another_case(dialect: str) -> None:
    manifest = _manifest(_SQL, draft=False, dialect=dialect)
    assert check_sql("SELECT country FROM visits WHERE country IN ('haiti', 'CHILE')", manifest).text


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_case_sensitive_databases_name_the_stored_spelling(dialect: str) -> None:
    manifest = _manifest(_SQL, draft=False, dialect=dialect)
    with pytest.raises(SandboxViolation) as info:
        check_sql("SELECT country FROM visits WHERE country = 'haiti'", manifest)
    assert info.value.code == "enum_value"
    assert info.value.hint.startswith("the stored spelling is 'Haiti'")


def test_search_profiled_values_are_not_enforced_accepted_ones_are() -> None:
    body = {"query": {"term": {"country": "Peru"}}}
    assert check_dsl(body, _manifest(_SEARCH, draft=True), "visits")
    with pytest.raises(SandboxViolation) as info:
        check_dsl(body, _manifest(_SEARCH, draft=False), "visits")
    assert info.value.code == "enum_value"


def test_prompt_tells_suggestions_from_accepted_values() -> None:
    assert "values seen in the data (not a complete list): Haiti, Chile" in render_manifest(_manifest(_SQL, draft=True))
    accepted = render_manifest(_manifest(_SQL, draft=False))
    assert " values: Haiti, Chile" in accepted and "values seen" not in accepted
