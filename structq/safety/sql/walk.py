"""The nodes of a tree that are instances of some classes, with one dictionary lookup per node.

Several rules walk the whole tree after qualification (the tree has changed since
``parse.scan`` indexed it: stars expanded, aliases written, expressions copied by
``qualify_columns``), each looking for a handful of node classes. Testing each node with a
chain of ``isinstance`` calls (and a Python call per test) costs more than the walk itself;
deciding once per class, and skipping every other node with one lookup, gives the same nodes
in the same order.

Rules that read the same tree one after the other, none of them changing it, share one walk
(``Shared``): ``check_growth`` and ``check_patterns`` each walked the whole tree, a few
microseconds per walk on a short query and ~0.1× a parse each over the corpora; one walk that
files each node under every filter it matches gives each rule the same nodes in the same order.
A filter made with ``shared=True`` is answered by that walk (``Check.shared_nodes``), which
is valid only while no rule changes the tree: only rules that read it may use one. Most
queries hold no node any shared filter wants (no ``LIKE``, ``repeat``, ``||``…: nine in ten
over the corpora), and ``parse.scan`` tells (``wanted_by_shared``); their walk is not made.
The others are answered from the nodes ``parse.scan`` listed (``shared_filed``) while no rule
has copied nodes into the tree since (``Check.shared_nodes``), and by the walk after.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

__all__ = ["Instances", "Shared", "shared_filed", "shared_filters", "shared_walk", "wanted_by_shared"]


class Instances:
    """``tree.walk()`` filtered to instances of ``classes`` (subclasses included)."""

    def __init__(self, *classes: type[exp.Expr], shared: bool = False) -> None:
        self.classes = classes
        self.shared = shared
        self._wanted: dict[type, bool] = {}
        if shared:
            _registered.append(self)

    def wants(self, cls: type) -> bool:
        hit = self._wanted.get(cls)
        if hit is None:
            hit = self._wanted[cls] = issubclass(cls, self.classes)
        return hit

    def __call__(self, tree: exp.Expr) -> Iterator[exp.Expr]:
        wanted = self._wanted
        classes = self.classes
        for node in tree.bfs():  # ``walk()``'s order, without its extra generator per node
            cls = type(node)
            hit = wanted.get(cls)
            if hit is None:
                hit = wanted[cls] = issubclass(cls, classes)
            if hit:
                yield node


class Shared:
    """Several ``Instances`` filters answered by one walk: ``file(tree.bfs())`` lists, per
    filter (in the order given), the nodes ``filter(tree)`` would yield, in the same order."""

    def __init__(self, *filters: Instances) -> None:
        self.filters = filters
        #: Node class → positions of the filters it matches (mostly none).
        self._positions: dict[type, tuple[int, ...]] = {}

    def _matching(self, cls: type) -> tuple[int, ...]:
        found = self._positions[cls] = tuple(i for i, f in enumerate(self.filters) if f.wants(cls))
        return found

    def file(self, nodes: Iterable[exp.Expr]) -> list[list[exp.Expr]]:
        """``nodes`` filed per filter, in the order given: each node under every filter it matches."""
        out: list[list[exp.Expr]] = [[] for _ in self.filters]
        positions = self._positions
        for node in nodes:
            cls = type(node)
            found = positions.get(cls)
            if found is None:
                found = self._matching(cls)
            for i in found:
                out[i].append(node)
        return out


#: The filters made with ``shared=True``, and the walk that answers them all.
_registered: list[Instances] = []
_group: Shared | None = None


def shared_walk(tree: exp.Expr) -> dict[Instances, list[exp.Expr]]:
    """The nodes of every shared filter in ``tree``, from one walk."""
    return shared_filed(tree.bfs())


def shared_filed(nodes: Iterable[exp.Expr]) -> dict[Instances, list[exp.Expr]]:
    """``nodes`` (each wanted by some shared filter: ``wanted_by_shared``) filed per shared
    filter, for a tree whose wanted nodes are known without a walk (``Check.shared_nodes``)."""
    global _group
    group = _group
    if group is None or len(group.filters) != len(_registered):
        group = _group = Shared(*_registered)
    return dict(zip(group.filters, group.file(nodes)))


def shared_filters() -> int:
    """How many shared filters there are: a cache of ``wanted_by_shared`` answers is valid
    while this stays the same."""
    return len(_registered)


def wanted_by_shared(cls: type) -> bool:
    """Whether some shared filter wants nodes of class ``cls``."""
    return any(f.wants(cls) for f in _registered)
