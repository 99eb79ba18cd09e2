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
    └── SynthesisError

``retryable`` separates "the planner should try again with this message" from "stop":
the repair loop sends only retryable errors back to the model.
"""

from __future__ import annotations

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
    "SynthesisError",
    "describe",
]


class StructqError(Exception):
    """Root of every error structq raises on purpose."""

    #: Whether the planner may send this error back to the model for a repair.
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message


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


class PlanError(StructqError):
    """A plan is invalid: unknown source, bad reference, cycle, malformed step."""

    retryable = True

    def __init__(self, message: str, *, step: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.step = step

    def __str__(self) -> str:
        text = super().__str__()
        return f"step {self.step!r}: {text}" if self.step else text


class SandboxViolation(StructqError):
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

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class ExecutionError(StructqError):
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


class SourceUnavailable(ExecutionError):
    """The source could not be reached (refused, DNS, authentication). Not the query's fault."""

    retryable = False


class QueryTimeout(ExecutionError):
    """The query ran past the source's timeout and was cancelled."""

    retryable = False


class ModelError(StructqError):
    """The language model is unreachable, refused, or still malformed after the repairs."""


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
