"""Partial answers and the circuit breaker: one unavailable source does not sink a question.

When a step's source is unavailable or times out (``SourceUnavailable``, ``QueryTimeout``), the
step is recorded as not run with the reason, its dependents are not run, and every step that
does not depend on it still runs; the answer says which part is missing and why. Only when
nothing at all could be read is the error raised (the CLI's exit code 4).

In a long-lived process (the Python API, a server) an engine keeps one ``CircuitBreaker``: a
source that failed ``threshold`` times in a row is *open* — skipped at once, with a note, for
``cooldown_s`` seconds — then *half-open*: one step probes it; success closes the circuit,
failure opens it for another cool-down. A one-shot CLI run never reaches the threshold.

    closed ──threshold failures in a row──▶ open ──cool-down over──▶ half-open
      ▲                                      ▲                         │
      └────────────── probe succeeds ────────┼──── probe fails ────────┘
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from structq.errors import ConfigError, ExecutionError, QueryTimeout, SourceUnavailable

__all__ = ["CircuitBreaker", "CircuitOpen", "UNAVAILABLE", "State"]

T = TypeVar("T")
State = Literal["closed", "open", "half_open"]

#: Failures that make a step's part of the answer missing instead of failing the question.
UNAVAILABLE: tuple[type[Exception], ...] = (SourceUnavailable, QueryTimeout)


class CircuitOpen(SourceUnavailable):
    """A source skipped without trying: it failed too often, too recently."""


@dataclass
class _Circuit:
    failures: int = 0
    opened_at: float | None = None
    probing: bool = False
    last_error: str = ""


class CircuitBreaker:
    """Per-source failure counts and cool-downs; thread-safe (steps run concurrently)."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if threshold < 1 or cooldown_s < 0:
            raise ValueError("threshold >= 1 and cooldown_s >= 0")
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "CircuitBreaker":
        """``STRUCTQ_BREAKER_FAILURES`` (default 3) and ``STRUCTQ_BREAKER_COOLDOWN`` (seconds, default 30)."""
        failures = os.environ.get("STRUCTQ_BREAKER_FAILURES", "3")
        cooldown = os.environ.get("STRUCTQ_BREAKER_COOLDOWN", "30")
        if not failures.strip().isdigit() or int(failures) < 1:
            raise ConfigError(f"STRUCTQ_BREAKER_FAILURES={failures!r} is not a whole number >= 1",
                              hint="set it to the failures in a row that open the circuit, e.g. 3")
        try:
            seconds = float(cooldown)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:
            raise ConfigError(f"STRUCTQ_BREAKER_COOLDOWN={cooldown!r} is not a number of seconds",
                              hint="set it to the cool-down in seconds, e.g. 30")
        return cls(int(failures), seconds)

    # --- state ------------------------------------------------------------------------

    def state(self, source: str) -> State:
        with self._lock:
            return self._state(self._circuits.get(source))

    def _state(self, circuit: _Circuit | None) -> State:
        if circuit is None or circuit.opened_at is None:
            return "closed"
        if self._clock() - circuit.opened_at < self.cooldown_s:
            return "open"
        return "half_open"

    # --- use --------------------------------------------------------------------------

    def call(self, source: str, run: Callable[[], T]) -> T:
        """``run()`` unless ``source``'s circuit is open (then ``CircuitOpen``); its
        unavailability counts against the source, its success resets the count."""
        self._admit(source)
        try:
            result = run()
        except UNAVAILABLE as exc:
            self._failed(source, exc)
            raise
        except ExecutionError:
            self._succeeded(source)  # the source answered, with an error about the query
            raise
        except BaseException:
            self._release(source)  # no verdict on the source
            raise
        self._succeeded(source)
        return result

    def _admit(self, source: str) -> None:
        with self._lock:
            circuit = self._circuits.get(source)
            state = self._state(circuit)
            if state == "closed":
                return
            assert circuit is not None and circuit.opened_at is not None
            if state == "half_open" and not circuit.probing:
                circuit.probing = True  # this step is the probe; others wait for its verdict
                return
            left = max(0.0, self.cooldown_s - (self._clock() - circuit.opened_at))
            when = f"tried again in {left:.0f} s" if state == "open" else "being probed by another step"
            raise CircuitOpen(
                f"source {source!r} skipped: it failed {circuit.failures} times in a row "
                f"(last: {circuit.last_error}); {when}",
                source=source, hint="check that the source is running; the next question after the cool-down probes it",
            )

    def _failed(self, source: str, error: Exception) -> None:
        with self._lock:
            circuit = self._circuits.setdefault(source, _Circuit())
            circuit.failures += 1
            circuit.last_error = getattr(error, "message", str(error))
            if circuit.probing or circuit.failures >= self.threshold:
                circuit.opened_at = self._clock()
            circuit.probing = False

    def _succeeded(self, source: str) -> None:
        with self._lock:
            self._circuits.pop(source, None)

    def _release(self, source: str) -> None:
        with self._lock:
            circuit = self._circuits.get(source)
            if circuit is not None:
                circuit.probing = False
