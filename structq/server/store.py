"""The shared store of ``structq serve``: the plan cache and the conversations, named by URL.

Workers keep no state of their own, so any worker on any host can continue a conversation or
reuse a plan another one cached. ``sqlite:///PATH`` (the default: the CLI's plan cache file in
the user cache folder, so both share plans) serves one host; a PostgreSQL URL
(``postgresql://user@host/db``) shares the store across hosts. One SQLAlchemy implementation
serves both; tables are created when missing and no write reads first: plans are upserts,
turns are appended, so concurrent workers never collide on a key nor lose each other's writes.

Plan entries are keyed as ``PlanCache`` keys them (fingerprint, model, day, context and the
normalised question). A conversation is an owner row (the caller that started it) and its
turns, one row each in an append-only table whose sequence orders them: two follow-ups to
one conversation answered at once by two workers both land, one after the other. (Writing
the conversation back as one list — read, append, write — would keep only the last writer's.)
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Table

    from structq.agent.conversation import Turn
    from structq.agent.plan import Plan

__all__ = ["Store", "StorePlanCache", "default_store_url", "resolve_store_url", "ENV"]

#: Conversations nobody continued for this long are dropped when a server starts (30 days).
CONVERSATION_TTL_S = 30 * 24 * 3600

#: The environment variable that names the store (wins over ``store:`` in server.yaml).
ENV = "STRUCTQ_STORE_URL"


def default_store_url() -> str:
    """The plan cache file of the CLI (``STRUCTQ_CACHE_DIR`` moves it)."""
    from structq.config import user_cache_dir

    return f"sqlite:///{user_cache_dir() / 'plans.sqlite'}"


def resolve_store_url(configured: str | None) -> str:
    """``STRUCTQ_STORE_URL``, else server.yaml's ``store``, else the default file."""
    return os.environ.get(ENV) or configured or default_store_url()


def _pool(url: str) -> "Engine":
    """A connection pool on the store's database; plain ``postgresql://`` URLs use psycopg 3 (the driver structq ships)."""
    from sqlalchemy import create_engine, event
    from sqlalchemy import make_url
    from sqlalchemy.exc import ArgumentError

    from structq.executors.urls import redact_url

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(f"the store URL {redact_url(url)!r} is not a database URL",
                          hint=f"e.g. sqlite:///var/lib/structq/store.db or postgresql://user@host/db ({ENV} or server.yaml 'store')") from None
    backend = parsed.drivername.split("+", 1)[0]
    if backend not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(f"the store URL {redact_url(url)!r} names {backend!r}; a store is SQLite or PostgreSQL",
                          hint="sqlite:///PATH for one host, postgresql://user@host/db to share across hosts")
    if backend != "sqlite":
        if "+" not in parsed.drivername:
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True)
    if not parsed.database or parsed.database == ":memory:":  # one process only: one shared connection
        from sqlalchemy.pool import StaticPool

        return create_engine(parsed, poolclass=StaticPool, connect_args={"check_same_thread": False})
    Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    pool = create_engine(parsed, connect_args={"timeout": 5})

    @event.listens_for(pool, "connect")
    def _wal(connection: Any, _: Any) -> None:
        connection.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
        # every request writes (its rate); in WAL mode NORMAL syncs at checkpoints, not at each
        # commit, and loses no committed write when the process dies (the OS still has it)
        connection.execute("PRAGMA synchronous=NORMAL")

    return pool


class Store:
    """Plans, conversations and request rates in one database. Thread-safe (SQLAlchemy's pool); safe across processes."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import (
            BigInteger,
            Column,
            Float,
            ForeignKey,
            Index,
            Integer,
            MetaData,
            String,
            Table,
            Text,
        )
        from sqlalchemy.exc import SQLAlchemyError
        from sqlalchemy.pool import StaticPool

        from structq.executors.urls import redact_url

        self.url = url
        self.database = _pool(url)
        metadata = MetaData()
        # Same name and columns as PlanCache's SQLite table: the default store shares the CLI's file.
        self.plans = Table("plans", metadata, Column("key", String(64), primary_key=True),
                           Column("question", Text), Column("plan", Text), Column("created", Float))
        self.conversations = Table("conversation_owners", metadata, Column("id", String(64), primary_key=True),
                                   Column("owner", String(64), nullable=False), Column("updated", Float))
        self.turns = Table("conversation_turns", metadata,
                           Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
                           Column("conversation", String(64), ForeignKey("conversation_owners.id", ondelete="CASCADE"),
                                  nullable=False),
                           Column("turn", Text, nullable=False), Column("created", Float),
                           Index("conversation_turns_by_conversation", "conversation", "seq"))
        self.rates = Table("rate_buckets", metadata, Column("key", String(64), primary_key=True),
                           Column("tokens", Float, nullable=False), Column("updated", Float, nullable=False))
        # What an answer was (question, plan, plan source, row counts: no rows), by its answer_id,
        # for the feedback on it; kept as long as conversations are.
        self.answers = Table("answers", metadata, Column("id", String(64), primary_key=True),
                             Column("owner", String(64), nullable=False), Column("record", Text, nullable=False),
                             Column("created", Float, nullable=False))
        # One rating per answer (a second one replaces it), with a copy of the answer's record:
        # kept until a reviewer removes it, whatever happens to the answer.
        self.feedback = Table("feedback", metadata, Column("answer_id", String(64), primary_key=True),
                              Column("owner", String(64), nullable=False), Column("rating", String(8), nullable=False),
                              Column("comment", Text), Column("record", Text, nullable=False),
                              Column("created", Float, nullable=False))
        # An in-memory store is one connection (StaticPool) that threads must take in turn: two
        # transactions cannot be open on it at once. A file or a server has a connection each.
        self._one_connection = threading.Lock() if isinstance(self.database.pool, StaticPool) else None
        try:
            with self._one_connection or contextlib.nullcontext():
                metadata.create_all(self.database, checkfirst=True)
        except SQLAlchemyError as exc:
            self.database.dispose()
            raise ConfigError(f"cannot use the store {redact_url(url)}: {type(exc.orig or exc).__name__}: "
                              f"{str(exc.orig or exc).strip().splitlines()[0]}",
                              hint=f"check the URL ({ENV} or server.yaml 'store') and that the database accepts this user") from None

    def close(self) -> None:
        self.database.dispose()

    @contextlib.contextmanager
    def _begin(self) -> Iterator["Connection"]:
        """A connection in a transaction, committed when the block ends."""
        with self._one_connection or contextlib.nullcontext(), self.database.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def _connect(self) -> Iterator["Connection"]:
        """A connection to read with."""
        with self._one_connection or contextlib.nullcontext(), self.database.connect() as connection:
            yield connection

    def _insert(self, table: "Table") -> Any:
        """The dialect's INSERT (it has ON CONFLICT on both databases)."""
        if self.database.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert
        return insert(table)

    def _upsert(self, table: "Table", values: dict[str, Any]) -> None:
        """Insert or replace the row with this primary key, atomically on both databases."""
        key = [c.name for c in table.primary_key.columns]
        statement = self._insert(table).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=key, set_={k: statement.excluded[k] for k in values if k not in key})
        with self._begin() as connection:
            connection.execute(statement)

    # --- the plan cache ------------------------------------------------------------------

    def get_plan(self, key: str) -> dict[str, Any] | None:
        from sqlalchemy import select

        with self._connect() as connection:
            text = connection.execute(select(self.plans.c.plan).where(self.plans.c.key == key)).scalar()
        return json.loads(text) if text is not None else None

    def put_plan(self, key: str, question: str, plan: dict[str, Any]) -> None:
        self._upsert(self.plans, {"key": key, "question": question,
                                  "plan": json.dumps(plan, ensure_ascii=False), "created": time.time()})

    def count_plans(self) -> int:
        from sqlalchemy import func, select

        with self._connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self.plans)).scalar() or 0)

    def clear_plans(self) -> int:
        with self._begin() as connection:
            return int(connection.execute(self.plans.delete()).rowcount or 0)

    # --- conversations -------------------------------------------------------------------

    def load_conversation(self, cid: str, *, last: int | None = None) -> tuple[str, list[dict[str, Any]]] | None:
        """(owner, turns in the order they were added) of a conversation — its ``last`` turns
        only, when given — or None when there is none with this id."""
        from sqlalchemy import select

        c, t = self.conversations.c, self.turns.c
        recent = select(t.seq, t.turn).where(t.conversation == cid).order_by(t.seq.desc())
        if last is not None:
            recent = recent.limit(last)
        with self._connect() as connection:
            owner = connection.execute(select(c.owner).where(c.id == cid)).scalar()
            if owner is None:
                return None
            rows = connection.execute(recent).all()
        return owner, [json.loads(turn) for _, turn in reversed(rows)]

    def append_turn(self, cid: str, owner: str, turn: "Turn", *, keep: int | None = None) -> bool:
        """Add ``turn`` after the conversation's others (starting the conversation for
        ``owner`` when it is new), keeping its newest ``keep`` turns when given. Nothing is
        read and written back, so turns appended at once by several workers are all kept.
        False (and nothing written) when the conversation belongs to another owner."""
        from dataclasses import asdict

        from sqlalchemy import select

        now = time.time()
        c, t = self.conversations.c, self.turns.c
        head = self._insert(self.conversations).values(id=cid, owner=owner, updated=now)
        head = head.on_conflict_do_update(index_elements=["id"], set_={"updated": now}, where=c.owner == owner)
        with self._begin() as connection:
            if connection.execute(head.returning(c.id)).first() is None:
                return False
            connection.execute(self.turns.insert().values(
                conversation=cid, created=now, turn=json.dumps(asdict(turn), ensure_ascii=False, default=str)))
            if keep is not None:
                newest = select(t.seq).where(t.conversation == cid).order_by(t.seq.desc()).limit(keep)
                connection.execute(self.turns.delete().where(t.conversation == cid, t.seq.not_in(newest)))
        return True

    def prune_conversations(self, unused_for_s: float = CONVERSATION_TTL_S) -> int:
        """Forget conversations nobody continued for ``unused_for_s`` seconds, and answers as
        old (their feedback keeps its own copy); returns how many conversations."""
        from sqlalchemy import select

        c = self.conversations.c
        before = time.time() - unused_for_s
        stale = select(c.id).where(c.updated < before)
        with self._begin() as connection:
            connection.execute(self.turns.delete().where(self.turns.c.conversation.in_(stale)))
            connection.execute(self.answers.delete().where(self.answers.c.created < before))
            return int(connection.execute(self.conversations.delete().where(c.id.in_(stale))).rowcount or 0)

    # --- answers and feedback --------------------------------------------------------------

    def put_answer(self, answer_id: str, owner: str, record: dict[str, Any]) -> None:
        with self._begin() as connection:
            connection.execute(self.answers.insert().values(
                id=answer_id, owner=owner, record=json.dumps(record, ensure_ascii=False, default=str),
                created=time.time()))

    def get_answer(self, answer_id: str, owner: str) -> dict[str, Any] | None:
        """The record of ``owner``'s answer ``answer_id`` (another owner's is None, like a missing one)."""
        from sqlalchemy import select

        a = self.answers.c
        with self._connect() as connection:
            text = connection.execute(select(a.record).where(a.id == answer_id, a.owner == owner)).scalar()
        return json.loads(text) if text is not None else None

    def put_feedback(self, answer_id: str, owner: str, rating: str, comment: str | None,
                     record: dict[str, Any]) -> None:
        self._upsert(self.feedback, {"answer_id": answer_id, "owner": owner, "rating": rating, "comment": comment,
                                     "record": json.dumps(record, ensure_ascii=False, default=str),
                                     "created": time.time()})

    def list_feedback(self) -> list[dict[str, Any]]:
        """Every rating, newest first: ``answer_id``, ``rating``, ``comment``, ``created`` and the answer's record."""
        from sqlalchemy import select

        f = self.feedback.c
        with self._connect() as connection:
            rows = connection.execute(select(f.answer_id, f.rating, f.comment, f.record, f.created)
                                      .order_by(f.created.desc())).all()
        return [{"answer_id": r.answer_id, "rating": r.rating, "comment": r.comment, "created": r.created,
                 **json.loads(r.record)} for r in rows]


    # --- request rates -------------------------------------------------------------------

    def take_request(self, key: str, *, per_second: float, burst: int, now: float) -> float | None:
        """Spend one request from ``key``'s token bucket (``burst`` at most, refilled at
        ``per_second``): None when granted, else the tokens it holds (fewer than one).

        One statement: insert a full bucket less one, or refill the existing one and take a
        token only where one is there. Both databases lock the row for it, so workers taking at
        once each see the other's spending."""
        from sqlalchemy import case, literal, select

        r = self.rates.c
        refilled = r.tokens + (literal(now) - r.updated) * per_second
        refilled = case((refilled > burst, float(burst)), else_=refilled)
        statement = self._insert(self.rates).values(key=key, tokens=float(burst) - 1.0, updated=now)
        statement = statement.on_conflict_do_update(
            index_elements=["key"], set_={"tokens": refilled - 1.0, "updated": now}, where=refilled >= 1.0)
        with self._begin() as connection:
            if connection.execute(statement.returning(r.key)).first() is not None:
                return None
            return float(connection.execute(select(refilled).where(r.key == key)).scalar() or 0.0)


class StorePlanCache:
    """The ``PlanCache`` interface over a ``Store`` (the agent computes the keys), for a server's agent."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> "Plan | None":
        from structq.agent.plan import Plan

        data = self.store.get_plan(key)
        return Plan.parse(data) if data is not None else None

    def put(self, key: str, question: str, plan: "Plan") -> None:
        self.store.put_plan(key, question, plan.to_dict())

    def clear(self) -> int:
        return self.store.clear_plans()

    def __len__(self) -> int:
        return self.store.count_plans()
