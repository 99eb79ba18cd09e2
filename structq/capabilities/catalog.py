"""A set of capability manifests: the map the planner reads and the sandbox enforces."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from structq.errors import ManifestError

from .hints import closest, listing
from .loader import Positions, load_manifest, manifest_files
from .model import Manifest
from .validate import example_problems, manifest_problems

__all__ = ["CapabilitySet", "manifest_fingerprint"]


class CapabilitySet:
    """Manifests by source name, checked together (unique names, examples that resolve)."""

    def __init__(self, manifests: list[Manifest], positions: list[Positions] | None = None) -> None:
        problems = self.problems(manifests, positions)
        if problems:
            raise problems[0]
        self._fill(manifests, positions)

    def _fill(self, manifests: list[Manifest], positions: list[Positions] | None) -> None:
        positions = positions or [Positions(str(m.path or m.source)) for m in manifests]
        self._sources: dict[str, Manifest] = {}
        #: Where each source's values stand in its file, for errors found later (``structq check``).
        self.positions: dict[str, Positions] = {}
        for manifest, pos in zip(manifests, positions):
            self._sources.setdefault(manifest.source, manifest)
            self.positions.setdefault(manifest.source, pos)

    @classmethod
    def unchecked(cls, manifests: list[Manifest], positions: list[Positions] | None = None) -> "CapabilitySet":
        """The set without its cross-checks (the first of a duplicated source wins): for
        ``structq check``, which reports the problems itself and checks what it can."""
        caps = cls.__new__(cls)
        caps._fill(manifests, positions)
        return caps

    @staticmethod
    def problems(manifests: list[Manifest], positions: list[Positions] | None = None, *,
                 unloaded: frozenset[str] = frozenset()) -> list[ManifestError]:
        """Every failure of the set's checks, in file order (empty when the set is valid).
        ``unloaded``: sources whose files did not load (already reported); steps on them are
        not checked, rather than reported as steps on unknown sources."""
        positions = positions or [Positions(str(m.path or m.source)) for m in manifests]
        found: list[ManifestError] = []
        sources: dict[str, Manifest] = {}
        for manifest, pos in zip(manifests, positions):
            if manifest.source in sources:
                first = sources[manifest.source].path or "another manifest"
                found.append(pos.error(("source",), f"duplicate source {manifest.source!r} (also declared in {first})",
                                       hint="source names are unique across the manifest folder"))
                continue
            found += manifest_problems(manifest, pos)
            sources[manifest.source] = manifest
        for manifest, pos in zip(manifests, positions):
            found += example_problems(manifest, pos, sources, unloaded=unloaded)
        return found

    @classmethod
    def from_path(cls, path: str | Path, *, env: Mapping[str, str] | None = None) -> "CapabilitySet":
        """Load a manifest file or every manifest in a folder (the garbage collector paused:
        the manifests live as long as the process; ``structq.collector``)."""
        from structq.collector import collector_paused

        with collector_paused():
            loaded = [load_manifest(p, env=env) for p in manifest_files(path)]
            return cls([m for m, _ in loaded], [p for _, p in loaded])

    # --- lookup -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Manifest]:
        return iter(self._sources.values())

    def __len__(self) -> int:
        return len(self._sources)

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    @property
    def names(self) -> list[str]:
        return list(self._sources)

    def get(self, name: str) -> Manifest | None:
        return self._sources.get(name)

    def __getitem__(self, name: str) -> Manifest:
        try:
            return self._sources[name]
        except KeyError:
            suggestion = closest(name, self._sources)
            hint = f"did you mean {suggestion!r}?" if suggestion else f"sources: {listing(self._sources, near=name)}"
            raise KeyError(f"unknown source {name!r} ({hint})") from None

    def examples(self) -> Iterator[tuple[Manifest, "object"]]:
        """Every verified example with the manifest that declares it."""
        for manifest in self:
            for example in manifest.examples:
                yield manifest, example

    # --- identity ---------------------------------------------------------------------

    def fingerprint(self) -> str:
        """A hash that changes whenever any manifest's content changes (caches key on it).

        Computed once: the manifests are frozen models and the set is never changed after
        loading, and at a thousand tables the hash costs a fifth of a second.
        """
        cached = getattr(self, "_fingerprint", None)
        if cached is not None:
            return cached
        digest = hashlib.sha256()
        for name in sorted(self._sources):
            digest.update(self.fingerprint_of(name).encode())
        self._fingerprint: str | None = digest.hexdigest()[:16]
        return self._fingerprint

    def fingerprint_of(self, source: str) -> str:
        """``manifest_fingerprint`` of the manifest of ``source``, computed once (the catalogue's
        fingerprint and the linking index's parts both key on it)."""
        known: dict[str, str] = self.__dict__.setdefault("_manifest_fingerprints", {})
        found = known.get(source)
        if found is None:
            found = known[source] = manifest_fingerprint(self._sources[source])
        return found

    def render(self) -> str:
        """The manifests as compact text for a planning prompt."""
        from .render import render_capabilities

        return render_capabilities(self)


def manifest_fingerprint(manifest: Manifest) -> str:
    """A hash of everything ``manifest`` says: a changed value, anywhere, is a new hash (the
    caches of a manifest's share of the linking index and of the catalogue key on it).

    pydantic's own JSON serialisation, four times faster than dumping to Python and then to
    JSON (10,000 tables: ~0.15 s against ~0.6 s); fields come in the model's order and mapping
    values in the manifest's, so the same file always hashes the same."""
    return hashlib.sha256(manifest.model_dump_json(by_alias=True).encode()).hexdigest()


def require_source(capabilities: CapabilitySet, name: str) -> Manifest:
    """The manifest for ``name`` or a ``ManifestError`` with did-you-mean."""
    try:
        return capabilities[name]
    except KeyError as exc:
        raise ManifestError(str(exc.args[0])) from None
