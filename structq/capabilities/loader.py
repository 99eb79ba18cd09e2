"""Load capability manifests from YAML, keeping every value's line and column.

Why not ``yaml.safe_load``: an error in a manifest must point at the file, line and column
and suggest the closest valid key. So the YAML is composed into nodes, turned into plain data
while recording each path's position, validated by the pydantic model, and any validation
error is mapped back through those positions.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import os
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from structq.errors import ManifestError

from .forms import type_error_message
from .model import Manifest

__all__ = ["load_manifest", "load_manifest_text", "manifest_files", "Positions", "default_environ", "read_yaml"]

Path_ = tuple[str | int, ...]

#: Files in a manifest folder that are not manifests (question sets for ``structq eval``).
NON_MANIFEST_NAMES = re.compile(r"^(eval|.*\.eval)\.ya?ml$")

_STR_TAG = "tag:yaml.org,2002:str"


class _Composer(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's composer when PyYAML was built with it (ten times faster on large manifests);
    both keep the line and column of every node.

    Tag resolution is the one part of composing that stays in Python, once per scalar: a
    manifest repeats the same few plain words (``text``, ``true``, column names), so the
    resolved tag is memoised per (kind, value, implicit). The safe loader registers no path
    resolvers, so the per-node descend/ascend bookkeeping is skipped.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[tuple[Any, Any, Any], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        key = (kind, value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = self._tags[key] = super().resolve(kind, value, implicit)
        return tag

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


assert not _Composer.yaml_path_resolvers, "path resolvers need descend/ascend_resolver"

#: The only keys whose values expand ``${VAR}``: where a deployment differs (hosts, secrets,
#: folders). Elsewhere a ``$`` is text (a regex in a row filter, a price in a description).
EXPANDED_KEYS = frozenset({"url", "documents"})

#: A SQLite URL with a relative path: it resolves against the manifest's folder, like ``documents``.
_RELATIVE_SQLITE = re.compile(r"^(sqlite(?:\+\w+)?:///)(?!/|file:|:memory:)([^?]+)(\?.*)?$")

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


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


def default_environ() -> dict[str, str]:
    """Variables that have a default even when the environment does not set them."""
    from structq.config import default_demo_dir

    return {"STRUCTQ_DEMO_DIR": str(default_demo_dir())}


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


class _Builder:
    """Turns composed YAML nodes into plain data, recording positions and expanding variables."""

    def __init__(self, positions: Positions, env: Mapping[str, str]) -> None:
        self.positions = positions
        self.env = env
        self._constructor = yaml.SafeLoader("")

    def build(self, node: yaml.Node, path: Path_ = ()) -> Any:
        """Plain data of ``node``; hot (once per node of a 1,000-table manifest: ~130k), so
        it dispatches on the exact node class and binds what it reuses to locals."""
        values, keys = self.positions.values, self.positions.keys
        mark = node.start_mark
        values[path] = (mark.line + 1, mark.column + 1)
        kind = type(node)
        if kind is yaml.MappingNode:
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if type(key_node) is yaml.ScalarNode:
                    key = key_node.value if key_node.tag == _STR_TAG else self._scalar(key_node)
                else:
                    key = self._constructor.construct_object(key_node, deep=True)
                if isinstance(key, (dict, list)):
                    raise self._err(key_node, "a mapping key must be a plain value")
                if key in out:
                    raise self._err(key_node, f"duplicate key {key!r}", hint="each key may appear once")
                child = (*path, key if type(key) is str else str(key))
                mark = key_node.start_mark
                keys[child] = (mark.line + 1, mark.column + 1)
                if type(value_node) is yaml.ScalarNode and value_node.tag == _STR_TAG and not (
                        "$" in value_node.value and child[-1] in EXPANDED_KEYS):
                    mark = value_node.start_mark  # the common leaf, inlined
                    values[child] = (mark.line + 1, mark.column + 1)
                    out[key] = value_node.value
                else:
                    out[key] = self.build(value_node, child)
            return out
        if kind is yaml.SequenceNode:
            build = self.build
            return [build(item, (*path, i)) for i, item in enumerate(node.value)]
        value = self._scalar(node)
        if isinstance(value, str) and "$" in value and path and path[-1] in EXPANDED_KEYS:
            value = _interpolate(value, self.env, lambda name: self._missing_var(node, name))
        return value

    def _scalar(self, node: yaml.Node) -> Any:
        """A scalar's value; plain strings (most of a manifest) skip the generic constructor."""
        if node.tag == _STR_TAG:
            return node.value
        return self._constructor.construct_object(node, deep=True)

    def _missing_var(self, node: yaml.Node, name: str) -> ManifestError:
        return self._err(
            node,
            f"environment variable {name} is not set",
            hint=f"set {name}, or give a default: ${{{name}:-value}}",
        )

    def _err(self, node: yaml.Node, message: str, **kw: Any) -> ManifestError:
        return ManifestError(
            message,
            file=self.positions.file,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
            **kw,
        )


def _parse_yaml(text: str, file: str, env: Mapping[str, str]) -> tuple[Any, Positions]:
    positions = Positions(file)
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
    return _Builder(positions, env).build(node), positions


def read_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """YAML text as plain data with each value's position (no ``${VAR}`` expansion); a syntax
    error is a ``ManifestError`` at ``file:line:column``. Plan files use it too."""
    return _parse_yaml(text, file, {})


# --- mapping pydantic errors back to the file ------------------------------------------


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/list/dict annotations."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    if origin in (list, tuple):
        return [t for arg in typing.get_args(annotation)[:1] for t in _unwrap(arg)]
    if origin is dict:
        return []
    return [annotation]


def _model_at(loc: Iterable[str | int]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (None when not a model)."""
    current: type[BaseModel] | None = Manifest
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        fields = {f.alias or name: f for name, f in current.model_fields.items()}
        info = fields.get(part)
        if info is None:
            return None
        models = [t for t in _unwrap(info.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        current = models[0] if models else None
    return current


def _literal_choices(loc: tuple[str | int, ...]) -> list[str]:
    parent = _model_at(loc[:-1])
    if parent is None or not isinstance(loc[-1], str):
        return []
    fields = {f.alias or name: f for name, f in parent.model_fields.items()}
    info = fields.get(loc[-1])
    if info is None:
        return []
    choices: list[str] = []
    for t in _unwrap(info.annotation):
        if typing.get_origin(t) is typing.Literal:
            choices.extend(str(a) for a in typing.get_args(t))
    return choices


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option most like ``word`` (for "did you mean …?"), or None when nothing is close."""
    matches = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.5)
    return matches[0] if matches else None


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[str | int, ...]:
    """Drop pydantic's union-branch labels (``str``, ``dict[str,any]``) that are not data keys."""
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and not out[-1:] == [part]:
            # a key that is missing (a required field) or extra: keep it, stop walking
            out.append(part)
            node = None
        # else: a union branch label; skip it
    return tuple(out)


def _validation_error(exc: ValidationError, data: Any, positions: Positions) -> ManifestError:
    # An unknown key explains a "missing" one next to it (a typo), so report it first.
    priority = {"extra_forbidden": 0, "literal_error": 1}
    err = min(exc.errors(), key=lambda e: priority.get(e["type"], 2))
    loc = _clean_loc(tuple(err["loc"]), data)
    where = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        valid = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
        suggestion = closest(str(loc[-1]), valid)
        hint = None if suggestion else f"valid keys here: {', '.join(valid)}"
        return positions.error(loc, f"unknown key {loc[-1]!r} at {where}", key=True,
                               suggestion=suggestion, hint=hint)
    if kind == "missing":
        return positions.error(loc[:-1], f"missing required key {loc[-1]!r} at {where}",
                               hint=f"add '{loc[-1]}:'")
    if kind == "literal_error":
        choices = _literal_choices(loc)
        given = err.get("input")
        suggestion = closest(str(given), choices) if choices else None
        hint = f"one of: {', '.join(choices)}" if choices else None
        if suggestion:
            hint = f"did you mean {suggestion!r}? valid: {', '.join(choices)}"
        return positions.error(loc, f"invalid value {given!r} for {where}", suggestion=suggestion, hint=hint)
    typed = type_error_message(loc[-1] if loc else None, where, kind, err.get("input"))
    if typed:
        message, hint = typed
        return positions.error(loc, message, hint=hint)
    return positions.error(loc, f"{where}: {err['msg']}")


@contextlib.contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a manifest is built.

    Loading allocates hundreds of thousands of long-lived objects (nodes, dicts, models) and no
    cycles; every allocation threshold crossed made the collector rescan the whole growing
    graph, which took two thirds of loading a 1,000-table manifest and made it superlinear.
    Reference counting still frees everything; the collector resumes (as it was) afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_manifest_text(text: str, file: str = "<manifest>", *, env: Mapping[str, str] | None = None) -> tuple[Manifest, Positions]:
    """Validate one manifest's YAML text. Raises ``ManifestError`` pointing into ``file``."""
    with _without_cyclic_gc():
        return _load_manifest_text(text, file, env)


def _load_manifest_text(text: str, file: str, env: Mapping[str, str] | None) -> tuple[Manifest, Positions]:
    environ = {**default_environ(), **(os.environ if env is None else env)}
    data, positions = _parse_yaml(text, file, environ)
    if not isinstance(data, dict):
        raise positions.error((), "a manifest must be a mapping of keys (source:, kind:, url:, …)")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, data, positions) from None
    return manifest, positions


def load_manifest(path: str | Path, *, env: Mapping[str, str] | None = None) -> tuple[Manifest, Positions]:
    """Load one manifest file (structure only; cross-checks happen in ``CapabilitySet``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"not UTF-8 text: {exc}", file=str(path)) from None
    except OSError as exc:
        raise ManifestError(f"cannot read the file: {exc.strerror}", file=str(path)) from None
    manifest, positions = load_manifest_text(text, str(path), env=env)
    relative = _RELATIVE_SQLITE.match(manifest.url)
    if relative:
        database = (path.resolve().parent / relative.group(2)).resolve()
        manifest = manifest.model_copy(update={"url": f"{relative.group(1)}{database}{relative.group(3) or ''}"})
    manifest._path = path.resolve()
    return manifest, positions


def manifest_files(path: str | Path) -> list[Path]:
    """The manifest files at ``path``: the file itself, or every ``*.yaml``/``*.yml`` in the folder.

    Question sets (``eval.yaml``, ``*.eval.yaml``) and hidden folders (``.history``) are skipped.
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ManifestError("no such file or folder", file=str(path),
                            hint="point -m/--manifests at a manifest file or a folder of them")
    files = sorted(
        p for p in path.iterdir()
        if p.is_file() and p.suffix in (".yaml", ".yml") and not NON_MANIFEST_NAMES.match(p.name)
    )
    if not files:
        raise ManifestError("no manifest files (*.yaml) in this folder", file=str(path),
                            hint="write one per source; see README 'Writing manifests'")
    return files
