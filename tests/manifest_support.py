"""The test manifests kept as YAML files (``fixtures/manifests/*.yaml``), the way users write
them, with ``{{name}}`` slots for what a test only knows at run time (a server's URL, a
dialect, an index name).

One file per manifest rather than a string per test module: a manifest is data, several
modules read the same one, and YAML in a file needs no brace escaping.
"""

from __future__ import annotations

import re
from pathlib import Path

MANIFESTS = Path(__file__).resolve().parent / "fixtures" / "manifests"

_SLOT = re.compile(r"\{\{(\w+)\}\}")


def manifest_text(name: str, **values: object) -> str:
    """``fixtures/manifests/<name>.yaml`` with every ``{{slot}}`` filled from ``values``.

    A slot without a value, or a value without a slot, is an error: a test that names the
    wrong manifest or forgets a URL fails here, not in a confusing manifest error later.
    """
    text = (MANIFESTS / f"{name}.yaml").read_text(encoding="utf-8")
    slots = set(_SLOT.findall(text))
    if slots != set(values):
        raise KeyError(f"manifest {name!r} has the slots {sorted(slots)}, was given {sorted(values)}")
    return _SLOT.sub(lambda match: str(values[match.group(1)]), text)
