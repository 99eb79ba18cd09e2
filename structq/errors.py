"""The exceptions structq raises.

Every failure is raised (never returned as a string) as one of these::

    StructqError
    ├── ConfigError          setup mistakes (no LLM configured, bad URL); says how to fix; not retried
    ├── ManifestError        file, line, column, message, suggestion
    ├── PlanError            invalid plan; retryable by the planner
    ├── SandboxViolation     .code (e.g. "write", "unknown_column"), message, hint; retryable
    ├── ExecutionError       source, query, cause; retryable when the query is at fault
    │   ├── SourceUnavailable    connection refused / DNS / auth; not retried by the planner
    │   └── QueryTimeout
    ├── ModelError           the LLM is unreachable, refused, or still malformed after repairs
    │   └── RepairsExhausted     the plans still failed after ``max_repairs`` repairs
    └── SynthesisError

``retryable`` separates "the planner should try again with this message" from "stop":
the repair loop sends only retryable errors back to the model.

An error knows what it is about from the moment it is made: the plan step (``step``), the
model's unusable reply (``PlanError.raw``). The sandbox and the executors do not know which
step their query came from, so the engine re-makes their error with it (``at_step``) instead
of setting an attribute on it afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

__all__ = [
    "StructqError",
    "ConfigError",
    "ManifestError",
    "PlanError",
    "SandboxViolation",
    "ExecutionError",
    "SourceUnavailable",
    "QueryTimeout",
    "ModelError",
    "RepairsExhausted",
    "SynthesisError",
    "describe",
    "reported_as",
    "REPORTED_AS",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_CONFIG",
    "EXIT_UNAVAILABLE",
]

E = TypeVar("E", bound="StructqError")


class StructqError(Exception):
    """Root of every error structq raises on purpose."""

    #: Whether the planner may send this error back to the model for a repair.
    retryable: bool = False
    #: Whether the caller may not do this at all (a source its token does not grant): never
    #: read as "no data" by a look-up that abstains on other errors.
    refuses_caller: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The constructor's arguments that made this error (``replace`` makes another from them)."""
        return (self.message,), {"hint": self.hint}

    def replace(self: E, **changes: Any) -> E:
        """A new error of the same type, made with ``changes`` to the constructor's keyword arguments."""
        args, kwargs = self._arguments()
        return type(self)(*args, **{**kwargs, **changes})


class _AtStep(StructqError):
    """An error about one plan step: ``step`` names it (None while no step is known)."""

    step: str | None

    def at_step(self: E, step: str) -> E:
        """This error as raised in plan step ``step``: itself when it already names a step,
        else a new error of the same type that does."""
        return self if self.step is not None else self.replace(step=step)  # type: ignore[attr-defined]


class ConfigError(StructqError):
    """A setup mistake: no model configured, a malformed URL, a missing extra.

    The message says exactly how to fix it.
    """


class ManifestError(StructqError):
    """A capability manifest is invalid.

    ``file``, ``line`` and ``column`` (1-based) point at the offending spot;
    ``suggestion`` is the closest valid key or name, when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        suggestion: str | None = None,
        hint: str | None = None,
    ) -> None:
        if suggestion and not hint:
            hint = f"did you mean {suggestion!r}?"
        super().__init__(message, hint=hint)
        self.file = file
        self.line = line
        self.column = column
        self.suggestion = suggestion

    @property
    def location(self) -> str:
        """``file:line:column`` as far as it is known."""
        parts = [self.file or "<manifest>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class PlanError(_AtStep):
    """A plan is invalid: unknown source, bad reference, cycle, malformed step.

    ``raw`` is the model's reply the plan was read from, when it could not be read (the repair
    prompt shows it back to the model).
    """

    retryable = True

    def __init__(self, message: str, *, step: str | None = None, hint: str | None = None,
                 raw: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.step = step
        self.raw = raw

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.message,), {"step": self.step, "hint": self.hint, "raw": self.raw}

    def __str__(self) -> str:
        text = super().__str__()
        return f"step {self.step!r}: {text}" if self.step else text


class SandboxViolation(_AtStep):
    """The sandbox refused a query.

    ``code`` is stable and machine-readable (``write``, ``multiple_statements``,
    ``unknown_table``, ``unknown_column``, ``denied_column``, ``denied_function``,
    ``enum_value``, ``missing_variable``, ``parse_error``, …); ``hint`` says what would be
    accepted instead.
    """

    retryable = True

    def __init__(
        self,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        source: str | None = None,
        step: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.source = source
        self.step = step

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.code, self.message), {"hint": self.hint, "source": self.source, "step": self.step}

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class ExecutionError(_AtStep):
    """A query failed while running. ``cause`` is the database's own message."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        query: str | None = None,
        cause: str | None = None,
        step: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.source = source
        self.query = query
        self.cause = cause
        self.step = step

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.message,), {"source": self.source, "query": self.query, "cause": self.cause,
                                 "step": self.step, "hint": self.hint}


class SourceUnavailable(ExecutionError):
    """The source could not be reached (refused, DNS, authentication). Not the query's fault."""

    retryable = False


class QueryTimeout(ExecutionError):
    """The query ran past the source's timeout and was cancelled."""

    retryable = False


class ModelError(StructqError):
    """The language model is unreachable, refused, or still malformed after the repairs."""


class Attempted(Protocol):
    """One plan the model wrote and the error it ran into (``agent.planner.Attempt``)."""

    @property
    def error(self) -> StructqError: ...

    def describe(self) -> str: ...


class RepairsExhausted(ModelError):
    """The model's plans still failed after ``max_repairs`` repairs. ``attempts`` lists them all.

    A ``ModelError`` (the model did not produce a working plan), though usually the question
    is at fault: the HTTP API answers it with 422.
    """

    def __init__(self, attempts: Sequence[Attempted]) -> None:
        listing = "\n".join(f"attempt {i}: {a.describe()}" for i, a in enumerate(attempts, 1))
        last = attempts[-1].error
        super().__init__(f"no working plan after {len(attempts)} attempts; last error: {last}\n{listing}",
                         hint="rephrase the question, or check that the manifests describe the data it needs")
        self.attempts = list(attempts)

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.attempts,), {}


class SynthesisError(StructqError):
    """Writing the answer from the results failed."""


def describe(exc: StructqError) -> tuple[str, str | None]:
    """An error's one-line message and its hint, apart, for every surface that shows errors (the
    CLI, the HTTP API). The message keeps what the error's own ``str`` adds to the bare text: the
    sandbox's ``[code]``, the plan step, the manifest's ``file:line:col`` (whose suggestion stays
    inline). It lives here, at the bottom of the layers, so the server need not import the CLI."""
    text = str(exc)
    if isinstance(exc, ManifestError) or not exc.hint:
        return text, None
    return text.removesuffix(f" (hint: {exc.hint})"), exc.hint


#: The command line's exit codes (docs/cli.md): 0 ok, 1 the answer or check failed, 2 usage,
#: 3 configuration (manifests, model, URLs), 4 a source unavailable.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CONFIG, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4

#: How each error reaches a caller: (class, CLI exit code, HTTP status, HTTP error code). The
#: first matching class decides (most specific first). One table, so that the command line and
#: the HTTP API cannot disagree about what kind of failure an error is.
REPORTED_AS: tuple[tuple[type[StructqError], int, int, str], ...] = (
    (RepairsExhausted, EXIT_CONFIG, 422, "no_working_plan"),  # a ModelError, but the question is at fault
    (SandboxViolation, EXIT_FAILED, 422, "sandbox_refused"),
    (PlanError, EXIT_FAILED, 422, "invalid_plan"),
    (QueryTimeout, EXIT_FAILED, 504, "query_timeout"),
    (SourceUnavailable, EXIT_UNAVAILABLE, 503, "source_unavailable"),
    (ExecutionError, EXIT_FAILED, 502, "query_failed"),
    (ConfigError, EXIT_CONFIG, 503, "not_configured"),
    (ManifestError, EXIT_CONFIG, 503, "not_configured"),
    (SynthesisError, EXIT_FAILED, 502, "answer_failed"),
    (ModelError, EXIT_CONFIG, 502, "model_error"),
)


def reported_as(exc: StructqError) -> tuple[int, int, str]:
    """``exc``'s row of ``REPORTED_AS`` as (exit code, HTTP status, HTTP error code); any other
    structq error failed the request (exit 1, 422 "failed")."""
    for cls, exit_code, status, code in REPORTED_AS:
        if isinstance(exc, cls):
            return exit_code, status, code
    return EXIT_FAILED, 422, "failed"
