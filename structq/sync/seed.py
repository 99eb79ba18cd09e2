"""The head of every manifest ``structq init`` drafts: what the file says about itself and the
variable its URL is read from.

Databases and clusters (``init.py``) and APIs (``api_init.py``) start their files the same way,
so the head is written once, here, below both.
"""

from __future__ import annotations

__all__ = ["HEADER", "seed_head", "url_variable"]

HEADER = """\
# Drafted by `structq init` from the live source. Everything is `draft: true` until a person
# describes it; `access: deny` marks what looked secret, `access: restricted` what looked personal
# (the planner is told it exists, never its values); flip it to allow if not.
"""


def url_variable(source: str) -> str:
    """``hr`` → ``HR_URL``: the environment variable the manifest's URL is read from."""
    return f"{source.upper()}_URL"


def seed_head(source: str, kind: str, variable: str) -> list[str]:
    """The first lines of a drafted manifest: the header, its source, kind and URL variable."""
    return [HEADER.rstrip("\n"), f"source: {source}", f"kind: {kind}", f"url: ${{{variable}}}"]
