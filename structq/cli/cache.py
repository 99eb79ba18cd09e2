"""``structq cache``: look at or clear the plan cache and the kept data of large manifests."""

from __future__ import annotations

import typer

from .common import JsonOpt, console, errors_to_exit, print_json

cache_app = typer.Typer(
    help="The plan cache (plans the model wrote that ran successfully) and the kept data of large\n"
         "manifests (read back instead of parsing an unchanged file again).\n\nExample:  structq cache info --json",
    no_args_is_help=True,
)


def _plans_path():
    from structq.config import user_cache_dir

    return user_cache_dir() / "plans.sqlite"


def _cache():
    from structq.agent.cache import PlanCache

    return PlanCache(_plans_path())


def _report(json_out: bool, plans: tuple[str, int, str], manifests: tuple[str, int, str]) -> None:
    """Each cache's figure and folder: ``(key, count, words)`` as JSON keys or as lines."""
    from structq.capabilities import manifest_cache

    folders = (str(_plans_path()), str(manifest_cache.folder()))
    if json_out:
        print_json({plans[0]: plans[1], "path": folders[0], manifests[0]: manifests[1], "manifests_path": folders[1]})
        return
    for (_, count, words), folder in zip((plans, manifests), folders):
        console().print(words.format(count=count, folder=folder))


@cache_app.command("clear")
def clear(json_out: JsonOpt = False) -> None:
    """Forget every cached plan and every large manifest's kept data.

    Example:  structq cache clear
    """
    from structq.capabilities import manifest_cache

    with errors_to_exit():
        removed, manifests = _cache().clear(), manifest_cache.clear()
    _report(json_out, ("removed", removed, "removed {count} cached plans from {folder}"),
            ("manifests_removed", manifests, "removed {count} kept manifests from {folder}"))


@cache_app.command("info")
def info(json_out: JsonOpt = False) -> None:
    """Where the caches are and how much each holds.

    Example:  structq cache info
    """
    from structq.capabilities import manifest_cache

    with errors_to_exit():
        plans, manifests = len(_cache()), manifest_cache.entries()
    _report(json_out, ("plans", plans, "{count} cached plans in {folder}"),
            ("manifests", manifests, "{count} kept manifests in {folder}"))
