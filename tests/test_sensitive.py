"""What counts as secret or personal, by name and by sampled content (``structq.sync.sensitive``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from structq.sync.sensitive import by_content, by_name, words


@pytest.mark.parametrize(("name", "kind"), [
    ("password_hash", "secret"), ("passwordHash", "secret"), ("PWD", "secret"), ("salt", "secret"),
    ("api_key", "secret"), ("apiKey", "secret"), ("access_token", "secret"), ("client_secret", "secret"),
    ("private_key", "secret"), ("user_passwd", "secret"),
    ("id_card", "personal"), ("IdCardNo", "personal"), ("ssn", "personal"), ("passport_no", "personal"),
    ("monthly_salary", "personal"), ("phone_number", "personal"), ("mobile", "personal"),
    ("contact_email", "personal"), ("e_mail", "personal"), ("address_billing", "personal"),
    ("postal_code", "personal"), ("iban", "personal"), ("card_number", "personal"),
    ("credit_card", "personal"), ("ip_address", "personal"), ("date_of_birth", "personal"),
    ("sbcustemail", "personal"), ("sbcustphone", "personal"), ("sbcustpostalcode", "personal"), ("contact.email", "personal"),
    ("身份证号", "personal"), ("月薪", "personal"), ("手机号码", "personal"), ("家庭住址", "personal"),
    ("登录密码", "secret"),
])
def test_names_that_mark_secrets_or_personal_data(name: str, kind: str) -> None:
    verdict = by_name(name)
    assert verdict is not None and verdict.kind == kind, name


@pytest.mark.parametrize("name", [
    "status", "business_name", "hotel", "zip_count", "title", "description", "created_at", "amount",
    "card_type", "bank_name", "tip", "shipping_method", "ipo_date", "classname", "department", "部门", "姓名",
])
def test_harmless_names(name: str) -> None:
    assert by_name(name) is None, by_name(name)


def test_words_split_case_and_separators() -> None:
    assert words("passwordHash") == ("password", "hash")
    assert words("ID_Card2") == ("id", "card", "2")
    assert words("HTTPServerIP") == ("http", "server", "ip")


@pytest.mark.parametrize(("values", "what"), [
    (["$2b$12$" + "x" * 53, "$2y$10$" + "y" * 53], "password hashes"),
    (["$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$abc"], "password hashes"),
    (["5f4dcc3b5aa765d61d8327deb882cf99", "e99a18c428cb38d5f260853678922e03"], "hex digests"),
    (["sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_51Habcdefghijklmnop"], "API keys"),
    (["9f1c2a4e-8b3d-4c5e-9a7b-1d2e3f4a5b6c", "0b6e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"], "UUID"),
    (["ann@example.com", "bo@example.org"], "email"),
    (["+1 415 555 0100", "(212) 555-0199", "13812345678"], "phone"),
    (["11010519491231002X", "440524198001010014"], "ID numbers"),
    (["192.168.0.1", "10.0.0.254", "2001:db8::1"], "IP"),
    (["4012 8888 8888 1881", "5500005555555559"], "card"),
])
def test_content_that_marks_secrets_or_personal_data(values: list[str], what: str) -> None:
    verdict = by_content(values)
    assert verdict is not None and what in verdict.reason, (values, verdict)


@pytest.mark.parametrize("values", [
    ["active", "inactive"], ["2024-01-01", "2023-12-31"], ["12:30:00", "08:15:00"], ["1.5", "22.75"],
    ["Berlin", "Shanghai"], [1, 2, 3, 400], ["A", "B", "C"], ["Checkout.com", "PayPal"], [],
])
def test_content_that_is_not(values: list[object]) -> None:
    assert by_content(values) is None


def test_uuid_and_digest_keys_are_identifiers_not_secrets() -> None:
    uuids = ["9f1c2a4e-8b3d-4c5e-9a7b-1d2e3f4a5b6c", "0b6e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"]
    assert by_content(uuids, key=True) is None and by_content(uuids) is not None


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=30))
def test_small_counts_and_amounts_are_never_personal(values: list[int]) -> None:
    assert by_content(values) is None


@given(st.lists(st.dates().map(lambda d: d.isoformat()), min_size=1, max_size=30))
def test_iso_dates_are_never_personal(values: list[str]) -> None:
    assert by_content(values) is None
