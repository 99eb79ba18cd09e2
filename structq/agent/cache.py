"""Verified plans and the plan cache: questions answered without a planning call.

A question that matches a manifest example after normalisation (case, full/half width,
punctuation, whitespace) uses the example's verified plan. Other plans that ran successfully
are cached in a SQLite file, keyed by the normalised question, the manifests' fingerprint,
the model, today's date (relative dates change meaning daily) and the conversation context.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from structq.templates.text import normalise_question

from .plan import Plan

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

__all__ = ["normalise_question", "VerifiedPlans", "PlanCache"]


class VerifiedPlans:
    """The manifests' examples by normalised question."""

    def __init__(self, capabilities: "CapabilitySet") -> None:
        # A slotted example is a template (``structq.templates``): its steps need the slots' values.
        self._plans = {normalise_question(ex.question): (Plan.from_example(ex), ex)
                       for _, ex in capabilities.examples() if not ex.slots}

    def get(self, question: str, today: dt.date | None = None) -> Plan | None:
        """The verified plan for ``question``; an example with relative dates is moved to the
        period ``today`` falls in (see ``relative.py``)."""
        found = self._plans.get(normalise_question(question))
        if found is None:
            return None
        plan, example = found
        if example.today is None or example.period is None or today is None:
            return plan
        from .relative import periods_between, shift_plan

        if not example.shift:
            return plan if periods_between(example.today, today, example.period) == 0 else None
        return shift_plan(plan, example.today, example.period, today)

    def __len__(self) -> int:
        return len(self._plans)


class PlanCache:
    """Plans that ran successfully, in a small SQLite file (safe across threads and processes)."""

    def __init__(self, path: Path, *, best_effort: bool = False) -> None:
        """``best_effort``: a cache that cannot be used (a read-only home, a path under a file)
        warns once and acts empty, so answering never depends on it; otherwise it raises
        ``ConfigError`` (``structq cache`` must say why it cannot clear)."""
        self.path = Path(path)
        self.best_effort = best_effort
        self._lock = threading.Lock()
        self._unusable: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, question TEXT, plan TEXT, created REAL)")
        except (OSError, sqlite3.Error) as exc:
            self._give_up(exc)

    def _give_up(self, exc: BaseException) -> None:
        reason = getattr(exc, "strerror", None) or str(exc)
        if not self.best_effort:
            from structq.errors import ConfigError

            raise ConfigError(f"cannot use the plan cache {self.path}: {reason}",
                              hint="set STRUCTQ_CACHE_DIR to a writable folder, or STRUCTQ_CACHE=0") from None
        if self._unusable is None:
            logging.getLogger("structq").warning(
                "structq: warning: cannot use the plan cache %s (%s); planning without it "
                "(set STRUCTQ_CACHE_DIR to a writable folder, or STRUCTQ_CACHE=0)", self.path, reason)
        self._unusable = reason

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits on success and is always closed."""
        db = sqlite3.connect(self.path, timeout=5)
        try:
            with db:
                yield db
        finally:
            db.close()

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection | None]:
        """The locked connection, or None once the cache proved unusable (best effort only)."""
        with self._lock:
            if self._unusable is not None:
                yield None
                return
            try:
                with self._connect() as db:
                    yield db
            except (OSError, sqlite3.Error) as exc:
                self._give_up(exc)

    @staticmethod
    def key(question: str, *, fingerprint: str, model: str, today: str, context: str) -> str:
        parts = [normalise_question(question), fingerprint, model, today, context]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    def get(self, key: str) -> Plan | None:
        row = None
        with self._using() as db:
            if db is not None:
                row = db.execute("SELECT plan FROM plans WHERE key = ?", (key,)).fetchone()
        return Plan.parse(json.loads(row[0])) if row else None

    def put(self, key: str, question: str, plan: Plan) -> None:
        with self._using() as db:
            if db is not None:
                db.execute(
                    "INSERT OR REPLACE INTO plans (key, question, plan, created) VALUES (?, ?, ?, ?)",
                    (key, question, json.dumps(plan.to_dict(), ensure_ascii=False), time.time()),
                )

    def clear(self) -> int:
        """Forget every cached plan; returns how many there were."""
        count = 0
        with self._using() as db:
            if db is not None:
                count = db.execute("SELECT COUNT(*) FROM plans").fetchone()[0]
                db.execute("DELETE FROM plans")
        return int(count)

    def __len__(self) -> int:
        with self._using() as db:
            return int(db.execute("SELECT COUNT(*) FROM plans").fetchone()[0]) if db is not None else 0
