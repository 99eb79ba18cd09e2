"""Part of ``resolve_tables``: the CTEs of a WITH are written in the order they depend on.

In ``WITH RECURSIVE a AS (SELECT … FROM b), b AS (…)`` the name ``b`` in ``a`` is the later
CTE on PostgreSQL and MariaDB: with RECURSIVE every CTE of the WITH sees every other. SQLite
resolves a later CTE's name so even without RECURSIVE. sqlglot's scopes, and the rule of
``tables.is_cte_reference``, see only earlier CTEs (and, with RECURSIVE, the CTE itself), so
such a query would be refused — ``b`` an undeclared table — or ``b`` checked as a real table
of that name while the engine reads the CTE.

Where the engine resolves forward references, the order of the CTEs does not change what the
query means, so the CTEs are reordered so that each comes after the ones it names (otherwise
keeping the order written). Every reference then points backwards, and the checks and the
engine agree on what each name is — in the query that runs, which is the reordered one. CTEs
that name each other in a cycle are left as written (no engine runs mutual recursion; the
names then fail as tables).
"""

from __future__ import annotations

from sqlglot import exp

from .context import Check

__all__ = ["order_ctes"]

#: Dialects that resolve a later CTE's name without RECURSIVE.
_FORWARD_ALWAYS = frozenset({"sqlite"})


def _dependencies(ctes: list[exp.CTE]) -> list[set[int]]:
    """Per CTE, the positions of the other CTEs of the WITH whose names its body reads."""
    positions = {cte.alias.lower(): i for i, cte in enumerate(ctes)}
    found: list[set[int]] = []
    for i, cte in enumerate(ctes):
        names = {t.name.lower() for t in cte.this.find_all(exp.Table) if not t.args.get("db")}
        found.append({positions[n] for n in names if n in positions and positions[n] != i})
    return found


def _ordered(dependencies: list[set[int]]) -> list[int] | None:
    """A stable topological order, or None for a cycle."""
    done: list[int] = []
    pending = list(range(len(dependencies)))
    while pending:
        ready = next((i for i in pending if dependencies[i] <= set(done)), None)
        if ready is None:
            return None
        done.append(ready)
        pending.remove(ready)
    return done


def order_ctes(check: Check) -> None:
    """Reorder the CTEs of each WITH whose engine resolves forward references."""
    for with_ in check.with_clauses:
        if not (with_.args.get("recursive") or check.sql_dialect in _FORWARD_ALWAYS):
            continue
        ctes = list(with_.expressions)
        order = _ordered(_dependencies(ctes))
        if order is not None and order != list(range(len(ctes))):
            with_.set("expressions", [ctes[i] for i in order])
