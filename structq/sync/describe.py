"""``structq describe``: descriptions and synonyms for draft tables and columns, drafted by a model.

What the model is told, per batch of ``BATCH`` draft objects: the source's description, each
object's name and description, its members' names, types, keys and references, the names of
neighbouring objects (what it references and what references it), and — only with
``samples`` — up to ``SAMPLE_SIZE`` distinct values of each member that may be shown: never a
denied member's, never a row-filtered object's (its values would be every tenant's), never
values that look secret or personal (``sensitive.by_content``).

What is written: a ``description`` (and ``synonyms``) where there was none, on draft objects and
draft members only. Objects stay ``draft: true`` — a person still has to read them — and every
key a person wrote, and every comment, is kept (the edits are text splices, ``yamledit``).
The model is reached through a callable (``Ask``) so this module needs no model library: the
CLI passes one built from the configured chat model, tests a scripted one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.sources import kind_of
from structq.sources import objects as source_objects

from .samples import Target, samples
from .sensitive import by_content
from .yamledit import TextDocument, scalar

if TYPE_CHECKING:
    from structq.capabilities import Manifest

    from .dictionary import Dictionary

__all__ = ["Ask", "Described", "describe_manifest", "import_descriptions", "language_names", "prompts", "BATCH", "SAMPLE_SIZE"]

#: Draft objects per model call: keeps each request small.
BATCH = 5
#: Distinct sample values per member, with ``samples``.
SAMPLE_SIZE = 5

#: The model: a prompt in, the parsed JSON object of its reply out.
Ask = Callable[[str], Any]

PROMPT = """\
You document a {kind} data source so that people can ask questions about it in {asked}.
Write, in {lang}, a short description (one sentence, what a row/document is or what the value
means, units and codes included when evident) and {synonyms} people might use, for each
object and member listed below. Use only what the names, types, keys, neighbours{samples_note}
show; when unsure, say less. Reply with one JSON object only:
{{"objects": {{"<object>": {{"description": "…", "synonyms": ["…"],
  "members": {{"<member>": {{"description": "…", "synonyms": ["…"]}}}}}}}}}}

Source {source}{source_description}
{objects}
"""


@dataclass
class Described:
    """The outcome for one manifest: its new text, and which descriptions were added."""

    path: Path
    before: str
    after: str
    added: list[str] = field(default_factory=list)
    calls: int = 0
    notes: list[str] = field(default_factory=list)

    def unified_diff(self) -> str:
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            fromfile=f"{self.path} (current)", tofile=f"{self.path} (described)"))


#: ``--languages`` codes and the names the prompt uses.
LANGUAGES = {"zh": "Chinese", "en": "English", "de": "German", "fr": "French", "es": "Spanish", "ja": "Japanese",
             "ko": "Korean", "pt": "Portuguese", "it": "Italian", "ru": "Russian"}


def language_names(codes: str) -> list[str]:
    """``"zh,en"`` → ``["Chinese", "English"]`` (an unknown code is used as written)."""
    return [LANGUAGES.get(c.strip().lower(), c.strip()) for c in codes.split(",") if c.strip()]


def _language(manifest: "Manifest") -> str:
    """The manifest's language: Chinese when its written text is, else English."""
    objects = source_objects(manifest)
    texts = [manifest.description, *(o.description for o in objects)]
    return "Chinese" if any("\u4e00" <= ch <= "\u9fff" for t in texts for ch in t) else "English"


def _neighbours(manifest: "Manifest", name: str) -> list[str]:
    """The tables ``name`` references or is referenced by (none where members carry no keys)."""
    out = set()
    for table in manifest.tables:
        for column in table.columns:
            target = (column.references or ".").split(".", 1)[0]
            if table.name == name and target:
                out.add(target)
            elif target.lower() == name.lower():
                out.add(table.name)
    return sorted(out)


def _needs(manifest: "Manifest", obj: Any) -> bool:
    return (obj.draft and not obj.description) or any(m.draft and not m.description for m in obj.flat_members().values())


def _shown_samples(manifest: "Manifest", objects: Sequence[Any], notes: list[str]) -> dict[Target, list[str]]:
    """Up to ``SAMPLE_SIZE`` values per member that may be shown (see the module docstring)."""
    targets: list[Target] = []
    for obj in objects:
        if manifest.row_filters_for(obj.name):
            continue
        for name, member in obj.flat_members().items():
            if not member.denied and member.type not in ("object", "nested", "binary", "json"):
                targets.append((obj.name, *name.split(".")))
    found = samples(manifest, targets, SAMPLE_SIZE, notes)
    return {path: [str(v)[:60] for v in values] for path, values in found.items()
            if values and by_content(values) is None}


def _object_text(manifest: "Manifest", obj: Any, shown: dict[Target, list[str]]) -> str:
    lines = [f"{obj.word} {obj.name}"
             + (f" — {obj.description}" if obj.description else "")
             + (f" (neighbours: {', '.join(n)})" if (n := _neighbours(manifest, obj.name)) else "")]
    for name, member in obj.flat_members().items():
        if member.denied:
            continue  # the model never learns a denied member exists
        facts = [member.type]
        if getattr(member, "primary_key", False):
            facts.append("primary key")
        if getattr(member, "references", None):
            facts.append(f"references {member.references}")
        text = f"  {name} ({', '.join(facts)})" + (f" — {member.description}" if member.description else "")
        if values := shown.get((obj.name, *name.split("."))):
            text += f" e.g. {', '.join(values)}"
        lines.append(text)
    return "\n".join(lines)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class _Writer:
    """Adds description/synonyms keys where they are missing, and only on drafts."""

    def __init__(self, manifest: "Manifest", text: str, file: str, max_synonyms: int = 3) -> None:
        self.manifest = manifest
        self.max_synonyms = max_synonyms
        self.doc = TextDocument(text, file)
        self.objects_key, self.members_key = manifest.object_type.plural, manifest.object_type.member_plural
        self.added: list[str] = []

    def _fill(self, node: Any, proposal: Any, label: str) -> None:
        if not isinstance(proposal, dict) or node.get("draft") is not True or node.get("access") in ("deny", "restricted"):
            return
        pairs = []
        description = proposal.get("description")
        if isinstance(description, str) and description.strip() and not node.get("description") \
                and "description" not in node:
            pairs.append(("description", scalar(description.strip())))
            self.added.append(label)
        synonyms = list(dict.fromkeys(s.strip() for s in proposal.get("synonyms") or []
                                      if isinstance(s, str) and s.strip()))[: self.max_synonyms]
        if synonyms and "synonyms" not in node:
            pairs.append(("synonyms", "[" + ", ".join(scalar(s) for s in synonyms) + "]"))
        self.doc.add_keys(node, pairs, after="name")

    def apply(self, reply: Any) -> None:
        objects = (reply or {}).get("objects") if isinstance(reply, dict) else None
        if not isinstance(objects, dict):
            return
        by_name = {str(o.get("name", "")).lower(): o for o in self.doc.root.get(self.objects_key) or []}
        for name, proposal in objects.items():
            node = by_name.get(str(name).lower())
            if node is None or not isinstance(proposal, dict):
                continue
            self._fill(node, proposal, str(name))
            members = proposal.get("members")
            for member_name, member_proposal in (members.items() if isinstance(members, dict) else ()):
                member = self._member(node, str(member_name).split("."))
                if member is not None:
                    self._fill(member, member_proposal, f"{name}.{member_name}")

    def _member(self, node: Any, parts: list[str]) -> Any:
        for part in parts:
            found = next((m for m in node.get(self.members_key) or [] if str(m.get("name", "")).lower() == part.lower()),
                         None)
            if found is None:
                return None
            node = found
        return node


def prompts(manifest: "Manifest", *, with_samples: bool = False, lang: str | None = None, batch: int = BATCH,
            notes: list[str] | None = None, languages: Sequence[str] = ()) -> Iterator[str]:
    """The prompt of each batch of ``manifest``'s undescribed drafts: what the model is sent.

    Reads sample values (``with_samples``) but calls no model, so ``structq describe --dry-run``
    can show it before any model is configured; ``notes`` collects what sampling skipped.
    ``languages`` (``--languages zh,en``): descriptions in the first, synonyms in each — so a
    question in any of them shares words with the names (schema linking is lexical), after one
    batch of calls per catalogue instead of a routing call per question."""
    objects = [o for o in source_objects(manifest) if _needs(manifest, o)]
    written_in = languages[0] if languages else lang or _language(manifest)
    synonyms = (f"up to 2 synonyms in each of {', '.join(languages)}" if len(languages) > 1
                else "up to 3 synonyms")
    for group in _batches(objects, batch):
        shown = _shown_samples(manifest, group, notes if notes is not None else []) if with_samples else {}
        yield PROMPT.format(
            kind=kind_of(manifest).name, lang=written_in, asked=" or ".join(languages) or written_in,
            synonyms=synonyms,
            samples_note=" and sample values" if with_samples else "", source=manifest.source,
            source_description=f": {manifest.description}" if manifest.description else "",
            objects="\n".join(_object_text(manifest, o, shown) for o in group))


def describe_manifest(path: Path, manifest: "Manifest", ask: Ask, *, with_samples: bool = False,
                      lang: str | None = None, batch: int = BATCH, languages: Sequence[str] = ()) -> Described:
    """Ask for descriptions of ``manifest``'s drafts, batch by batch; returns the new text (writes nothing)."""
    text = path.read_text(encoding="utf-8")
    outcome = Described(path, text, text)
    writer: _Writer | None = None  # parsed only when there is something to describe
    for prompt in prompts(manifest, with_samples=with_samples, lang=lang, batch=batch, notes=outcome.notes,
                          languages=languages):
        writer = writer or _Writer(manifest, text, str(path), max_synonyms=3 * max(1, len(languages)))
        writer.apply(ask(prompt))
        outcome.calls += 1
    if writer is not None:
        outcome.after = writer.doc.result()
        outcome.added = writer.added
    return outcome


def import_descriptions(path: Path, manifest: "Manifest", dictionary: "Dictionary") -> Described:
    """Write what ``dictionary`` (``sync.dictionary``: dbt, CSV/JSON) says about ``manifest``'s
    drafts, as a describing model's reply would be written, with one comment naming the origin."""
    text = path.read_text(encoding="utf-8")
    writer = _Writer(manifest, text, str(path), max_synonyms=6)
    writer.apply(dictionary.as_reply())
    outcome = Described(path, text, writer.doc.result(), writer.added)
    if outcome.added:
        outcome.after = f"# descriptions imported from {dictionary.origin}: draft, review them\n" + outcome.after
    return outcome
