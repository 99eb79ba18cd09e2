"""What ``structq check`` finds: every problem in every manifest file, in one run.

Three layers, each reported in full: a file that does not load (YAML, shape, types), the
set's cross-checks (names, references, row filters, ``functions:``), and the sandbox run on
each verified example's steps, so an example that reads an unknown or denied column fails
``check`` rather than the first ``ask``. Problems are plain dicts: the ``--json`` document
holds them as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest, Positions
    from structq.errors import ManifestError

__all__ = ["collect", "manifest_problem", "location"]

#: A placeholder value for each row-filter variable and slot: the sandbox checks the query's
#: shape, and bound values never change what it accepts. A reference gets ``UNCHECKED`` (also
#: "0"), whose value an API sandbox does not validate: only the earlier step's rows give it.
_PLACEHOLDER = "0"


def manifest_problem(exc: "ManifestError", source: str | None = None) -> dict[str, Any]:
    return {"source": source, "file": exc.file, "line": exc.line, "column": exc.column, "kind": "manifest",
            "code": None, "message": exc.message, "hint": exc.hint, "text": str(exc)}


def collect(path: Path) -> tuple["CapabilitySet | None", list[dict[str, Any]]]:
    """The loaded set (None when it does not load) and every problem found."""
    from structq.capabilities import CapabilitySet
    from structq.capabilities.loader import load_manifest, manifest_files
    from structq.errors import ManifestError

    try:
        files = manifest_files(path)
    except ManifestError as exc:
        return None, [manifest_problem(exc)]
    loaded, problems, unloaded = [], [], set()
    for file in files:
        try:
            loaded.append(load_manifest(file))
        except ManifestError as exc:
            name = _declared_source(file)
            problems.append(manifest_problem(exc, name))
            unloaded.add(name)
    manifests, positions = [m for m, _ in loaded], [p for _, p in loaded]
    source_of = {p.file: m.source for m, p in loaded}
    problems += [manifest_problem(exc, source_of.get(exc.file))
                 for exc in CapabilitySet.problems(manifests, positions, unloaded=frozenset(unloaded))]
    caps = CapabilitySet.unchecked(manifests, positions)
    broken = {p["source"] for p in problems}
    for manifest in caps:
        if manifest.source not in broken:
            problems += _sandbox_problems(caps, manifest, caps.positions[manifest.source], broken)
    return (None if problems else caps), problems


def _declared_source(file: Path) -> str | None:
    """The ``source:`` a file that did not load declares, when it can be read off its text."""
    import re

    try:
        match = re.search(r"^source:\s*['\"]?([A-Za-z_]\w*)", file.read_text(encoding="utf-8"), re.MULTILINE)
    except (OSError, UnicodeDecodeError):
        return None
    return match.group(1) if match else None


def _sandbox_problems(caps: "CapabilitySet", manifest: "Manifest", pos: "Positions",
                      broken: set[str]) -> list[dict[str, Any]]:
    """Each verified example's steps through the sandbox, as ``ask`` will run them (up to a
    step on a source whose manifest has problems of its own: those are reported already)."""
    from structq.capabilities.references import LOCAL_DIALECT, find_references
    from structq.errors import PlanError, SandboxViolation
    from structq.safety.api_values import UNCHECKED
    from structq.sources import is_builtin, kind_of

    found = []
    for ei, example in enumerate(manifest.examples):
        for si, step in enumerate(example.steps):
            if is_builtin(step.source):
                continue  # reads earlier results, whose columns exist only when the plan runs
            if step.source in broken or step.source not in caps:
                break
            target = caps[step.source]
            dialect = target.query_dialect or LOCAL_DIALECT
            payloads = [p for p in (step.query, step.variables, step.params) if p is not None]
            params = {ref.text: [UNCHECKED] for p in payloads for ref in find_references(p, dialect)}
            try:
                kind_of(target).check_step(step, target, params=params, vars=_variables(target), max_rows=None,
                                           slots=_slot_values(example))
            except (SandboxViolation, PlanError) as exc:
                line, column = pos.of(("examples", ei, "steps", si, "query"))
                code = getattr(exc, "code", "plan_error")
                found.append({
                    "source": manifest.source, "file": pos.file, "line": line, "column": column, "kind": "sandbox",
                    "code": code, "message": f"verified example {example.question!r}, step {step.output_key!r}: "
                                             f"the sandbox refuses it: [{code}] {exc.message}",
                    "hint": exc.hint,
                })
                break  # later steps of the example depend on this one
    return found


def _variables(manifest: "Manifest") -> dict[str, Any]:
    names = {v for rf in manifest.policies.row_filters for v in rf.variables}
    return {name: _PLACEHOLDER for name in names}


def _slot_values(example: Any) -> dict[str, Any]:
    """A stand-in value for each parameter a slotted example's steps bind (a number for top N)."""
    from structq.capabilities.slots import slot_params

    return {param: 1 if slot.kind == "integer" else _PLACEHOLDER
            for name, slot in example.slots.items() for param in slot_params(name, slot)}


def location(problem: dict[str, Any]) -> str:
    parts = [str(problem["file"] or "<manifest>")]
    if problem["line"] is not None:
        parts.append(str(problem["line"]))
        if problem["column"] is not None:
            parts.append(str(problem["column"]))
    return ":".join(parts)
