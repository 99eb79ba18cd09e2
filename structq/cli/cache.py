"""``structq cache``: look at or clear the plan cache and the kept data of large manifests."""

from __future__ import annotations

import typer

from .common import JsonOpt, console, errors_to_exit, print_json

cache_app = typer.Typer(
    help="The plan cache (plans the model wrote that ran successfully) and the kept data of large\n"
         "manifests (read back instead of parsing an unchanged file again).\n\nExample:  structq cache info --json",
    no_args_is_help=True,
)


def _cache():
    from structq.agent.cache import PlanCache
    from structq.config import user_cache_dir

    return PlanCache(user_cache_dir() / "plans.sqlite")


@cache_app.command("clear")
def clear(json_out: JsonOpt = False) -> None:
    """Forget every cached plan and every large manifest's kept data.

    Example:  structq cache clear
    """
    from structq.capabilities import manifest_cache

    with errors_to_exit():
        cache = _cache()
        removed = cache.clear()
        manifests = manifest_cache.clear()
    if json_out:
        print_json({"removed": removed, "path": str(cache.path),
                    "manifests_removed": manifests, "manifests_path": str(manifest_cache.folder())})
    else:
        console().print(f"removed {removed} cached plans from {cache.path}")
        console().print(f"removed {manifests} kept manifests from {manifest_cache.folder()}")


@cache_app.command("info")
def info(json_out: JsonOpt = False) -> None:
    """Where the caches are and how much each holds.

    Example:  structq cache info
    """
    from structq.capabilities import manifest_cache

    with errors_to_exit():
        cache = _cache()
        plans = len(cache)
        manifests = manifest_cache.entries()
    if json_out:
        print_json({"plans": plans, "path": str(cache.path),
                    "manifests": manifests, "manifests_path": str(manifest_cache.folder())})
    else:
        console().print(f"{plans} cached plans in {cache.path}")
        console().print(f"{manifests} kept manifests in {manifest_cache.folder()}")
