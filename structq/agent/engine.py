"""Run a plan: each step through the sandbox and its executor, in dependency order.

Independent steps run concurrently: executors are synchronous (database drivers are), so each
step that has company runs on a worker thread of the engine's own pool; a step with nothing to
overlap runs on the calling thread. The scheduler is synchronous too, and ``arun`` moves the
whole run to one thread: a thread hop per step and a new event loop per ``run`` cost about a
millisecond per plan, more than the sandbox, on queries that take a fraction of that.
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

import asyncio
import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structq.errors import ExecutionError, PlanError, StructqError

from .breaker import UNAVAILABLE, CircuitBreaker
from .empty import empty_when_input_empty
from .plan import LOCAL_SOURCE, Plan, Step, step_dialect

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest
    from structq.executors.base import Executor, ResultSet
    from structq.safety.query import SafeQuery

__all__ = ["Engine", "StepResult", "RunResult", "ExecutorPool"]


@dataclass(frozen=True)
class StepResult:
    """What one step returned (or why it did not run)."""

    output_key: str
    source: str
    purpose: str = ""
    index: str | None = None
    query: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    skipped: str | None = None
    #: The executor's notes on what is not exact about ``rows`` (also in the run's notes).
    notes: tuple[str, ...] = ()

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def column_values(self, column: str | None) -> list[Any]:
        """The values of one column: the named one, or the only one (none for a step that
        did not run because its result was provably empty)."""
        if self.skipped is not None:
            return []
        if column is None:
            if len(self.columns) != 1:
                raise PlanError(
                    f"<{self.output_key}> needs a single-column result, but the step returns "
                    f"{len(self.columns)} columns ({', '.join(self.columns)})",
                    hint=f"name the column: <{self.output_key}.{self.columns[0] if self.columns else 'column'}>",
                )
            return [row[0] for row in self.rows]
        i = _column_index(self.columns, column)
        if i is None:
            raise PlanError(
                f"<{self.output_key}.{column}>: step {self.output_key!r} has no column {column!r}",
                hint=f"its columns: {', '.join(self.columns)}",
            )
        return [row[i] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of ``structq run --json`` (rows as lists in column order)."""
        return {
            "output_key": self.output_key,
            "source": self.source,
            "index": self.index,
            "purpose": self.purpose,
            "query": self.query,
            "params": self.params,
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
            "row_count": self.row_count,
            "truncated": self.truncated,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "skipped": self.skipped,
        }


@dataclass
class RunResult:
    """Every step's result by output key (in plan order), and the notes for the answer."""

    plan: Plan
    steps: dict[str, StepResult]
    notes: list[str]
    elapsed_ms: float

    @property
    def final(self) -> StepResult:
        """The last step's result: what the question asked for."""
        return self.steps[self.plan.steps[-1].output_key]

    @property
    def truncated(self) -> bool:
        return any(s.truncated for s in self.steps.values())

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps.values()], "notes": list(self.notes)}


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
                from structq.executors.base import create_executor

                executor = create_executor(manifest)
                self._executors[manifest.source] = executor
            return executor

    def close(self) -> None:
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.close()


class Engine:
    """Runs plans against the sources of a capability set.

    Thread-safe: several plans may run at once (an agent answering concurrent questions); they
    share the executors (connection pools) and the worker threads.
    """

    #: Worker threads for steps that run side by side; plans are a handful of steps wide.
    MAX_WORKERS = 8

    def __init__(self, capabilities: "CapabilitySet", *, executors: ExecutorPool | None = None,
                 breaker: CircuitBreaker | None = None) -> None:
        self.capabilities = capabilities
        self.executors = executors or ExecutorPool(capabilities)
        self.breaker = breaker or CircuitBreaker.from_env()
        self._workers: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=False, cancel_futures=True)
        self.executors.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public -----------------------------------------------------------------------

    def run(self, plan: Plan, *, vars: Mapping[str, Any] | None = None,
            done: Mapping[str, StepResult] | None = None, upto: int | None = None) -> RunResult:
        """Validate ``plan`` and run its steps, independent ones concurrently.

        Step by step (adaptive mode): ``done`` holds results of steps that already ran (they
        are not run again) and ``upto`` stops after the first ``upto`` steps; the result then
        holds the steps that have run. Works inside a running event loop too (it starts none).
        """
        plan.validate_against(self.capabilities)
        started = time.perf_counter()
        run = _Run(self, plan, dict(vars or {}))
        run.results.update(done or {})
        run.execute(upto)
        ordered = {s.output_key: run.results[s.output_key] for s in plan.steps if s.output_key in run.results}
        if run.unavailable:
            if all(r.skipped is not None for r in ordered.values()):
                raise run.unavailable[0]  # nothing could be read: not an answer, partial or not
            missing = ", ".join(repr(k) for k in ordered if k in run.missing)
            run.notes.append(f"partial answer: steps {missing} could not run because a source was unavailable "
                             "(see above); the other steps' results are complete")
        return RunResult(plan, ordered, run.notes, (time.perf_counter() - started) * 1000)

    async def arun(self, plan: Plan, *, vars: Mapping[str, Any] | None = None,
                   done: Mapping[str, StepResult] | None = None, upto: int | None = None) -> RunResult:
        """``run`` on a worker thread, so the caller's event loop keeps serving others."""
        return await asyncio.to_thread(self.run, plan, vars=vars, done=done, upto=upto)

    def submit(self, fn: Any, *args: Any) -> "Future[Any]":
        """Run ``fn(*args)`` on the engine's worker threads (started on first use)."""
        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(self.MAX_WORKERS, thread_name_prefix="structq-step")
            return self._workers.submit(fn, *args)

    # --- one step ---------------------------------------------------------------------

    def prepare(
        self,
        step: Step,
        inputs: Mapping[str, StepResult],
        *,
        vars: Mapping[str, Any],
        max_rows: int | None,
        slots: Mapping[str, Any] | None = None,
    ) -> "SafeQuery":
        """Resolve the step's references from ``inputs`` (the results of the steps it
        depends on) and pass it through the sandbox (with a template plan's ``slots`` values)."""
        references = step.references(step_dialect(step, self.capabilities))
        params = {ref.text: inputs[ref.key].column_values(ref.column) for ref in references}
        if step.source == LOCAL_SOURCE:
            from structq.executors.local import local_manifest
            from structq.safety import check_sql

            return check_sql(step.query, local_manifest(_local_tables(step, inputs)), params=params,
                             vars=vars, max_rows=max_rows, slots=slots)
        manifest = self.capabilities[step.source]
        if manifest.is_search:
            from structq.safety import check_dsl

            return check_dsl(step.query, manifest, step.index, params=params, vars=vars, max_rows=max_rows,
                             slots=slots)
        from structq.safety import check_sql

        return check_sql(step.query, manifest, params=params, vars=vars, max_rows=max_rows, slots=slots)

    def execute(self, step: Step, safe: "SafeQuery", inputs: Mapping[str, StepResult]) -> "ResultSet":
        """Run a checked query on the step's executor."""
        if step.source == LOCAL_SOURCE:
            from structq.executors.local import LocalExecutor

            executor = LocalExecutor(_local_tables(step, inputs))
            try:
                return executor.run(safe)
            finally:
                executor.close()
        manifest = self.capabilities[step.source]
        return self.breaker.call(step.source, lambda: self.executors.get(manifest).run(safe))

    def intermediate_cap(self, step: Step) -> int:
        """Row cap for a step whose results feed later steps."""
        if step.source == LOCAL_SOURCE:
            from structq.capabilities.model import Limits

            return Limits().max_intermediate_rows
        return self.capabilities[step.source].limits.max_intermediate_rows


def _local_tables(step: Step, inputs: Mapping[str, StepResult]) -> dict[str, "ResultSet"]:
    """The earlier results a local step reads as tables (only steps it depends on)."""
    return {k: _as_resultset(inputs[k]) for k in step.local_inputs(list(inputs))}


def _as_resultset(result: StepResult) -> "ResultSet":
    from structq.executors.base import ResultSet

    return ResultSet(columns=result.columns, rows=result.rows, truncated=result.truncated)


class _Run:
    """The state of one plan run: results so far, notes, and the scheduling of steps.

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
        self.read_as_tables = plan.read_as_tables()
        self.results: dict[str, StepResult] = {}
        self.notes: list[str] = []
        #: Why steps could not run (a source down or timing out), in the order it happened.
        self.unavailable: list[StructqError] = []
        #: Those steps and every step downstream of them: their results are unknown.
        self.missing: set[str] = set()

    def execute(self, upto: int | None = None) -> None:
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
        engine = self.engine
        cap = engine.intermediate_cap(step) if step.output_key in self.consumed else None
        try:
            template = self.plan.template
            safe = engine.prepare(step, inputs, vars=self.vars, max_rows=cap,
                                  slots=template.params if template is not None else None)
            result = engine.execute(step, safe, inputs)
        except UNAVAILABLE as exc:  # this part of the answer is missing; the rest still runs
            _attach_step(exc, step.output_key)
            self.unavailable.append(exc)
            self.missing.add(step.output_key)
            return _skipped(step, f"not run: {exc.message}")
        except StructqError as exc:
            _attach_step(exc, step.output_key)
            raise
        except Exception as exc:  # an executor bug must still say which step failed
            raise ExecutionError(f"step {step.output_key!r} failed: {exc}", source=step.source,
                                 step=step.output_key) from exc
        return StepResult(
            output_key=step.output_key,
            source=step.source,
            purpose=step.purpose,
            index=step.index,
            query=result.query if result.query is not None else (safe.sent_text if safe.kind == "sql" else safe.body),
            params=dict(safe.params),
            columns=tuple(result.columns),
            rows=list(result.rows),
            truncated=result.truncated,
            elapsed_ms=result.elapsed_ms,
            notes=tuple(result.notes),
        )


def _column_index(columns: tuple[str, ...], name: str) -> int | None:
    """Where column ``name`` is: spelled exactly, or else the one column spelled the same
    without regard to case (PostgreSQL folds ``sbCustId`` to ``sbcustid``, and a plan's
    reference may be written either way)."""
    if name in columns:
        return columns.index(name)
    folded = [i for i, column in enumerate(columns) if column.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _purpose(result: StepResult) -> str:
    return f" ({result.purpose})" if result.purpose else ""


def _skipped(step: Step, reason: str) -> StepResult:
    return StepResult(output_key=step.output_key, source=step.source, purpose=step.purpose,
                      index=step.index, skipped=reason)


def _attach_step(exc: StructqError, key: str) -> None:
    if getattr(exc, "step", None) is None:
        try:
            exc.step = key  # type: ignore[attr-defined]
        except AttributeError:
            pass


def _bounded_count(result: StepResult) -> bool:
    """A search count that stopped at its bound: its own note says "at least N", and "truncated
    at 1 rows" would misread it."""
    return result.columns == ("count",) and result.row_count == 1 and bool(result.notes)
