"""Which columns and fields hold secrets or personal data: by their name, and by sampled content.

``structq init`` and ``structq sync`` write such members ``access: deny`` (with a comment
saying why), so a manifest drafted from a live database is safe before anybody has read it: the
planner never learns that a denied column exists, and the sandbox refuses any query naming it.
A person who decides a column is harmless flips it to ``allow``.

Two independent signals, either is enough:

* the **name**, split into words (``passwordHash`` → ``password hash``, ``id_card`` →
  ``id card``), matched against word rules (``password``, ``api key``, ``phone``…) and
  against CJK substrings (``身份证``, ``手机``…) that have no word boundaries;
* the **content**: a sample of stored values, most of which look like a password hash
  (bcrypt, argon2, crypt), a hex digest, an email, a phone number, an 18-character ID number,
  an IP address or a payment card number (Luhn-checked). Key columns are exempt from the UUID
  and hex-digest rules: a UUID primary key is an identifier, not a secret.

The sampled values are only classified here; they are never written anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Verdict", "by_name", "by_content", "classify"]


@dataclass(frozen=True)
class Verdict:
    """Why a member is denied: ``kind`` is ``secret`` or ``personal``; ``reason`` is for people."""

    kind: str
    reason: str


# --- names ---------------------------------------------------------------------------------------

#: (kind, what it is, word sequences any of which in the name marks it). Words are lower case.
_WORD_RULES: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    ("secret", "a password or its hash", (("password",), ("passwd",), ("pwd",), ("passcode",), ("pass", "hash"),
                                          ("hash",), ("hashed",), ("salt",), ("pin", "code"))),
    ("secret", "a token or key", (("token",), ("secret",), ("api", "key"), ("apikey",), ("private", "key"),
                                  ("access", "key"), ("secret", "key"), ("auth", "key"), ("credential",),
                                  ("credentials",), ("otp",), ("session", "key"), ("signing", "key"))),
    ("personal", "an identity document number", (("id", "card"), ("idcard",), ("ssn",), ("passport",),
                                                 ("national", "id"), ("tax", "id"), ("social", "security"),
                                                 ("id", "number"), ("driver", "license"), ("licence", "number"),
                                                 ("license", "number"))),
    ("personal", "pay", (("salary",), ("salaries",), ("wage",), ("wages",), ("payroll",), ("compensation",))),
    ("personal", "a phone number", (("phone",), ("telephone",), ("mobile",), ("cellphone",), ("tel",), ("fax",),
                                    ("phonenumber",))),
    ("personal", "an email address", (("email",), ("e", "mail"), ("mail", "address"), ("emailaddress",))),
    ("personal", "an IP address", (("ip",), ("ip", "address"), ("ipaddress",), ("ipv4",), ("ipv6",))),
    ("personal", "a postal address", (("address",), ("street",), ("addr",), ("postcode",), ("zipcode",),
                                      ("zip", "code"), ("postal", "code"))),
    ("personal", "a bank or card number", (("iban",), ("bank", "account"), ("account", "number"),
                                           ("account", "no"), ("acct", "no"), ("card", "number"), ("card", "no"),
                                           ("card", "num"), ("cardnumber",), ("credit", "card"), ("cvv",), ("cvc",),
                                           ("routing", "number"), ("swift",), ("bic",))),
    ("personal", "a date of birth", (("birth", "date"), ("date", "of", "birth"), ("birthday",), ("dob",),
                                     ("birthdate",))),
)

#: Substrings of names in scripts without word boundaries.
_CJK_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("secret", "a password or its hash", ("密码", "口令", "密钥", "令牌")),
    ("personal", "an identity document number", ("身份证", "证件号", "护照")),
    ("personal", "pay", ("薪", "工资")),
    ("personal", "a phone number", ("手机", "电话", "联系方式")),
    ("personal", "an email address", ("邮箱", "电子邮件")),
    ("personal", "a postal address", ("住址", "地址")),
    ("personal", "a bank or card number", ("银行卡", "卡号", "银行账号", "账号")),
    ("personal", "a date of birth", ("出生日期", "生日")),
)

#: Distinctive words also found inside longer ones, for names stored without separators or case
#: (PostgreSQL folds ``sbCustEmail`` to ``sbcustemail``). Only words that are not part of
#: common harmless words (``ssn`` is inside ``businessname``, so it is not here).
_INNER_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("secret", "a password or its hash", ("password", "passwd")),
    ("secret", "a token or key", ("apikey", "secret", "privatekey", "accesstoken")),
    ("personal", "pay", ("salary",)),
    ("personal", "a phone number", ("phone",)),
    ("personal", "an email address", ("email",)),
    ("personal", "a postal address", ("address", "postalcode", "zipcode", "postcode")),
    ("personal", "a bank or card number", ("creditcard", "cardnumber", "accountnumber")),
    ("personal", "a date of birth", ("birthdate", "birthday", "dateofbirth")),
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def words(name: str) -> tuple[str, ...]:
    """``passwordHash`` → ``('password', 'hash')``; ``ID_Card2`` → ``('id', 'card', '2')``."""
    return tuple(w.lower() for w in _SPLIT.split(_CAMEL.sub("_", name)) if w)


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def by_name(name: str) -> Verdict | None:
    """The verdict a member's name alone gives (the last segment of a dotted field path)."""
    tail = name.rsplit(".", 1)[-1]
    found = words(tail)
    for kind, what, rules in _WORD_RULES:
        for rule in rules:
            if _contains(found, rule):
                return Verdict(kind, f"the name {tail!r} says it holds {what}")
    joined = "".join(found)
    for kind, what, parts in (*_INNER_RULES, *_CJK_RULES):
        for part in parts:
            if part in tail or part in joined:
                return Verdict(kind, f"the name {tail!r} says it holds {what}")
    return None


# --- content -------------------------------------------------------------------------------------


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    return digits.isdigit() and 13 <= len(digits) <= 19 and _luhn(digits) and len(set(digits)) > 2


def _ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


_PHONE = re.compile(r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]?\d{3,5}"
                    r"(?:\s*(?:x|ext\.?)\s*\d{1,5})?|\+\d{8,15}|1[3-9]\d{9}")

#: (kind, what it looks like, test, whether a key column is exempt).
_CONTENT_RULES: tuple[tuple[str, str, re.Pattern[str] | object, bool], ...] = (
    ("secret", "password hashes", re.compile(r"\$(?:2[abxy]?|argon2(?:id|i|d)|[156]|pbkdf2[\w-]*|scrypt)\$\S{8,}"), False),
    ("secret", "hex digests (hashes or keys)", re.compile(r"(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{56}|"
                                                          r"[0-9a-fA-F]{64}|[0-9a-fA-F]{96}|[0-9a-fA-F]{128})"), True),
    ("secret", "API keys or tokens", re.compile(r"(?:sk|pk|rk|api|key|tok|ghp|xox[abp])[_-][A-Za-z0-9_-]{12,}|"
                                                r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"), False),
    ("secret", "UUID-shaped keys", re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), True),
    ("personal", "email addresses", re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}"), False),
    ("personal", "18-character ID numbers", re.compile(r"[1-9]\d{5}(?:19|20)\d{2}(?:0[1-9]|1[0-2])\d{2}\d{3}[\dXx]"), False),
    ("personal", "IP addresses", _ip, False),
    ("personal", "payment card numbers", _card, False),
    ("personal", "phone numbers", _PHONE, False),
)

#: Share of the sampled values that must match a content rule.
CONTENT_SHARE = 0.6


def _matches(test: object, text: str) -> bool:
    if isinstance(test, re.Pattern):
        return test.fullmatch(text) is not None
    return bool(test(text))  # type: ignore[operator]


def by_content(samples: Iterable[object], *, key: bool = False) -> Verdict | None:
    """The verdict a sample of stored values gives: most of them look like one kind of secret."""
    texts = [str(s).strip() for s in samples if isinstance(s, (str, int)) and not isinstance(s, bool)]
    texts = [t for t in texts if t]
    if not texts:
        return None
    for kind, what, test, key_exempt in _CONTENT_RULES:
        if key and key_exempt:
            continue
        hits = sum(1 for t in texts if _matches(test, t))
        if hits and hits >= CONTENT_SHARE * len(texts):
            return Verdict(kind, f"its values look like {what}")
    return None


def classify(name: str, samples: Sequence[object] = (), *, key: bool = False) -> Verdict | None:
    """Name first (it needs no data), then content."""
    return by_name(name) or by_content(samples, key=key)
