"""The search-DSL sandbox: a request body for one declared index → a checked, rewritten body.

The body is walked completely against allowlists (``REQUEST`` → query clauses, aggregations,
hits options); a key no table names is refused, so a search server feature added tomorrow is
refused until someone decides it is safe. In order:

1. ``resolve_index``   exactly one declared index (no patterns, lists, ``_all``, remote
                       clusters or date math);
2. ``forbid_scripts``  no script-like key at any depth (code ``script``), no depth past
                       ``MAX_DEPTH``; ``check_body``: size, text and numbers bounded
                       (``safety/bounds.py``);
3. ``REQUEST``         every key allowed where it stands, every field declared and readable,
                       enum literals legal, references substituted as JSON values (large
                       ``terms`` lists split), aggregation sizes capped; on a row-filtered
                       index, what depends on other tenants' documents refused (``_tenant``);
4. ``REWRITES``        ``_source`` restricted to readable fields, ``size``/``from`` within
                       ``max_rows + 1``, the query and the row filters side by side in
                       ``bool.filter`` (tenant-blind: no relevance scores);
5. ``forbid_scripts``  once more, on the body as it will be sent (defence in depth).

Reference values must be JSON scalars: an object or list from an earlier step (data anyone
may have written) would otherwise become clause options past every check.

Pure: no I/O, the caller's body is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from structq.capabilities.model import Index, Manifest
from structq.errors import PlanError
from structq.safety.bounds import check_body, refusal_for
from structq.safety.query import SafeQuery

from ._aggs import AGGREGATIONS
from ._context import Context
from ._queries import MAX_TERMS, QUERY_CLAUSES
from ._request import REQUEST, REWRITES, SCRIPT_KEYS, forbid_scripts, resolve_index

__all__ = ["check_dsl", "QUERY_CLAUSES", "AGGREGATIONS", "SCRIPT_KEYS", "MAX_TERMS"]


def check_dsl(
    body: Mapping[str, Any],
    source: Manifest,
    index: str,
    *,
    params: Mapping[str, Sequence[Any]] | None = None,
    vars: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    slots: Mapping[str, Any] | None = None,
) -> SafeQuery:
    """Check a search request body against ``source``'s manifest and return it rewritten.

    ``params`` holds the values of references (``"<key>"`` / ``"<key.column>"`` → the earlier
    step's column); ``slots`` a template plan's parameter values (a whole JSON string
    ``":month_start"`` stands for one); ``vars`` the caller's variables for row filters; ``max_rows`` overrides the
    manifest's cap (``Engine`` passes ``max_intermediate_rows`` for steps that feed others).

    Raises ``SandboxViolation`` (with a stable ``code``, the JSON path, and a hint) when the
    body reaches past the manifest, and ``PlanError`` for a reference without usable values;
    nothing else (``bounds.refusal_for``).
    """
    if source.object_type is not Index:  # the DSL addresses indices; this source declares none
        raise PlanError(f"source {source.source!r} is a {source.kind} source, not a search one",
                        hint="send SQL to it (check_sql), or pick a search source")
    try:
        return _check(body, source, index, params, vars, max_rows, slots)
    except Exception as exc:  # noqa: BLE001 - nothing but a refusal leaves the sandbox (bounds.py)
        refusal = refusal_for(exc, source)
        if refusal is exc:
            raise
        raise refusal from None


def _check(body: Mapping[str, Any], source: Manifest, index: str, params: Mapping[str, Sequence[Any]] | None,
           vars: Mapping[str, Any] | None, max_rows: int | None, slots: Mapping[str, Any] | None) -> SafeQuery:
    """``check_dsl`` on a search source: every check, then the rewrites."""
    target = resolve_index(source, index)
    rows = source.limits.max_rows if max_rows is None else max_rows
    ctx = Context(source, target, limit=rows + 1, max_rows=rows, params=params or {}, vars=vars or {},
                  slots=slots or {})
    if not isinstance(body, Mapping):
        ctx.refuse("invalid_body", "the request body is not a JSON object", (),
                   'e.g. {"query": {"match": {"content": "…"}}, "size": 10}')
    forbid_scripts(ctx, body)  # also bounds the depth, before any other walk
    check_body(body, source)
    checked = REQUEST(ctx, dict(body), ())
    for rewrite in REWRITES:
        checked = rewrite(ctx, checked)
    # Again on what will be sent: the walk substitutes reference values and adds rewrites,
    # so a script key could only appear now if a check let one through — never send it.
    forbid_scripts(ctx, checked)
    return SafeQuery(
        source=source.source,
        kind="search",
        limit=ctx.limit,
        max_rows=rows,
        body=checked,
        index=target.name,
        params=dict(ctx.used),
        tables=(target.name,),
        columns=tuple(ctx.columns),
    )
