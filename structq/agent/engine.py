"""Run a plan: each step through the sandbox and its executor, in dependency order.

Independent steps run concurrently: executors are synchronous (database drivers are), so each
step that has company runs on a worker thread of the engine's own pool; a step with nothing to
overlap runs on the calling thread. The scheduler is synchronous too, and ``arun`` moves the
whole run to one thread: a thread hop per step and a new event loop per ``run`` cost about a
millisecond per plan, more than the sandbox, on queries that take a fraction of that. A
synchronous caller (``Agent.run``, ``structq run``) runs it on its own thread: no event loop,
no call pool (``call``, ``bridge``).
References are resolved from earlier results and handed to the sandbox as parameter values.
An empty input never changes the answer: a step is left out only where an empty input
provably makes its result empty (``empty.py``: the reference is a top-level ``col IN (<k>)``
conjunct or a ``terms`` filter); everywhere else it runs with the empty list bound
(``NOT IN ()`` is true, ``COUNT`` is 0). Either way a note names the empty step and its
purpose. A step whose source is unavailable or times out is not run either, and the steps that
do not depend on it still are: a partial answer (see ``breaker``). Truncation anywhere is
recorded in the notes, never silent, and so is what an executor says is not exact about its
rows (``ResultSet.notes``: estimated counts, rounded numbers), each note prefixed with its step.
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from structq.errors import ConfigError, ExecutionError, PlanError, SandboxViolation, StructqError
from structq.safety.bounds import refusal_of

from .breaker import UNAVAILABLE, CircuitBreaker
from .bridge import call_here, driven_here
from .empty import empty_when_input_empty
from .plan import Plan, Step, step_dialect
from .results import PlanResult, StepResult

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from structq.capabilities import CapabilitySet, Manifest
    from structq.executors.base import Executor, ResultSet
    from structq.safety.query import SafeQuery
    from structq.sources import Bound

T = TypeVar("T")

__all__ = ["Engine", "StepResult", "PlanResult", "ExecutorPool"]


class ExecutorPool:
    """One executor per source, created on first use and reused (connection pools live there)."""

    def __init__(self, capabilities: "CapabilitySet") -> None:
        self._capabilities = capabilities
        self._executors: dict[str, Executor] = {}
        self._lock = threading.Lock()

    def get(self, manifest: "Manifest") -> "Executor":
        with self._lock:
            executor = self._executors.get(manifest.source)
            if executor is None:
                from structq.sources import executor_for

                executor = executor_for(manifest)
                self._executors[manifest.source] = executor
            return executor

    def close(self) -> None:
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.close()


def _in_process_threads() -> int:
    """Threads worth giving work that runs in this process: ``asyncio.to_thread``'s default."""
    return min(Engine.NETWORK_THREADS, (os.cpu_count() or 1) + 4)


def in_process(source: str, capabilities: "CapabilitySet") -> bool:
    """Whether a step on ``source`` runs in this process: a SQLite file, or the local step
    (``LOCAL_SOURCE``: SQL over earlier rows in memory), rather than on a server."""
    manifest = capabilities.get(source)
    return manifest is None or manifest.query_dialect == "sqlite"


def work_threads(capabilities: "CapabilitySet") -> int:
    """Each engine pool's size for these sources (``Engine``): ``cores + 4`` (what
    ``asyncio.to_thread`` has) when every source runs on this machine's cores (``runs_here``: a
    SQLite file, the embedded search server), else ``Engine.NETWORK_THREADS``. More threads than
    that only take turns for the same cores: on the demo (SQLite plus the embedded search
    server), 32 threads answered 50 concurrent verified questions slower than 6 did."""
    if capabilities and all(manifest.runs_here for manifest in capabilities):
        return _in_process_threads()
    return Engine.NETWORK_THREADS


class Engine:
    """Runs plans against the sources of a capability set.

    Thread-safe: several plans may run at once (an agent answering concurrent questions); they
    share the executors (connection pools) and the worker threads.

    Two pools of ``threads`` threads each (``STRUCTQ_THREADS``), both started on first use:
    the *step* pool runs the steps of every plan in flight, and the *call* pool runs the
    blocking calls of the async API (``arun``, and through :meth:`call` the agent's planning,
    observation and answer calls) — instead of ``asyncio.to_thread``, whose default pool has
    ``min(32, cores + 4)`` threads (6 on two cores): there, 50 concurrent ``aask`` ran six at a
    time while their threads mostly waited on databases and the model. They are two pools
    because a run's thread waits for its steps: in one pool, runs filling every thread would
    wait for steps that can never start. ``threads`` bounds how many plans (and how many steps)
    are in flight at once; more callers queue.

    Sized from the work (``threads=None``, the default, ``work_threads``): a thread that waits
    on a server or the model costs nothing while it waits, so with any source out of process
    there are ``NETWORK_THREADS``; with every source in this process (SQLite files, the local
    step) a step is work for this process's cores, and more threads than ``cores + 4`` only
    take turns with the interpreter lock. Whatever the pools hold, at most ``in_process_slots``
    (``cores + 4``, what ``asyncio.to_thread`` ran at once) steps run on an in-process source at
    once (``_run_step``): the others wait without contending, while steps on servers go on, and
    a few slow queries still leave slots for the quick ones.
    """

    #: Each pool's size when a source waits on the network (``work_threads``).
    NETWORK_THREADS = 32
    #: The name the size had when it was fixed, for code written against it.
    DEFAULT_THREADS = NETWORK_THREADS

    def __init__(self, capabilities: "CapabilitySet", *, executors: ExecutorPool | None = None,
                 breaker: CircuitBreaker | None = None, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be at least 1, not {threads}",
                              hint="set STRUCTQ_THREADS (or Settings.threads) to 1 or more, or leave it unset "
                                   "to size the pools from the sources")
        self.capabilities = capabilities
        self.executors = executors or ExecutorPool(capabilities)
        self.breaker = breaker or CircuitBreaker.from_env()
        self.threads = threads if threads is not None else work_threads(capabilities)
        #: At most this many steps on in-process sources at once (``_run_step``).
        self.in_process_slots = min(threads or self.NETWORK_THREADS, _in_process_threads())
        self._in_process = threading.BoundedSemaphore(self.in_process_slots)
        self._workers: ThreadPoolExecutor | None = None
        self._callers: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            pools = (self._workers, self._callers)
            self._workers = self._callers = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.executors.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public -----------------------------------------------------------------------

    def run(self, plan: Plan, *, vars: Mapping[str, Any] | None = None,
            done: Mapping[str, StepResult] | None = None, upto: int | None = None) -> PlanResult:
        """Validate ``plan`` and run its steps, independent ones concurrently.

        Step by step (adaptive mode): ``done`` holds results of steps that already ran (they
        are not run again) and ``upto`` stops after the first ``upto`` steps; the result then
        holds the steps that have run. Works inside a running event loop too (it starts none).
        """
        plan.validate_against(self.capabilities)
        started = time.perf_counter()
        schedule = _Schedule(self, plan, dict(vars or {}))
        schedule.results.update(done or {})
        schedule.run(upto)
        ordered = {s.output_key: schedule.results[s.output_key] for s in plan.steps if s.output_key in schedule.results}
        if schedule.unavailable:
            if all(r.skipped is not None for r in ordered.values()):
                raise schedule.unavailable[0]  # nothing could be read: not an answer, partial or not
            missing = ", ".join(repr(k) for k in ordered if k in schedule.missing)
            schedule.notes.append(f"partial answer: steps {missing} could not run because a source was unavailable "
                             "(see above); the other steps' results are complete")
        return PlanResult(plan, ordered, schedule.notes, (time.perf_counter() - started) * 1000)

    def look_up(self, plan: Plan, *, vars: Mapping[str, Any] | None = None) -> PlanResult:
        """A data access the agent makes for itself (a template slot's value), not part of an
        answer: ``run`` here; a service's engine checks it like any run but reports nothing."""
        return self.run(plan, vars=vars)

    def view(self, vars: Mapping[str, Any] | None) -> str:
        """What the rows of a run depend on besides the plan: the variables here (a service's
        engine: its caller's variables and sources). Caches of looked-up data key on it, so
        one caller's rows never answer another."""
        return json.dumps(dict(vars or {}), sort_keys=True, ensure_ascii=False, default=str)

    async def arun(self, plan: Plan, *, vars: Mapping[str, Any] | None = None,
                   done: Mapping[str, StepResult] | None = None, upto: int | None = None) -> PlanResult:
        """``run`` on a worker thread, so the caller's event loop keeps serving others."""
        return await self.call(self.run, plan, vars=vars, done=done, upto=upto)

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``await fn(*args, **kwargs)`` run on the call pool (see the class docstring), with
        the caller's context variables, as ``asyncio.to_thread`` would; made at once on this
        thread when a synchronous caller drives the coroutine (``bridge.block_on``: no event
        loop to keep free, so neither asyncio nor the call pool is started)."""
        if driven_here():
            return call_here(fn, *args, **kwargs)
        import asyncio  # the async API's own: a synchronous caller never imports it
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._callers is None:
                self._callers = ThreadPoolExecutor(self.threads, thread_name_prefix="structq-call")
            callers = self._callers
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(callers, call)

    def submit(self, fn: Any, *args: Any) -> "Future[Any]":
        """Run ``fn(*args)`` on the engine's worker threads (started on first use)."""
        from concurrent.futures import ThreadPoolExecutor  # a plan with nothing to overlap needs no threads

        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(self.threads, thread_name_prefix="structq-step")
            return self._workers.submit(fn, *args)

    # --- one step ---------------------------------------------------------------------

    def bind(self, step: Step, inputs: Mapping[str, StepResult]) -> "Bound":
        """The step bound to its source, by the source's kind (``structq.sources``): the
        manifest its query is checked against, and the executor a built-in source opens."""
        from structq.sources import step_kind

        return step_kind(step.source, self.capabilities).bind(step, inputs, self.capabilities)

    def prepare(
        self,
        step: Step,
        inputs: Mapping[str, StepResult],
        *,
        vars: Mapping[str, Any],
        max_rows: int | None,
        bound: "Bound | None" = None,
        slots: Mapping[str, Any] | None = None,
    ) -> "SafeQuery":
        """Resolve the step's references from ``inputs`` (the results of the steps it
        depends on) and pass it through the sandbox of its source's kind (with a template
        plan's ``slots`` values)."""
        references = step.references(step_dialect(step, self.capabilities))
        params = {ref.text: inputs[ref.key].column_values(ref.column) for ref in references}
        bound = bound or self.bind(step, inputs)
        return bound.check(step, params=params, vars=vars, max_rows=max_rows, slots=slots)

    def fetch(self, step: Step, safe: "SafeQuery", inputs: Mapping[str, StepResult], *,
              bound: "Bound | None" = None) -> "ResultSet":
        """Fetch the rows of a checked query: on the step's own executor when its source opens one, else on
        the source's pooled executor behind the circuit breaker."""
        bound = bound or self.bind(step, inputs)
        if bound.open is None:
            manifest = bound.manifest
            return self.breaker.call(step.source, lambda: self.executors.get(manifest).fetch(safe))
        executor = bound.open()
        try:
            return executor.fetch(safe)
        finally:
            executor.close()

    def on_step(self, step: Step, result: StepResult | None, error: StructqError | None) -> None:
        """Called once each step of a run is settled: with its result (run, or not run and
        why), or with the error that stopped it. Nothing by default; the server streams them."""

    def intermediate_cap(self, step: Step) -> int:
        """Row cap for a step whose results feed later steps."""
        from structq.sources import step_kind

        return step_kind(step.source, self.capabilities).intermediate_cap(self.capabilities.get(step.source))


class _Schedule:
    """The state of one run of a plan: results so far, notes, and the scheduling of steps.

    Only the scheduling thread touches ``results`` and ``notes``; a step is handed a snapshot
    of exactly the results it depends on, so what it sees never depends on which unrelated
    steps happened to finish first.
    """

    def __init__(self, engine: Engine, plan: Plan, vars: dict[str, Any]) -> None:
        self.engine = engine
        self.plan = plan
        self.vars = vars
        self.deps = plan.dependencies(engine.capabilities)
        self.consumed = {key for needed in self.deps.values() for key in needed}
        #: Steps a local step reads as tables: they always run (a table needs its columns).
        self.read_as_tables = plan.read_as_tables(engine.capabilities)
        self.results: dict[str, StepResult] = {}
        self.notes: list[str] = []
        #: Why steps could not run (a source down or timing out), in the order it happened.
        self.unavailable: list[StructqError] = []
        #: Those steps and every step downstream of them: their results are unknown.
        self.missing: set[str] = set()

    def run(self, upto: int | None = None) -> None:
        """Run the pending steps (the first ``upto`` of the plan), each as soon as its inputs are in."""
        pending = [s for s in self.plan.steps[:upto] if s.output_key not in self.results]
        running: dict[Future[StepResult], str] = {}
        try:
            while pending or running:
                ready = [s for s in pending if all(d in self.results for d in self.deps[s.output_key])]
                pending = [s for s in pending if s not in ready]
                runnable = self._runnable(ready)
                if len(runnable) == 1 and not running:
                    self._record(self._run_step(runnable[0], self._inputs(runnable[0])))
                    continue  # nothing to overlap with: no thread hop
                for step in runnable:
                    running[self.engine.submit(self._run_step, step, self._inputs(step))] = step.output_key
                if not running:
                    if pending and not ready:
                        waiting = ", ".join(s.output_key for s in pending)
                        raise PlanError(f"steps {waiting} wait for inputs that no step produces")
                    continue
                from concurrent.futures import FIRST_COMPLETED, wait

                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    running.pop(future)
                    self._record(future.result())
        finally:
            for future in running:
                future.cancel()  # not started yet; a running query finishes on its own thread

    def _inputs(self, step: Step) -> dict[str, StepResult]:
        return {key: self.results[key] for key in self.deps[step.output_key]}

    def _runnable(self, ready: list[Step]) -> list[Step]:
        """The ready steps that should run; the others are recorded as not run."""
        runnable = []
        for step in ready:
            reason = self._skip_reason(step)
            if reason is None:
                runnable.append(step)
            else:
                self._record(_skipped(step, reason))
        return runnable

    def _skip_reason(self, step: Step) -> str | None:
        """Why ``step`` need not run: an empty input that provably empties its result.

        A step that a local step reads as a table always runs, so that its columns are known.
        An input that could not be read (its source unavailable) is unknown, not empty: the
        step never runs on it.
        """
        for key in self.deps[step.output_key]:
            if key in self.missing:
                self.missing.add(step.output_key)
                return f"not run: its input step {key!r} could not be read"
        if step.output_key in self.read_as_tables:
            return None
        dialect = step_dialect(step, self.engine.capabilities)
        for key in self.deps[step.output_key]:
            earlier = self.results[key]
            if earlier.row_count or not empty_when_input_empty(step, key, dialect):
                continue
            if earlier.skipped is not None:
                return f"not run: its input step {key!r} did not run"
            return f"not run: step {key!r}{_purpose(earlier)} returned no rows"
        return None

    def _empty_inputs_note(self, step: Step) -> str | None:
        """For a step that runs with an empty input: which input was empty."""
        empty = [key for key in self.deps[step.output_key] if self.results[key].row_count == 0]
        if not empty:
            return None
        named = ", ".join(f"{key!r}{_purpose(self.results[key])}" for key in empty)
        return f"step {step.output_key!r} ran with no rows from step {named}"

    def _record(self, result: StepResult) -> None:
        self.results[result.output_key] = result
        self.engine.on_step(self.plan.step(result.output_key), result, None)
        if result.skipped is None and (note := self._empty_inputs_note(self.plan.step(result.output_key))):
            self.notes.append(note)
        self.notes.extend(f"step {result.output_key!r}: {note}" for note in result.notes)
        if result.skipped:
            self.notes.append(f"step {result.output_key!r} {result.skipped}")
        elif result.truncated and not _bounded_count(result):
            cap = "the intermediate row cap" if result.output_key in self.consumed else "the row limit"
            self.notes.append(
                f"step {result.output_key!r} was truncated at {result.row_count} rows ({cap}); "
                "results and answers that depend on it are incomplete"
            )

    def _run_step(self, step: Step, inputs: dict[str, StepResult]) -> StepResult:
        """The step, checked and fetched; on an in-process source, in one of the engine's
        ``in_process_slots`` (more at once would only contend for the cores)."""
        if not in_process(step.source, self.engine.capabilities):
            return self._checked_and_fetched(step, inputs)
        with self.engine._in_process:
            return self._checked_and_fetched(step, inputs)

    def _checked_and_fetched(self, step: Step, inputs: dict[str, StepResult]) -> StepResult:
        engine = self.engine
        cap = engine.intermediate_cap(step) if step.output_key in self.consumed else None
        try:
            bound = engine.bind(step, inputs)
            template = self.plan.template
            safe = engine.prepare(step, inputs, vars=self.vars, max_rows=cap, bound=bound,
                                  slots=template.params if template is not None else None)
            result = engine.fetch(step, safe, inputs, bound=bound)
        except UNAVAILABLE as exc:  # this part of the answer is missing; the rest still runs
            self.unavailable.append(_located(exc, step.output_key))
            self.missing.add(step.output_key)
            return _skipped(step, f"not run: {exc.message}")
        except (PlanError, SandboxViolation, ExecutionError) as exc:
            located = _located(refusal_of(exc, step.source) or exc, step.output_key)
            engine.on_step(step, None, located)
            raise located  # noqa: B904 (the original is its cause)
        except StructqError as exc:  # not about one step (a setup mistake): as it is
            engine.on_step(step, None, exc)
            raise
        except Exception as exc:  # a limit the query ran into, or an executor bug: say which step
            refused = refusal_of(exc, step.source)
            failed = _located(refused, step.output_key) if refused is not None else ExecutionError(
                f"step {step.output_key!r} failed: {type(exc).__name__}: {str(exc)[:200]}", source=step.source,
                step=step.output_key)
            engine.on_step(step, None, failed)
            raise failed from exc
        return StepResult(
            output_key=step.output_key,
            source=step.source,
            purpose=step.purpose,
            index=step.index,
            query=result.query if result.query is not None else safe.sent,
            params={**safe.params, **result.params},  # the executor's: what was sent
            columns=tuple(result.columns),
            rows=list(result.rows),
            truncated=result.truncated,
            elapsed_ms=result.elapsed_ms,
            notes=tuple(result.notes),
            startup_ms=result.startup_ms,
        )


def _purpose(result: StepResult) -> str:
    return f" ({result.purpose})" if result.purpose else ""


def _skipped(step: Step, reason: str) -> StepResult:
    return StepResult(output_key=step.output_key, source=step.source, purpose=step.purpose,
                      index=step.index, skipped=reason)


def _located(exc: "PlanError | SandboxViolation | ExecutionError", key: str) -> StructqError:
    """``exc`` naming step ``key`` (the sandbox and executors do not know the step); a new
    error has the original as its cause, for the traceback."""
    located = exc.at_step(key)
    if located is not exc:
        located.__cause__ = exc
    return located


def _bounded_count(result: StepResult) -> bool:
    """A search count that stopped at its bound: its own note says "at least N", and "truncated
    at 1 rows" would misread it."""
    return result.columns == ("count",) and result.row_count == 1 and bool(result.notes)
