"""One deadline thread for every SQLite statement of the process.

SQLite has no statement timeout of its own. ``sql.sqlite_deadline`` installs a progress
handler that fails the statement once it is past its deadline, but SQLite calls that handler
only between VM steps, so one expensive step (a function call, a sort) runs on regardless.
The backstop is ``connection.interrupt()`` at the deadline, which ends the statement as soon
as that step returns.

Starting a ``threading.Timer`` per statement for that backstop costs a thread start for every
query — a large share of a fast query's fixed cost, and under load ``Thread.start`` waits for
the new thread to be scheduled. Instead this module keeps ONE daemon thread (started on first
use) and a heap of ``(deadline, sequence, watch)`` entries guarded by a condition variable:

* ``watch(connection, timeout_s)`` pushes an entry (O(log n)) and wakes the thread only when
  the new deadline is the earliest; it never starts a thread after the first.
* ``Watch.release()`` marks the entry done under the same lock (O(1)); the thread drops done
  entries as they reach the top of the heap, and the heap is rebuilt without them whenever
  they outnumber the live ones, so it stays within twice the live entries (amortised
  O(log n) per query).
* The thread sleeps on the condition until the earliest deadline, then calls
  ``interrupt()`` on every live entry whose deadline has passed — while holding the lock.
  Because ``release()`` takes that lock too, once ``release()`` returns the connection can
  never be interrupted by this entry: a late deadline cannot cancel the next query that
  borrows the pooled connection.

``interrupt()`` only sets a flag in SQLite, so calling it under the lock keeps the lock
short. After ``fork()`` the child has no deadline thread; the state is reset in the child so
its first query starts a fresh one.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from typing import Protocol

__all__ = ["Interruptible", "Watch", "watch"]

THREAD_NAME = "structq-sqlite-deadlines"


class Interruptible(Protocol):
    """What the deadline thread needs of a connection (``sqlite3.Connection`` has it)."""

    def interrupt(self) -> None: ...


class Watch:
    """One registered statement: its connection and deadline, until ``release()``."""

    __slots__ = ("_watcher", "connection", "deadline", "done")

    def __init__(self, watcher: _Watcher, connection: Interruptible, deadline: float) -> None:
        self._watcher = watcher
        self.connection = connection
        self.deadline = deadline
        self.done = False

    def release(self) -> None:
        """The statement is over: after this returns its connection is never interrupted
        on this entry's behalf. Idempotent."""
        self._watcher.release(self)


class _Watcher:
    """The heap, its condition variable and the one thread that serves it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Watch]] = []
        self._released = 0  # done entries still in the heap
        self._sequence = itertools.count()  # ties on the deadline never compare Watch objects
        self._thread: threading.Thread | None = None

    def watch(self, connection: Interruptible, timeout_s: float) -> Watch:
        entry = Watch(self, connection, time.monotonic() + timeout_s)
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
            self._released += 1
            if self._released > len(self._heap) // 2 and self._released > 16:
                self._heap = [item for item in self._heap if not item[2].done]
                heapq.heapify(self._heap)
                self._released = 0

    def _run(self) -> None:
        with self._cond:
            while True:
                self._expire(time.monotonic())
                if self._heap:
                    self._cond.wait(max(0.0, self._heap[0][0] - time.monotonic()))
                else:
                    self._cond.wait()

    def _expire(self, now: float) -> None:
        """Drop done entries from the top; interrupt live ones past their deadline (lock held)."""
        while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
            _, _, entry = heapq.heappop(self._heap)
            if entry.done:
                self._released -= 1
                continue
            entry.done = True
            try:
                entry.connection.interrupt()
            except Exception:  # noqa: BLE001, S110 - a closed connection has nothing left to stop
                pass


_watcher = _Watcher()


def watch(connection: Interruptible, timeout_s: float) -> Watch:
    """Interrupt ``connection`` ``timeout_s`` from now unless the returned watch is released first."""
    return _watcher.watch(connection, timeout_s)


def _reset_after_fork() -> None:
    global _watcher
    _watcher = _Watcher()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
