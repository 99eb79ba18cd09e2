"""``structq cache``: look at or clear the plan cache."""

from __future__ import annotations

import typer

from .common import JsonOpt, console, errors_to_exit, print_json

cache_app = typer.Typer(
    help="The plan cache (plans the model wrote that ran successfully).\n\nExample:  structq cache info --json",
    no_args_is_help=True,
)


def _cache():
    from structq.agent.cache import PlanCache
    from structq.config import user_cache_dir

    return PlanCache(user_cache_dir() / "plans.sqlite")


@cache_app.command("clear")
def clear(json_out: JsonOpt = False) -> None:
    """Forget every cached plan.

    Example:  structq cache clear
    """
    with errors_to_exit():
        cache = _cache()
        removed = cache.clear()
    if json_out:
        print_json({"removed": removed, "path": str(cache.path)})
    else:
        console().print(f"removed {removed} cached plans from {cache.path}")


@cache_app.command("info")
def info(json_out: JsonOpt = False) -> None:
    """Where the cache is and how many plans it holds.

    Example:  structq cache info
    """
    with errors_to_exit():
        cache = _cache()
        plans = len(cache)
    if json_out:
        print_json({"plans": plans, "path": str(cache.path)})
    else:
        console().print(f"{plans} cached plans in {cache.path}")
