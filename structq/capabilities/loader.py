"""Load capability manifests from YAML, keeping every value's line and column.

Why not ``yaml.safe_load``: an error in a manifest must point at the file, line and column
and suggest the closest valid key. So the YAML is composed into nodes (``yamlnodes``), turned
into plain data, validated by the pydantic model, and any validation error is mapped back to
the file through the positions of the nodes.

Positions are only needed when something is wrong, so loading builds the data alone and the
positions are recorded from the text the first time an error asks for one
(``_DeferredPositions``): the same line, column and suggestion as recording them up front, at
a fifth of the cost. The data of a large unchanged text comes from ``manifest_cache``; a
load reads each text once (one compose, or none on a cache hit).

Where the first (composed) load of a 1,000-table manifest goes, on a quiet core (process
time, ``bench/manifests.py`` for the wall figures): composing ~0.14 s (libyaml's parser and
PyYAML's node objects; ``yamlnodes``), building the data ~0.02 s, validating its 22k models
in one ``Manifest.model_validate`` ~0.035 s (all inside pydantic-core: the only Python
validators are ``tables:``'s, once, and ``values:``'s, where a column has one), the
cross-checks ~0.01 s. Validation is never skipped (``model_construct``): it is what turns a
typo into an error instead of a silently dropped policy.
"""

from __future__ import annotations

import os
import re
import types
import typing
from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from structq.collector import collector_paused
from structq.errors import ManifestError

from . import manifest_cache, yamlnodes
from .forms import type_error_message
from .hints import closest
from .model import Manifest
from .yamlnodes import Positions

__all__ = ["load_manifest", "load_manifest_text", "manifest_files", "Positions", "default_environ", "read_yaml"]

Path_ = tuple[str | int, ...]

#: Files in a manifest folder that are not manifests (question sets for ``structq eval``).
NON_MANIFEST_NAMES = re.compile(r"^(eval|.*\.eval)\.ya?ml$")

#: A SQLite URL with a relative path: it resolves against the manifest's folder, like ``documents``.
_RELATIVE_SQLITE = re.compile(r"^(sqlite(?:\+\w+)?:///)(?!/|file:|:memory:)([^?]+)(\?.*)?$")


class _Defaults(Mapping[str, str]):
    """Variables that have a default even when the environment does not set them, each worked
    out when a manifest names it: the demo folder's asks platformdirs where the user's data
    lives, which a manifest without ``${STRUCTQ_DEMO_DIR}`` never needs."""

    def __getitem__(self, name: str) -> str:
        if name != "STRUCTQ_DEMO_DIR":
            raise KeyError(name)
        from structq.config import default_demo_dir

        return str(default_demo_dir())

    def __contains__(self, name: object) -> bool:  # without working the value out
        return name == "STRUCTQ_DEMO_DIR"

    def __iter__(self) -> Iterator[str]:
        return iter(("STRUCTQ_DEMO_DIR",))

    def __len__(self) -> int:
        return 1


def default_environ() -> Mapping[str, str]:
    """Variables that have a default even when the environment does not set them."""
    return _Defaults()


def _parse_yaml(text: str, file: str, env: Mapping[str, str]) -> tuple[Any, Positions]:
    """Data and positions both, composed once (small texts: plan files)."""
    node = yamlnodes.compose(text, file)
    data, expansions = yamlnodes.build(node, file, env)
    positions = yamlnodes.record_positions(node, Positions(file))
    yamlnodes.expand(data, expansions, env, positions)
    return data, positions


def read_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """YAML text as plain data with each value's position (no ``${VAR}`` expansion); a syntax
    error is a ``ManifestError`` at ``file:line:column``. Plan files use it too."""
    return _parse_yaml(text, file, {})


class _DeferredPositions(Positions):
    """The positions of a text whose data was built without them: recorded from the text
    (composed again, once) the first time an error asks for one."""

    def __init__(self, file: str, text: str) -> None:  # no super().__init__: values/keys wait
        self.file = file
        self._text = text

    def __getattr__(self, name: str) -> Any:
        if name not in ("values", "keys"):
            raise AttributeError(name)
        with collector_paused():
            recorded = yamlnodes.record_positions(yamlnodes.compose(self._text, self.file), Positions(self.file))
        self.values, self.keys = recorded.values, recorded.keys
        return getattr(self, name)


def _read(text: str, file: str, env: Mapping[str, str]) -> tuple[Any, Positions]:
    """The data of a manifest's text, read once (composed, or kept from an earlier command),
    ``${VAR}`` expanded; its positions deferred until an error needs one."""
    positions = _DeferredPositions(file, text)
    kept = manifest_cache.get(text)
    if kept is None:
        data, expansions = yamlnodes.build(yamlnodes.compose(text, file), file, env)
        manifest_cache.put(text, data, expansions)
    else:
        data, expansions = kept
    yamlnodes.expand(data, expansions, env, positions)
    return data, positions


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


def load_manifest_text(text: str, file: str = "<manifest>", *, env: Mapping[str, str] | None = None) -> tuple[Manifest, Positions]:
    """Validate one manifest's YAML text. Raises ``ManifestError`` pointing into ``file``."""
    with collector_paused():
        return _load_manifest_text(text, file, env)


def _load_manifest_text(text: str, file: str, env: Mapping[str, str] | None) -> tuple[Manifest, Positions]:
    environ = ChainMap(os.environ if env is None else env, default_environ())
    data, positions = _read(text, file, environ)
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
                            hint="write one per source; see docs/manifests.md")
    return files
