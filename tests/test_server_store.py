"""The shared store of ``structq serve`` on a real SQLite file and a real PostgreSQL: plans and
conversations survive the store object (another worker opens its own), writes are upserts and
appends that concurrent workers cannot break (no lost turn, no request spent twice), and a bad
URL is one clear error."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from structq.agent.conversation import Turn
from structq.agent.plan import Plan
from structq.errors import ConfigError
from structq.server.store import Store, StorePlanCache, resolve_store_url

_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'store.db'}"
    server = request.getfixturevalue("pg_server")
    url = server.create_database(f"store_{next(_databases)}_{tmp_path.name[-8:].lower().replace('-', '_')}")
    return url.replace("postgresql+psycopg://", "postgresql://", 1)  # a plain URL, as a user writes it


@pytest.fixture
def stores(store_url: str) -> Iterator[tuple[Store, Store]]:
    """Two store objects on one database, as two workers hold them."""
    first, second = Store(store_url), Store(store_url)
    yield first, second
    first.close()
    second.close()


def _plan(query: str) -> Plan:
    return Plan.parse({"steps": [{"output_key": "o", "source": "shop", "query": query}]})


def test_a_plan_cached_by_one_worker_is_read_by_another(stores) -> None:
    first, second = (StorePlanCache(s) for s in stores)
    first.put("k1", "每个月的订单金额？", _plan("SELECT 1"))
    assert second.get("k1") == _plan("SELECT 1") and second.get("missing") is None
    second.put("k1", "每个月的订单金额？", _plan("SELECT 2"))  # the same key again replaces it
    assert first.get("k1") == _plan("SELECT 2") and len(first) == 1
    assert second.clear() == 1 and len(first) == 0


def test_a_conversation_saved_by_one_worker_continues_on_another(stores) -> None:
    first, second = stores
    turn = Turn("张三在哪个部门？", {"steps": [{"output_key": "d", "query": "SELECT 1"}]}, "  answer: 研发部")
    assert first.append_turn("c1", "owner-a", turn)
    assert second.load_conversation("c1") == ("owner-a", [{"question": "张三在哪个部门？", "plan": turn.plan,
                                                          "summary": "  answer: 研发部"}])
    assert second.append_turn("c1", "owner-a", Turn("那他上个月的项目呢？", {}, ""))
    assert [t["question"] for t in first.load_conversation("c1")[1]] == ["张三在哪个部门？", "那他上个月的项目呢？"]
    assert first.load_conversation("unknown") is None


def test_another_owner_cannot_append_to_a_conversation(stores) -> None:
    first, second = stores
    assert first.append_turn("c2", "owner-a", Turn("q1", {}, ""))
    assert not second.append_turn("c2", "owner-b", Turn("stolen", {}, ""))
    assert first.load_conversation("c2") == ("owner-a", [{"question": "q1", "plan": {}, "summary": ""}])


def test_turns_appended_at_once_by_many_workers_are_all_kept_in_one_order(stores) -> None:
    """Follow-ups answered at the same time: each append lands (no read-modify-write)."""
    first, second = stores
    first.append_turn("c3", "o", Turn("start", {}, ""))

    def follow_up(n: int) -> bool:
        return (first if n % 2 else second).append_turn("c3", "o", Turn(f"f{n}", {}, ""))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(follow_up, range(24)))
    questions = [t["question"] for t in second.load_conversation("c3")[1]]
    assert questions[0] == "start" and sorted(questions[1:]) == sorted(f"f{n}" for n in range(24))
    assert questions == [t["question"] for t in first.load_conversation("c3")[1]]  # one order, seen by all


def test_concurrent_writers_of_one_key_leave_one_whole_entry(stores) -> None:
    first, second = stores

    def write(n: int) -> None:
        (first if n % 2 else second).put_plan("same", f"q{n}", _plan(f"SELECT {n}").to_dict())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(40)))
    assert first.count_plans() == 1
    assert Plan.parse(second.get_plan("same")).steps[0].query.startswith("SELECT ")


@pytest.mark.parametrize("url,says", [
    ("not a url", "is not a database URL"),
    ("mysql://u@127.0.0.1/db", "a store is SQLite or PostgreSQL"),
    ("postgresql://nobody@127.0.0.1:1/none", "cannot use the store"),
])
def test_an_unusable_store_is_one_clear_error(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as raised:
        Store(url)
    assert raised.value.hint


def test_the_environment_names_the_store_before_the_config_file(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STRUCTQ_STORE_URL", raising=False)
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path))
    assert resolve_store_url(None) == f"sqlite:///{tmp_path / 'plans.sqlite'}"
    assert resolve_store_url("postgresql://h/db") == "postgresql://h/db"
    monkeypatch.setenv("STRUCTQ_STORE_URL", "sqlite:///elsewhere.db")
    assert resolve_store_url("postgresql://h/db") == "sqlite:///elsewhere.db"


def test_server_yaml_names_the_store() -> None:
    from structq.server.config import ServerConfig

    data = {"tokens": [{"sha256": "0" * 64, "user": "ann"}], "store": "postgresql://structq@db/structq"}
    assert ServerConfig.from_data(data).store == "postgresql://structq@db/structq"
    assert ServerConfig.from_data({"tokens": data["tokens"]}).store is None


def test_the_default_store_shares_the_cli_plan_cache_file(tmp_path: Path) -> None:
    from structq.agent.cache import PlanCache

    PlanCache(tmp_path / "plans.sqlite").put("k", "q", _plan("SELECT 7"))
    store = Store(f"sqlite:///{tmp_path / 'plans.sqlite'}")
    try:
        assert StorePlanCache(store).get("k") == _plan("SELECT 7")
        store.append_turn("c", "o", Turn("q", {}, ""))
        assert len(PlanCache(tmp_path / "plans.sqlite")) == 1
    finally:
        store.close()


def test_conversations_nobody_continued_are_pruned(stores) -> None:
    first, second = stores
    first.append_turn("old", "o", Turn("q", {}, ""))
    first.append_turn("new", "o", Turn("q", {}, ""))
    with first.database.begin() as connection:  # as if "old" was last continued 31 days ago
        connection.execute(first.conversations.update().where(first.conversations.c.id == "old")
                           .values(updated=first.conversations.c.updated - 31 * 24 * 3600))
    assert second.prune_conversations() == 1
    assert first.load_conversation("old") is None and first.load_conversation("new") is not None


def test_a_conversation_keeps_only_the_turns_a_prompt_can_show(tmp_path: Path) -> None:
    from structq.agent.conversation import Conversation
    from structq.server.service import Conversations

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        conversation = Conversation(agent=None)  # type: ignore[arg-type]
        for n in range(10):
            Conversations(store).append("c", "o", conversation, Turn(f"q{n}", {}, ""))
        kept = store.load_conversation("c")[1]
        assert [t["question"] for t in kept] == [f"q{n}" for n in range(10 - conversation.max_turns, 10)]
        with store.database.connect() as connection:  # the older turns are gone from the table, not only hidden
            assert len(connection.execute(store.turns.select()).all()) == conversation.max_turns
    finally:
        store.close()


def test_the_request_rate_is_counted_in_the_store_for_every_worker(stores) -> None:
    """Two limiters (two workers) on one store share each token's bucket; it refills with time."""
    from structq.server.errors import RequestRejected
    from structq.server.limits import RateLimiter

    now = [1000.0]
    first, second = (RateLimiter(60, 3, store, clock=lambda: now[0]) for store in stores)
    for limiter in (first, second, first):
        limiter.take("token-a")
    for limiter in (second, first):
        with pytest.raises(RequestRejected) as refused:
            limiter.take("token-a")
        assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
    second.take("token-b")  # another token's allowance
    now[0] += 1.0  # 60 per minute: one more request a second
    first.take("token-a")
    with pytest.raises(RequestRejected):
        second.take("token-a")


def test_concurrent_workers_cannot_both_spend_the_last_request(stores) -> None:
    from structq.server.errors import RequestRejected
    from structq.server.limits import RateLimiter

    limiters = [RateLimiter(0.001, 10, store, clock=lambda: 5000.0) for store in stores]

    def take(n: int) -> bool:
        try:
            limiters[n % 2].take("shared")
        except RequestRejected:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        granted = sum(pool.map(take, range(40)))
    assert granted == 10


def test_the_in_memory_store_takes_concurrent_requests_in_turn() -> None:
    """One process embedding the service keeps its store in memory: one connection, which the
    request threads share without two transactions ever being open on it at once."""
    store = Store("sqlite://")
    try:
        def request(n: int) -> bool:
            store.append_turn("c", "o", Turn(f"q{n}", {}, ""))
            return store.take_request("token", per_second=0.001, burst=30, now=1.0) is None

        with ThreadPoolExecutor(8) as pool:
            granted = sum(pool.map(request, range(60)))
        assert granted == 30 and len(store.load_conversation("c")[1]) == 60
    finally:
        store.close()
