"""What each manifest key looks like when written right, for errors about a value of the wrong type.

A value of the wrong shape (``values: [男, 女]``, ``limits: 3``) is the most common first
mistake; the error says what the key means and shows the fixed form, built from what was
written where that is possible (a list of literals becomes a mapping of literals).
"""

from __future__ import annotations

from typing import Any

__all__ = ["type_error_message"]

#: Per key: what it holds, and a correct example written in flow style.
FORMS: dict[str, tuple[str, str]] = {
    "values": ("maps each stored literal to its meaning", "values: {A: 优秀, B: 良好}"),
    "synonyms": ("is a list of other names", "synonyms: [绩效, performance]"),
    "columns": ("is a list of columns, each with name and type",
                "columns: [{name: employee_id, type: text, description: 员工工号}]"),
    "fields": ("is a list of fields, each with name and type", "fields: [{name: title, type: text}]"),
    "tables": ("is a list of tables, each with name and columns",
               "tables: [{name: employees, columns: [{name: employee_id, type: text}]}]"),
    "indices": ("is a list of indices, each with name and fields",
                "indices: [{name: weekly_reports, fields: [{name: title, type: text}]}]"),
    "limits": ("is a mapping of caps", "limits: {max_rows: 1000, timeout_s: 5}"),
    "policies": ("is a mapping holding row_filters",
                 "policies: {row_filters: [{table: employees, where: \"tenant_id = :tenant_id\"}]}"),
    "row_filters": ("is a list of filters, each on one table or index",
                    "row_filters: [{table: employees, where: \"tenant_id = :tenant_id\"}]"),
    "term": ("maps a field to a :variable or a literal", "term: {tenant_id: \":tenant_id\"}"),
    "functions": ("is a list of function names", "functions: [julianday]"),
    "examples": ("is a list of verified questions with their plans",
                 "examples: [{question: …, steps: [{output_key: a, source: hr, query: \"SELECT …\"}]}]"),
    "steps": ("is a list of plan steps", "steps: [{output_key: a, source: hr, query: \"SELECT …\"}]"),
    "sync": ("is a mapping of what sync introspects", "sync: {schema: public, include: [\"*\"], exclude: []}"),
    "include": ("is a list of name patterns", "include: [\"orders_*\"]"),
    "exclude": ("is a list of name patterns", "exclude: [\"tmp_*\"]"),
    "query": ("is SQL text, or a search body as a mapping", "query: \"SELECT name FROM employees\""),
}

#: pydantic's error types for a value of the wrong type → what was expected, in words.
EXPECTED = {
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}

_YAML_TYPE = {dict: "a mapping", list: "a list", str: "text", int: "a number", float: "a number",
              bool: "true/false", type(None): "empty"}


def _literal(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text if text and all(ch not in text for ch in ":{}[],#&*!|>'\"%@`") else f'"{text}"'


def _fixed_values(given: Any) -> str | None:
    """``[男, 女]`` → ``values: {男: <meaning>, 女: <meaning>}``: the literals kept, meanings to fill in."""
    literals = given if isinstance(given, list) else [given] if isinstance(given, (str, int, float)) else []
    literals = [v for v in literals if isinstance(v, (str, int, float, bool))]
    if not literals:
        return None
    return "values: {" + ", ".join(f"{_literal(v)}: <meaning>" for v in literals) + "}"


def type_error_message(key: str | int | None, where: str, kind: str, given: Any) -> tuple[str, str | None] | None:
    """The message and hint for a wrong-typed value at ``where`` (None for other errors)."""
    expected = EXPECTED.get(kind)
    if expected is None:
        return None
    written = _YAML_TYPE.get(type(given), type(given).__name__)
    form = FORMS.get(key) if isinstance(key, str) else None
    if form is None:
        return f"{where} should be {expected}, not {written}", None
    meaning, example = form
    fixed = _fixed_values(given) if key == "values" else None
    hint = f"write it as {fixed}" if fixed else f"for example {example}"
    return f"{where} {meaning}: expected {expected}, not {written}", hint
