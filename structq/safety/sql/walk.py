"""The nodes of a tree that are instances of some classes, with one dictionary lookup per node.

Several passes walk the whole tree after qualification (the tree has changed since
``parse.scan`` indexed it: stars expanded, aliases written, expressions copied by
``qualify_columns``), each looking for a handful of node classes. Testing each node with a
chain of ``isinstance`` calls (and a Python call per test) costs more than the walk itself;
deciding once per class, and skipping every other node with one lookup, gives the same nodes
in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

__all__ = ["Instances"]


class Instances:
    """``tree.walk()`` filtered to instances of ``classes`` (subclasses included)."""

    def __init__(self, *classes: type[exp.Expr]) -> None:
        self.classes = classes
        self._wanted: dict[type, bool] = {}

    def __call__(self, tree: exp.Expr) -> Iterator[exp.Expr]:
        wanted = self._wanted
        classes = self.classes
        for node in tree.walk():
            cls = type(node)
            hit = wanted.get(cls)
            if hit is None:
                hit = wanted[cls] = issubclass(cls, classes)
            if hit:
                yield node
