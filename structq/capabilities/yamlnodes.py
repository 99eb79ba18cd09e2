"""YAML text → plain data, and (separately, when asked) where each value stands in the file.

The two are separate walks over the composed nodes because only errors need positions: a
1,000-table manifest has ~150k nodes, and recording a path tuple and two marks for each one
cost five times the data itself. Loading builds the data alone; positions are recorded by
``record_positions`` from the same text when an error first needs one (the loader's
``_DeferredPositions``), so they are exactly those of the nodes the data was built from.

``${VAR}`` expansion is a third, separate step (``expand``) over the few values that need it,
because the data of an unchanged file may come from the manifest cache, built under another
environment.
"""

from __future__ import annotations

import operator
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from structq.errors import ManifestError

__all__ = ["Positions", "compose", "build", "record_positions", "expand", "interpolate", "EXPANDED_KEYS"]

Path_ = tuple[str | int, ...]

_STR_TAG = "tag:yaml.org,2002:str"

#: The only keys whose values expand ``${VAR}``: where a deployment differs (hosts, secrets,
#: folders). Elsewhere a ``$`` is text (a regex in a row filter, a price in a description).
EXPANDED_KEYS = frozenset({"url", "documents"})

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


_SCALAR, _MAPPING, _SEQUENCE = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
_MAP_TAG, _SEQ_TAG = yaml.SafeLoader.DEFAULT_MAPPING_TAG, yaml.SafeLoader.DEFAULT_SEQUENCE_TAG


class _Composer(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's composer when PyYAML was built with it (ten times faster on large manifests);
    both keep the line and column of every node.

    libyaml's composer calls back into Python three times per node (a 1,000-table manifest:
    151k nodes): ``resolve``, ``descend_resolver`` and ``ascend_resolver``. Composing that
    manifest (and freeing the nodes) takes ~1.6 G instructions, ~0.14 s: 0.37 G are libyaml's
    parser, ~0.8 G building the Python nodes and their marks (fixed by PyYAML), the rest these
    callbacks. So each is cut to what the safe loader's rules need:

    - tag resolution: a collection or a quoted scalar has the default tag; a plain scalar whose
      first character starts no implicit rule (most descriptions and names) is a string; the
      rest depend on their text alone and repeat (``text``, ``true``), so they are memoised by
      text; the constants are module globals, not attributes looked up along the loader's
      classes;
    - the safe loader registers no path resolvers, so descend/ascend have nothing to record:
      they are builtins that accept the same arguments, allocate nothing and change nothing
      (``operator.is_``, ``tuple``): no Python frame per node.

    Together 1.67 G → 1.54 G instructions (valgrind, -8 %). Why not ``yaml.load`` with
    ``CSafeLoader``: only its parser and composer are C; its constructor is PyYAML's Python
    one, and it took 0.38-0.47 s for the same text against ~0.16 s for ``compose`` + ``build``.
    """

    #: ``descend_resolver(parent, index)`` and ``ascend_resolver()``: C-level no-ops (a builtin
    #: is no descriptor, so it is called without ``self``).
    descend_resolver = operator.is_
    ascend_resolver = tuple

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._plain_tags: dict[str, str] = {}
        self._rule_starts = self.yaml_implicit_resolvers

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is _SCALAR:
            if implicit[0] and value[:1] in self._rule_starts:
                tag = self._plain_tags.get(value)
                if tag is None:
                    tag = self._plain_tags[value] = super().resolve(kind, value, implicit)
                return tag
            return _STR_TAG
        return _MAP_TAG if kind is _MAPPING else _SEQ_TAG


assert not _Composer.yaml_path_resolvers, "path resolvers need descend/ascend_resolver and resolve"
assert None not in _Composer.yaml_implicit_resolvers, "a rule for any first character needs resolve"


@dataclass
class Positions:
    """Where each value of a manifest stands in its file (1-based line and column)."""

    file: str
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: Path_, *, key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path``; the nearest enclosing position when it is not recorded."""
        table = self.keys if key else self.values
        for n in range(len(path), -1, -1):
            sub = path[:n]
            if sub in table:
                return table[sub]
            if sub in self.values:
                return self.values[sub]
        return None, None

    def error(self, path: Path_, message: str, *, key: bool = False, **kw: Any) -> ManifestError:
        line, column = self.of(path, key=key)
        return ManifestError(message, file=self.file, line=line, column=column, **kw)


def compose(text: str, file: str) -> yaml.Node:
    """The node tree of ``text``; a syntax error or an empty file is a ``ManifestError``."""
    try:
        node = yaml.compose(text, Loader=_Composer)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise ManifestError(
            f"YAML syntax error: {problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint="check indentation, colons and quoting near this spot",
        ) from None
    if node is None:
        raise ManifestError("the file is empty", file=file, line=1, column=1,
                            hint="a manifest starts with 'source:', 'kind:' and 'url:'")
    return node


def _error(node: yaml.Node, file: str, message: str, **kw: Any) -> ManifestError:
    mark = node.start_mark
    return ManifestError(message, file=file, line=mark.line + 1, column=mark.column + 1, **kw)


class _Builder:
    """Turns composed nodes into plain data, noting where ``${VAR}`` may need expanding.

    With ``env``, each such value is also checked as it is met, so an unset variable is
    reported before a later duplicate key, as when expansion happened while building."""

    def __init__(self, file: str, env: Mapping[str, str] | None = None) -> None:
        self.file = file
        self.env = env
        self.expansions: list[Path_] = []
        #: The safe loader's constructor alone: a whole ``SafeLoader`` refers to itself (its
        #: parser's state), so each build left a cycle holding every non-string node it met.
        self._constructor = yaml.constructor.SafeConstructor()

    def _expansion(self, node: yaml.Node, path: Path_) -> None:
        self.expansions.append(path)
        if self.env is not None:
            _interpolate(node.value, self.env, lambda name: _error(
                node, self.file, f"environment variable {name} is not set",
                hint=f"set {name}, or give a default: ${{{name}:-value}}"))

    def scalar(self, node: yaml.Node) -> Any:
        if type(node) is _SCALAR and node.tag == _STR_TAG:
            return node.value
        return self._constructor.construct_object(node, deep=True)

    def build(self, node: yaml.Node, path: Path_) -> Any:
        """Plain data of ``node``; hot (once per container of a 1,000-table manifest), so it
        dispatches on the exact node class, inlines the common leaf (a plain string) and
        reads the node classes from module globals rather than the ``yaml`` module."""
        kind = type(node)
        if kind is _MAPPING:
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if type(key_node) is _SCALAR and key_node.tag == _STR_TAG:
                    key = key_node.value
                else:
                    key = self.scalar(key_node)
                    if isinstance(key, (dict, list)):
                        raise _error(key_node, self.file, "a mapping key must be a plain value")
                if key in out:
                    raise _error(key_node, self.file, f"duplicate key {key!r}", hint="each key may appear once")
                if type(value_node) is _SCALAR and value_node.tag == _STR_TAG:
                    value = out[key] = value_node.value
                    if "$" in value and key in EXPANDED_KEYS:
                        self._expansion(value_node, (*path, key))
                else:
                    out[key] = self.build(value_node, (*path, key if type(key) is str else str(key)))
            return out
        if kind is _SEQUENCE:
            build = self.build
            return [build(item, (*path, i)) for i, item in enumerate(node.value)]
        value = self.scalar(node)
        if isinstance(value, str) and "$" in value and path and path[-1] in EXPANDED_KEYS:
            self._expansion(node, path)
        return value


def build(node: yaml.Node, file: str, env: Mapping[str, str] | None = None) -> tuple[Any, list[Path_]]:
    """The plain data of ``node`` (a duplicate or non-plain key, or with ``env`` an unset
    variable, is a ``ManifestError`` at its position) and the paths of the string values
    ``expand`` may have to change; the data itself is not expanded."""
    builder = _Builder(file, env)
    return builder.build(node, ()), builder.expansions


def record_positions(node: yaml.Node, positions: Positions) -> Positions:
    """Record where every value and key under ``node`` stands (the tree ``build`` accepted)."""
    values, keys, key_of = positions.values, positions.keys, _Builder(positions.file).scalar
    stack: list[tuple[yaml.Node, Path_]] = [(node, ())]
    while stack:
        node, path = stack.pop()
        mark = node.start_mark
        values[path] = (mark.line + 1, mark.column + 1)
        if type(node) is yaml.MappingNode:
            children = []
            for key_node, value_node in node.value:
                key = key_of(key_node)
                child = (*path, key if type(key) is str else str(key))
                mark = key_node.start_mark
                keys[child] = (mark.line + 1, mark.column + 1)
                children.append((value_node, child))
            stack.extend(reversed(children))  # popped in document order, as the file reads
        elif type(node) is yaml.SequenceNode:
            stack.extend((item, (*path, i)) for i, item in reversed(list(enumerate(node.value))))
    return positions


def _interpolate(text: str, env: Mapping[str, str], fail: typing.Callable[[str], ManifestError]) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}``; ``$$`` stands for a literal ``$``."""

    def repl(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value not in (None, ""):
            return value
        if default is not None:
            return default
        raise fail(name)

    return _VAR.sub(repl, text)


#: ``${VAR}`` expansion of one text, for values expanded when they are used (an API source's
#: headers: the credential never becomes part of the loaded manifest).
interpolate = _interpolate


def expand(data: Any, expansions: list[Path_], env: Mapping[str, str], positions: Positions) -> None:
    """Expand ``${VAR}`` in place at ``expansions`` (paths ``build`` returned for ``data``);
    an unset variable without a default is a ``ManifestError`` at its value."""
    for path in expansions:
        parent = data
        for part in path[:-1]:
            parent = parent[part] if isinstance(parent, list) or part in parent else _key_of(parent, part)
        last = path[-1]

        def missing(name: str, path: Path_ = path) -> ManifestError:
            return positions.error(path, f"environment variable {name} is not set",
                                   hint=f"set {name}, or give a default: ${{{name}:-value}}")

        parent[last] = _interpolate(parent[last], env, missing)


def _key_of(mapping: dict[Any, Any], part: str) -> Any:
    """The value under the non-string key that ``part`` (its ``str``) stands for in a path."""
    return next(value for key, value in mapping.items() if str(key) == part)
