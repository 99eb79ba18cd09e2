"""The REST sandbox: an operation and its params for one ``kind: openapi`` source → the exact
requests that may be sent, every one checked before any is.

1. the operation is declared (``unknown_operation``) and a read: a GET not marked
   ``callable: false`` (``not_callable``);
2. every param is declared (``unknown_parameter``), none that a row filter fixes
   (``row_filter_argument``), every required one given (``missing_parameter``);
3. each value validates against its parameter's schema — type, ``enum`` (``enum_value``),
   ``minimum``/``maximum``, length, ``pattern``, ``format`` (``invalid_parameter``); a declared
   page parameter is capped at ``max_rows + 1``;
4. a reference (``"<key.column>"``) with several values becomes one request per value (an
   ``array`` parameter takes the list whole), at most ``max_requests`` (``too_many_requests``);
5. the row-filter parameters are set from the caller's variables (``missing_variable``);
6. path parameters are percent-encoded into the declared path; the host and base path are the
   manifest's ``url`` (the executor joins them), so nothing a plan writes chooses where a
   request goes.

Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from structq.capabilities.api import Operation
from structq.capabilities.model import Manifest
from structq.safety.api_values import Refuse, Unchecked, caller_value, resolve_values
from structq.safety.query import SafeQuery

__all__ = ["check_rest", "validate_value"]

_MAX_TEXT = 2_000


def _date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
        return True
    except ValueError:
        return False


def _datetime(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def _uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
        return True
    except ValueError:
        return False


_FORMATS = {
    "date": _date,
    "date-time": _datetime,
    "uuid": _uuid,
    "email": lambda t: re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", t) is not None,
}


def validate_value(value: Any, schema: Mapping[str, Any], name: str, refuse: Refuse) -> Any:
    """``value`` as the parameter's schema allows it (an integer written ``"5"`` is 5), or a
    refusal naming what is wrong. The stand-in for a reference not yet run is let through."""
    if isinstance(value, Unchecked):
        return value
    kind = schema.get("type", "string")
    if kind == "array":
        values = value if isinstance(value, list) else [value]
        if len(values) > int(schema.get("maxItems", 1000)):
            refuse("invalid_parameter", f"parameter {name!r} takes at most {schema.get('maxItems', 1000)} values")
        return [validate_value(v, schema.get("items") or {}, name, refuse) for v in values]
    if isinstance(value, (list, dict)) or value is None:
        refuse("invalid_parameter", f"parameter {name!r} takes one {kind} value, not {type(value).__name__}")
    if kind in ("integer", "number"):
        number = value
        if isinstance(value, str):
            try:
                number = int(value) if kind == "integer" else float(value)
            except ValueError:
                refuse("invalid_parameter", f"parameter {name!r} is a{'n' if kind == 'integer' else ''} {kind}, not {value!r}")
        if isinstance(number, bool) or not isinstance(number, (int, float)) or (isinstance(number, float) and not math.isfinite(number)):
            refuse("invalid_parameter", f"parameter {name!r} is a{'n' if kind == 'integer' else ''} {kind}, not {value!r}")
        if kind == "integer":
            if isinstance(number, float) and not number.is_integer():
                refuse("invalid_parameter", f"parameter {name!r} is an integer, not {value!r}")
            number = int(number)
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and number < low) or (high is not None and number > high) or \
                ("exclusiveMinimum" in schema and number <= schema["exclusiveMinimum"]) or \
                ("exclusiveMaximum" in schema and number >= schema["exclusiveMaximum"]):
            refuse("invalid_parameter", f"parameter {name!r} must be within "
                   f"{'' if low is None else low}..{'' if high is None else high}, not {number}")
        value = number
    elif kind == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            refuse("invalid_parameter", f"parameter {name!r} is a boolean, not {value!r}")
    else:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            refuse("invalid_parameter", f"parameter {name!r} is text, not {value!r}")
        value = str(value)
        longest = min(int(schema.get("maxLength", _MAX_TEXT)), _MAX_TEXT)
        if len(value) > longest or len(value) < int(schema.get("minLength", 0)):
            refuse("invalid_parameter", f"parameter {name!r} must be {schema.get('minLength', 0)} to {longest} characters")
        if any(ord(c) < 32 for c in value):
            refuse("invalid_parameter", f"parameter {name!r} holds control characters")
        pattern = schema.get("pattern")
        if pattern is not None and re.search(pattern, value) is None:
            refuse("invalid_parameter", f"parameter {name!r} must match {pattern!r}")
        check = _FORMATS.get(str(schema.get("format")))
        if check is not None and not check(value):
            refuse("invalid_parameter", f"parameter {name!r} must be a {schema['format']}, not {value!r}")
    if "enum" in schema and value not in schema["enum"] and str(value) not in [str(v) for v in schema["enum"]]:
        refuse("enum_value", f"parameter {name!r} takes one of {', '.join(map(str, schema['enum']))}, not {value!r}",
               hint="use one of the listed values exactly")
    return value


def _operation(source: Manifest, name: Any, refuse: Refuse) -> Operation:
    operation = source.operation(name) if isinstance(name, str) else None
    if operation is None:
        readable = [o.name for o in source.operations if o.readable]
        refuse("unknown_operation", f"operation {name!r} is not declared in the manifest",
               hint=f"operations: {', '.join(readable) or '(none)'}")
    if not operation.readable:
        refuse("not_callable", f"operation {name!r} is a {operation.method.upper()} that a plan may not call",
               hint="only GET operations with a path, not marked callable: false, can run")
    return operation


def _path(operation: Operation, values: Mapping[str, Any], refuse: Refuse) -> str:
    """The declared path with each path parameter percent-encoded (``/`` too)."""
    path = operation.path or ""
    for name in re.findall(r"\{([^}]+)\}", path):
        if name not in values:
            refuse("missing_parameter", f"path parameter {name!r} of {operation.name} has no value")
        text = str(values[name])
        if text in ("", ".", ".."):  # a dot segment would be resolved away, leaving the declared path
            refuse("invalid_parameter", f"path parameter {name!r} may not be {text!r}")
        path = path.replace("{" + name + "}", quote(text, safe=""))
    return path


def check_rest(
    operation_name: Any,
    source: Manifest,
    *,
    values: Mapping[str, Any] | None = None,
    params: Mapping[str, Sequence[Any]] | None = None,
    vars: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    slots: Mapping[str, Any] | None = None,
) -> SafeQuery:
    """Check a REST step (``operation_name`` with its ``values``) against ``source`` and
    return the requests that may be sent (``SafeQuery.body["requests"]``: path and query
    parameters of each). ``params`` holds reference values, ``vars`` the caller's row-filter
    variables. Raises ``SandboxViolation`` before any request exists."""
    refuse = Refuse(source.source)
    if source.kind != "openapi":
        refuse("not_a_query", f"source {source.source!r} is a {source.kind} source, not a REST one")
    operation = _operation(source, operation_name, refuse)
    rows = source.limits.max_rows if max_rows is None else max_rows
    given = resolve_values(values, refuse, what="parameter", params=params or {}, slots=slots or {})
    fixed = {rf.parameter: rf.value for rf in source.row_filters_for(operation.name) if rf.parameter}
    declared = {p.name: p for p in operation.parameters}
    for name in given:
        if name not in declared:
            refuse("unknown_parameter", f"operation {operation.name} has no parameter {name!r}",
                   hint=f"parameters: {', '.join(n for n in declared if n not in fixed) or '(none)'}")
        if name in fixed:
            refuse("row_filter_argument", f"parameter {name!r} of {operation.name} is set by a row filter; "
                   "a plan may not set it", hint="leave it out: structq sets it from the caller's variables")

    fan: str | None = None
    checked: dict[str, Any] = {}
    for name, resolved in given.items():
        parameter = declared[name]
        schema = parameter.schema_
        if resolved.reference is not None and schema.get("type") != "array":
            if fan is not None:
                refuse("too_many_requests", f"parameters {fan!r} and {name!r} both take a list: "
                       "one reference per step may fan out", hint="join the lists in a local step first")
            fan = name
            checked[name] = [validate_value(v, schema, name, refuse) for v in dict.fromkeys(resolved.value)]
        else:
            checked[name] = validate_value(resolved.value, schema, name, refuse)
    for name, value in fixed.items():
        checked[name] = validate_value(caller_value(value, vars or {}, refuse, f"operation {operation.name!r}"),
                                       declared[name].schema_, name, refuse)
    for parameter in operation.parameters:
        if parameter.page:
            asked = checked.get(parameter.name)
            checked[parameter.name] = rows + 1 if not isinstance(asked, int) else min(asked, rows + 1)
            maximum = parameter.schema_.get("maximum")
            if maximum is not None:
                checked[parameter.name] = min(checked[parameter.name], maximum)
        if parameter.required and parameter.name not in checked:
            refuse("missing_parameter", f"operation {operation.name} needs the parameter {parameter.name!r}",
                   hint=f"{parameter.name}: {parameter.schema_.get('type', 'string')}")

    if fan is not None and len(checked[fan]) > source.limits.max_requests:
        refuse("too_many_requests", f"<{given[fan].reference}> has {len(checked[fan])} values, one request each; "
               f"at most {source.limits.max_requests}", hint="narrow the earlier step, or raise limits.max_requests")
    requests = [_request(operation, {**checked, fan: value} if fan else checked, refuse)
                for value in (checked[fan] if fan else [None])]
    return SafeQuery(
        source=source.source,
        kind="openapi",
        limit=rows + 1,
        max_rows=rows,
        body={"operation": operation.name, "requests": requests},
        index=operation.name,
        params=checked,
        tables=(operation.name,),
        columns=tuple(operation.readable_members()),
    )


def _request(operation: Operation, values: Mapping[str, Any], refuse: Refuse) -> dict[str, Any]:
    path_names = {p.name for p in operation.parameters if p.in_ == "path"}
    query = {name: value for name, value in values.items() if name not in path_names}
    return {"path": _path(operation, values, refuse), "query": query}

