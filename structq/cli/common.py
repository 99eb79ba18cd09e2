"""What every command shares: option types, loading manifests, error → exit code, output.

Exit codes (documented in docs/cli.md): 0 ok, 1 the answer/check failed, 2 usage,
3 configuration (manifests, model, URLs), 4 a source unavailable.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from structq.capabilities import CapabilitySet

from structq.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE  # noqa: F401 (re-exported)

#: click's usage errors and exits pass through ``errors_to_exit`` untouched. typer vendors click
#: in recent versions and uses it in older ones; its own exception names the right class.
_CLICK_EXITS = (typer.Exit, typer.Abort, *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"))

ManifestsOpt = Annotated[
    Path,
    typer.Option("-m", "--manifests", help="Manifest file or folder of manifests.", envvar="STRUCTQ_MANIFESTS"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (stable schema, see docs/cli.md).")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Show tracebacks and debug detail.")]
VarOpt = Annotated[
    list[str] | None,
    typer.Option("--var", help="A caller variable for row filters, as name=value (repeatable).", metavar="NAME=VALUE"),
]
LlmOpt = Annotated[
    str | None,
    typer.Option("--llm", help="Model as provider:model (default: $STRUCTQ_LLM, or OpenAI when OPENAI_API_KEY is set)."),
]

DEFAULT_MANIFESTS = Path("capabilities")


def bundled_manifests() -> Path:
    """The demo company's manifests shipped inside the package (or the repo's, in a checkout)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_bundled" / "capabilities", here.parent / "capabilities"):
        if candidate.is_dir():
            return candidate
    from structq.errors import ConfigError

    raise ConfigError("the bundled demo manifests are missing from this installation",
                      hint='reinstall structq (pip install --force-reinstall "structq[embedded]"), or pass -m PATH')


def resolve_manifests(path: Path) -> Path:
    """``./capabilities`` when it exists, else the bundled demo manifests (so the demo works anywhere)."""
    if path == DEFAULT_MANIFESTS and not path.exists():
        return bundled_manifests()
    return path


def load_capabilities(path: Path) -> "CapabilitySet":
    from structq.capabilities import CapabilitySet

    return CapabilitySet.from_path(resolve_manifests(path))


def parse_vars(pairs: list[str] | None) -> dict[str, Any]:
    """``["tenant_id=7"]`` → ``{"tenant_id": 7}``.

    A value becomes a number only when writing the number back gives the same text (``7``,
    ``-3``, ``2.5``); ``007``, ``1_000``, ``1e3`` and ``nan`` stay text, since a guessed type
    would make a filter silently match nothing.
    """
    out: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--var")
        out[name.strip()] = _number_or_text(value)
    return out


def _number_or_text(value: str) -> Any:
    if re.fullmatch(r"-?(0|[1-9][0-9]*)", value):
        return int(value)
    if re.fullmatch(r"-?(0|[1-9][0-9]*)\.[0-9]+", value) and repr(float(value)) == value:
        return float(value)
    return value


#: Width when the output is not a terminal: lines are never wrapped for a pipe or a file, so
#: ``grep`` and ``cut`` see whole rows (panels shrink to their content; see ``render.panel``).
PIPE_WIDTH = 10_000


def console(stderr: bool = False) -> "Console":
    """Rich output for a terminal; for a pipe or a file, no colour codes and no wrapping."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    if out.is_terminal:
        return out
    return Console(stderr=stderr, highlight=False, width=PIPE_WIDTH, color_system=None, emoji=False)


def plain_when_piped(app: typer.Typer) -> None:
    """Help and usage errors as plain text when stdout or stderr is not a terminal: no boxes,
    no colour codes, and no help text cut to fit a box (rich crops wrapped CJK lines)."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        app.rich_markup_mode = None


def print_json(document: Any) -> None:
    """Machine output: one JSON document on stdout, UTF-8, no colour."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n")


def exit_code_for(exc: BaseException) -> int:
    """The exit code for ``exc`` (``structq.errors.REPORTED_AS``); 1 for anything else."""
    from structq.errors import StructqError, reported_as

    return reported_as(exc)[0] if isinstance(exc, StructqError) else EXIT_FAILED


def fail(message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> NoReturn:
    """One clear line on stderr, then exit."""
    text = f"structq: error: {message}"
    if hint:
        text += f"\n  hint: {hint}"
    sys.stderr.write(text + "\n")
    raise typer.Exit(code)


@contextmanager
def errors_to_exit(verbose: bool = False) -> Iterator[None]:
    """Turn structq errors into one line and an exit code; a traceback only with ``-v``."""
    from structq.errors import StructqError, describe

    try:
        yield
    except StructqError as exc:
        _traceback_if(verbose)
        message, hint = describe(exc)
        fail(message, hint=_demo_hint(message) or hint, code=exit_code_for(exc))
    except _CLICK_EXITS:
        raise
    except BrokenPipeError:  # `structq … | head` stopped reading: nothing left to say
        raise typer.Exit(EXIT_FAILED) from None
    except OSError as exc:  # a file or folder the command was pointed at
        _traceback_if(verbose)
        where = f" {exc.filename}" if exc.filename else ""
        fail(f"cannot use{where}: {exc.strerror or exc}", hint="check the path and its permissions", code=EXIT_FAILED)
    except Exception as exc:  # a bug: still one line, the traceback only on request
        _traceback_if(verbose)
        fail(f"unexpected {type(exc).__name__}: {exc}",
             hint="run again with -v for the traceback, and please report it", code=EXIT_FAILED)


def _demo_hint(message: str) -> str | None:
    """When a source is unusable because the demo data was never built, say how to build it
    (not "check that the server is running")."""
    from structq.config import default_demo_dir
    from structq.demo import DATABASE_NAME

    folder = default_demo_dir()
    if str(folder) not in message or (folder / DATABASE_NAME).exists():
        return None
    return (f"the demo data is not built yet in {folder}: run `structq demo` first "
            "(or point STRUCTQ_DEMO_DIR at a folder where it was built)")


def _traceback_if(verbose: bool) -> None:
    if verbose or os.environ.get("STRUCTQ_DEBUG"):
        import traceback

        traceback.print_exc()


TodayOpt = Annotated[
    str | None,
    typer.Option("--today", help="Resolve relative dates (去年, last quarter) against this date, YYYY-MM-DD.", metavar="YYYY-MM-DD"),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the plan cache.")]
AdaptiveOpt = Annotated[bool, typer.Option(
    "--adaptive", help="Run the plan step by step; after each step the model may continue, revise the "
                       "remaining steps or stop (one extra model call per step; STRUCTQ_ADAPTIVE=1).")]


def parse_today(value: str | None):
    """``--today`` as a date, or None for the real today."""
    if value is None:
        return None
    import datetime as dt

    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date like 2026-11-30", param_hint="--today") from None


def make_agent(manifests: Path, llm: str | None, *, no_cache: bool = False, adaptive: bool = False,
               fallback: str | None = None):
    """An ``Agent`` for the CLI: manifests, model spec (resolved lazily), settings from the environment."""
    from structq.agent import Agent
    from structq.config import Settings

    settings = Settings.from_env(llm=llm, cache_enabled=False if no_cache else None, adaptive=adaptive or None,
                                 fallback=fallback)
    return Agent(load_capabilities(manifests), settings=settings)


#: The options several commands take, declared once: name → (annotated type, default).
SHARED_OPTIONS: dict[str, tuple[Any, Any]] = {
    "manifests": (ManifestsOpt, DEFAULT_MANIFESTS),
    "llm": (LlmOpt, None),
    "var": (VarOpt, None),
    "today": (TodayOpt, None),
    "no_cache": (NoCacheOpt, False),
    "adaptive": (AdaptiveOpt, False),
    "json_out": (JsonOpt, False),
    "verbose": (VerboseOpt, False),
}

_Command = TypeVar("_Command", bound=Callable[..., Any])


def shared_options(command: _Command) -> _Command:
    """Give a command's bare keyword-only parameters named in ``SHARED_OPTIONS`` their option.

    ``def chat(*, manifests, llm, verbose)`` gets ``-m/--manifests``, ``--llm`` and ``-v`` with
    the same help, environment variable and default as every other command, in the order the
    command lists them; a parameter that has its own annotation or default keeps it.
    """
    signature = inspect.signature(command, eval_str=True)
    params = []
    for param in signature.parameters.values():
        bare = param.annotation is param.empty and param.default is param.empty
        if bare and param.kind is param.KEYWORD_ONLY and param.name in SHARED_OPTIONS:
            annotation, default = SHARED_OPTIONS[param.name]
            param = param.replace(annotation=annotation, default=default)
        elif bare:
            raise TypeError(f"{command.__name__}: parameter {param.name!r} has neither a type nor an option; "
                            f"shared options are keyword-only and one of {sorted(SHARED_OPTIONS)}")
        params.append(param)
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command
