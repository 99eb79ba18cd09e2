"""What a request may carry, checked at the boundary before any work is done.

JSON in is strict: ``NaN``/``Infinity`` are no JSON (Python's parser accepts them; a browser's
``JSON.parse`` does not), so they are refused (``bad_request``). Every string must have a UTF-8
form: a lone UTF-16 surrogate (``"\\ud800"``, a legal JSON escape) can reach no database, log
line or response intact (``invalid_text``). Every number must be one every database and search server stores alike:
finite, integers within 64 bits (``invalid_value``). A plan has at most ``limits.max_steps``
steps (``too_many_steps``). The HTTP guard (``guard.py``) and the service's own entry points
(which MCP calls too) apply the same checks, so both transports refuse alike.
"""

from __future__ import annotations

import json
import math
from typing import Any

from structq.capabilities.nesting import json_values
from structq.safety.bounds import INT64

from .errors import RequestRejected

__all__ = ["strict_json", "check_values", "check_text", "check_steps"]


def _no_constant(name: str) -> Any:
    raise RequestRejected(400, "bad_request", f"the body is not JSON: {name} is no JSON number",
                          hint="send finite numbers; write a missing value as null")


def strict_json(body: bytes) -> Any:
    """``body`` parsed as strict JSON (RFC 8259: no ``NaN``/``Infinity``), its values checked."""
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestRejected(400, "bad_request", f"the body is not JSON: {str(exc)[:120]}",
                              hint="send a JSON object with Content-Type: application/json") from None
    except RecursionError:
        raise RequestRejected(400, "bad_request", "the body is not JSON that can be read: it nests too deeply",
                              hint="send a flatter JSON object") from None
    check_values(value)
    return value


def check_text(text: str, what: str) -> None:
    """Refuse ``text`` without a UTF-8 form, naming ``what`` it is (not repeating it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestRejected(400, "invalid_text", f"{what} holds U+{ord(exc.object[exc.start]):04X}, a lone UTF-16 "
                              "surrogate that is no character", hint="send the text as valid Unicode") from None


def check_values(value: Any, what: str = "the body") -> None:
    """Refuse text without a UTF-8 form and numbers no database or search server holds alike, anywhere in ``value``."""
    for node, _ in json_values(value):
        if isinstance(node, str):
            check_text(node, what)
        elif isinstance(node, float) and not math.isfinite(node):
            raise RequestRejected(400, "invalid_value", f"{what} holds {node!r}, which is no JSON number",
                                  hint="send finite numbers; write a missing value as null")
        elif isinstance(node, int) and not isinstance(node, bool) and not INT64[0] <= node <= INT64[1]:
            raise RequestRejected(400, "invalid_value", f"{what} holds an integer outside 64 bits",
                                  hint="send integers between -2^63 and 2^63-1")


def check_steps(plan: Any, max_steps: int) -> None:
    """Refuse a plan of more than ``max_steps`` steps, before it is read any further."""
    steps = plan.get("steps") if isinstance(plan, dict) else None
    if isinstance(steps, list) and len(steps) > max_steps:
        raise RequestRejected(422, "too_many_steps", f"the plan has {len(steps)} steps; at most {max_steps} are accepted",
                              hint=f"split the work into smaller plans (limits.max_steps in server.yaml: {max_steps})")
