"""``structq cache``: look at or clear the plan cache, the kept data of large manifests and the
kept linking indexes."""

import typer

from .common import JsonOpt, console, errors_to_exit, print_json

cache_app = typer.Typer(
    help="The plan cache (plans the model wrote that ran successfully), the kept data of large\n"
         "manifests (read back instead of parsing an unchanged file again) and the kept linking\n"
         "indexes (read back instead of building one for an unchanged catalogue).\n\n"
         "Example:  structq cache info --json",
    no_args_is_help=True,
)


def _plans_path():
    from structq.config import user_cache_dir

    return user_cache_dir() / "plans.sqlite"


def _cache():
    from structq.agent.cache import PlanCache

    return PlanCache(_plans_path())


def _report(json_out: bool, *caches: tuple[str, int, str]) -> None:
    """Each cache's figure and folder: ``(key, count, words)`` as JSON keys or as lines, in the
    order plans, manifests, linking indexes."""
    from structq.capabilities import manifest_cache
    from structq.linking import persist

    folders = (str(_plans_path()), str(manifest_cache.folder()), str(persist.folder()))
    if json_out:
        (plans, manifests, linking) = caches
        print_json({plans[0]: plans[1], "path": folders[0], manifests[0]: manifests[1], "manifests_path": folders[1],
                    linking[0]: linking[1], "linking_path": folders[2]})
        return
    for (_, count, words), folder in zip(caches, folders):
        console().print(words.format(count=count, folder=folder))


@cache_app.command("clear")
def clear(json_out: JsonOpt = False) -> None:
    """Forget every cached plan, every large manifest's kept data and every kept linking index.

    Example:  structq cache clear
    """
    from structq.capabilities import manifest_cache
    from structq.linking import persist

    with errors_to_exit():
        removed, manifests, linking = _cache().clear(), manifest_cache.clear(), persist.clear()
    _report(json_out, ("removed", removed, "removed {count} cached plans from {folder}"),
            ("manifests_removed", manifests, "removed {count} kept manifests from {folder}"),
            ("linking_removed", linking, "removed {count} kept linking indexes from {folder}"))


@cache_app.command("info")
def info(json_out: JsonOpt = False) -> None:
    """Where the caches are and how much each holds.

    Example:  structq cache info
    """
    from structq.capabilities import manifest_cache
    from structq.linking import persist

    with errors_to_exit():
        plans, manifests, linking = len(_cache()), manifest_cache.entries(), persist.entries()
    _report(json_out, ("plans", plans, "{count} cached plans in {folder}"),
            ("manifests", manifests, "{count} kept manifests in {folder}"),
            ("linking", linking, "{count} kept linking indexes in {folder}"))
