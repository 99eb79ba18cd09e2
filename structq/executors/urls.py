"""Connection URLs in messages: every executor shows a source's URL without its password."""

from __future__ import annotations

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs; never raises.

    Everything between the user name's colon and the last ``@`` is hidden: that is what
    SQLAlchemy and the search clients read as the password, which may itself hold ``/``, ``?``,
    ``#`` or ``@`` (``urlsplit`` would misread such a URL and show part of it), and no port or
    host is parsed, so a malformed one cannot make the message itself fail. A URL whose
    scheme was forgotten or misspelt (``user:pw@host/db``, ``postgresql//user:pw@…``) is
    redacted too. At worst a password-less URL with an ``@`` in its path loses a little more
    than its password.
    """
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", url
    userinfo, at, tail = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not at or not colon or (sep and any(c in user for c in "/?#")):  # a path, not a user
        return url
    return f"{head}{sep}{user}:***@{tail}"
