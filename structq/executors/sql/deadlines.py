"""One deadline thread for every SQLite statement of the process.

SQLite has no statement timeout of its own. ``sqlite.sqlite_deadline`` installs a progress
handler that fails the statement once it is past its deadline, but SQLite calls that handler
only between VM steps, so one expensive step (a function call, a sort) runs on regardless.
The backstop is ``connection.interrupt()`` at the deadline, which ends the statement as soon
as that step returns.

A ``threading.Timer`` per statement for that backstop cost a thread start for every query —
about a fifth of a fast query's fixed cost, and under load ``Thread.start`` waits for the new
thread to be scheduled (7.5 ms seen). Instead this module keeps ONE daemon thread (started on
first use) and a heap of ``(deadline, sequence, watch)`` entries under a condition variable:

* ``watch(cancel, after_s)`` pushes an entry (O(log n)) and wakes the thread only when the new
  deadline is the earliest; no thread is started after the first.
* ``Watch.release()`` marks the entry done and drops its ``cancel`` (and so the connection it
  is bound to) under the same lock, O(1). Done entries leave the heap when they reach its top,
  and the heap is rebuilt without them whenever they outnumber the live ones, so it stays
  within about twice the statements running.
* The thread sleeps until the earliest deadline, then calls ``cancel()`` for every live entry
  past it — while holding the lock. ``release()`` takes that lock too, so once it returns the
  entry can never fire: a late deadline cannot interrupt the next query that borrows the
  pooled connection. ``interrupt()`` only sets a flag in SQLite, so the lock stays short;
  that is also why this serves SQLite only (a server cancel opens a connection: those keep
  ``guards.Backstop``).

After ``fork()`` the child has no deadline thread; the state is reset in the child so its
first query starts a fresh one.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable

__all__ = ["THREAD_NAME", "Watch", "watch"]

THREAD_NAME = "structq-sqlite-deadlines"
#: Done entries tolerated in the heap before it is rebuilt without them (and at least half).
_COMPACT_AFTER = 16


class Watch:
    """One statement's deadline, live until ``release()``."""

    __slots__ = ("_watcher", "cancel", "deadline", "done")

    def __init__(self, watcher: _Watcher, cancel: Callable[[], object], deadline: float) -> None:
        self._watcher = watcher
        self.cancel: Callable[[], object] | None = cancel
        self.deadline = deadline
        self.done = False

    def release(self) -> None:
        """The statement is over: once this returns, ``cancel`` is never called for this
        entry, and the entry holds no reference to it. Idempotent."""
        self._watcher.release(self)


class _Watcher:
    """The heap, its condition variable and the one thread that serves it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Watch]] = []
        self._released = 0  # done entries still in the heap
        self._sequence = itertools.count()  # ties on the deadline never compare Watch objects
        self._thread: threading.Thread | None = None

    def watch(self, cancel: Callable[[], object], after_s: float) -> Watch:
        entry = Watch(self, cancel, time.monotonic() + after_s)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (entry.deadline, next(self._sequence), entry))
            if self._heap[0][2] is entry:  # earlier than what the thread sleeps towards
                self._cond.notify()
        return entry

    def release(self, entry: Watch) -> None:
        with self._cond:
            if entry.done:
                return
            entry.done = True
            entry.cancel = None
            self._released += 1
            if self._released > _COMPACT_AFTER and self._released * 2 > len(self._heap):
                self._heap = [item for item in self._heap if not item[2].done]
                heapq.heapify(self._heap)
                self._released = 0

    def pending(self) -> int:
        """Live (not yet released or fired) entries: for tests and diagnostics."""
        with self._cond:
            return sum(1 for _, _, entry in self._heap if not entry.done)

    def _run(self) -> None:
        with self._cond:
            while True:
                self._expire(time.monotonic())
                if self._heap:
                    self._cond.wait(max(0.0, self._heap[0][0] - time.monotonic()))
                else:
                    self._cond.wait()

    def _expire(self, now: float) -> None:
        """Drop done entries from the top; fire live ones past their deadline (lock held)."""
        while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
            _, _, entry = heapq.heappop(self._heap)
            if entry.done:
                self._released -= 1
                continue
            cancel, entry.cancel, entry.done = entry.cancel, None, True
            try:
                if cancel is not None:
                    cancel()
            except Exception:  # noqa: BLE001, S110 - a closed connection has nothing left to stop
                pass


_watcher = _Watcher()


def watch(cancel: Callable[[], object], after_s: float) -> Watch:
    """Call ``cancel()`` ``after_s`` seconds from now unless the returned watch is released first."""
    return _watcher.watch(cancel, after_s)


def pending() -> int:
    """How many watches are live now."""
    return _watcher.pending()


def _reset_after_fork() -> None:
    global _watcher
    _watcher = _Watcher()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
