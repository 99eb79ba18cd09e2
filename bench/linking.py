"""Schema linking on large catalogues: does the pruned prompt keep what the gold SQL reads?

For each corpus, every database is loaded at once as one capability set (the question's
database is not given), each question goes through ``structq.linking.select``, and the tables
and columns its gold SQL reads (parsed with sqlglot; aliases resolved, an unqualified column
credited to the gold tables that have it) are looked up in the kept sub-catalogue.

Corpora (from ../shared/corpora/legit; a missing one is skipped with a note):
- spider_en: dev questions (1,034) over all 206 databases of ``test_tables.json``
  (1,056 tables), names only — no descriptions, as ``structq sync`` would write them;
- spider_de: the German dev questions over its 20 dev databases (from ``tables.json``; small
  enough not to be pruned), and over all 166 databases of ``tables.json`` (851 tables);
- bird: mini-dev sqlite (500), question + evidence, the 11 schemas with their column comments;
- defog: questions_gen_sqlite + instruct_* over the 11 databases, with column descriptions;
- demo: the bundled manifests' verified examples and ``capabilities/eval.yaml`` (Chinese);
- en_de (cross-language): English Spider dev questions over the German-named dev databases of
  spider_de, with Spider's English test databases as neighbours (the dev ones left out);
- zh (cross-language): the Chinese questions of ``bench/linking_zh.json`` (written for this
  benchmark, gold SQL from Spider dev) over all 206 test databases, and the same questions in
  Spider's English as the control.

Figures per corpus: mean gold-table recall, mean gold-column recall, share of questions with all
gold tables kept, prompt tokens (estimated: ASCII at 4 characters a token, other characters 1
each — ``structq.linking.entities.estimate_tokens``) of the pruned catalogue against the full
one, and linking time p50/p95, wall clock and the thread's CPU time (the CPU time does not
count waiting for a core, so it stays meaningful on a busy machine; value index not built:
the corpora have no data here).

Confidence and routing: ``flagged`` is the share linking marks not confident, ``kept|flg`` the
share that kept every gold table or was flagged (the cross-language target), ``routed`` the
share keeping every gold table once each flagged question has had its one routing call,
answered by a scripted router that knows the gold (``gold_router``: the gold sources, and the
gold tables' and columns' names as the translated terms), ``calls/q`` the extra model calls per
question, ``route tk`` the routing prompt's estimated tokens.

The ``langchain`` column is LangChain's ``SQLDatabase.get_table_info()`` (CREATE TABLE plus 3
sample rows per table) over every database of the corpus, in the same token estimate, when
``langchain_community`` is importable: on the real SQLite files of spider_de and defog; on
empty SQLite files created from the schema for spider_en and BIRD (no data here, so DDL only —
an undercount of what it costs on real data).

Corpora are loaded by ``bench/linking_corpora.py``.

Synthetic catalogues (``--synthetic N[,N...]``): N generated tables, 100 to a source, with FK
references and descriptions drawn from a small vocabulary (so every word is common: the hard
case for bounded candidate sets); figures: the index's build time, writing it to the on-disk
cache (``structq.linking.persist``), loading it back as the next process would, its file size,
linking p50/p95 per question on the warm index (wall clock and the thread's CPU time), and
linking the catalogue again after one manifest changed, with the previous parts held in memory
and read from disk (``structq.linking.parts``; how many parts were built). Then, unless
``--no-process``, whole processes: ``structq plan QUESTION --explain-linking --json`` over the
catalogue written as manifest files, cold (empty cache folder) and warm (median of three), wall
seconds, CPU seconds and peak RSS (``getrusage(RUSAGE_CHILDREN)`` in a small process of its
own), and the warm 5,000 ÷ warm 100 ratio. No model is called. Figures only, no thresholds.

Run: ``python bench/linking.py [spider_en|spider_de|bird|defog|demo|en_de|zh ...] [--misses]``
or ``python bench/linking.py --synthetic 100,1000,5000,10000 [--no-process]``
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from structq.capabilities import CapabilitySet, Manifest
from structq.linking import Budget, LinkingIndex, linking_index, persist, select
from structq.linking import parts as parts_module
from structq.linking.entities import estimate_tokens
from structq.linking.route import Route, routing_prompt

from figures import percentile

from linking_corpora import CORPUS_LOADERS, Item


def gold(item: Item, capabilities: CapabilitySet) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]] | None:
    """((source, table), (source, table, column)) every part reads, lower-cased; None when one does not parse."""
    tables: set[tuple[str, str]] = set()
    columns: set[tuple[str, str, str]] = set()
    parts = [(item.source, item.sql, None)] if item.sql is not None else []
    for source, sql, index in [*parts, *item.more]:
        if index is not None:
            tables.add((source, index.lower()))
            continue
        found = _gold_sql(source, sql or "", item.dialect, capabilities)
        if found is None:
            return None
        tables |= {(source, t) for t in found[0]}
        columns |= {(source, t, c) for t, c in found[1]}
    return tables, columns


def _gold_sql(source: str, sql: str, dialect: str, capabilities: CapabilitySet) -> tuple[set[str], set[tuple[str, str]]] | None:
    manifest = capabilities.get(source)
    if manifest is None:
        return None
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None
    if tree is None:
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    alias: dict[str, str] = {}
    tables: set[str] = set()
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if name in ctes or manifest.table(name) is None:
            continue
        tables.add(name)
        alias[t.alias_or_name.lower()] = name
        alias[name] = name
    columns: set[tuple[str, str]] = set()
    for c in tree.find_all(exp.Column):
        cname = c.name.lower()
        owners = [alias[c.table.lower()]] if c.table and c.table.lower() in alias else sorted(tables)
        for owner in owners:
            table = manifest.table(owner)
            if table is not None and table.column(cname) is not None:
                columns.add((owner, cname))
                break
    return tables, columns


# --- running ------------------------------------------------------------------------------------


def langchain_tokens(paths: list[Path]) -> int | None:
    """Estimated tokens of ``SQLDatabase.get_table_info()`` summed over the databases, if available."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_community.utilities import SQLDatabase
    except ImportError:
        return None
    total = 0
    for path in paths:
        db = SQLDatabase.from_uri(f"sqlite:///{path}", sample_rows_in_table_info=3)
        total += estimate_tokens(db.get_table_info())
    return total


@dataclass
class Figures:
    corpus: str
    questions: int
    tables: int
    table_recall: float
    column_recall: float
    all_tables: float
    tokens: float
    full_tokens: int
    p50_ms: float
    p95_ms: float
    cpu_p50_ms: float
    cpu_p95_ms: float
    langchain: int | None = None
    flagged: float = 0.0  # share of questions linking flagged as not confident
    kept_or_flagged: float = 0.0  # share that kept every gold table, or was flagged
    routed_kept: float = 0.0  # share keeping every gold table after the (scripted) routing call
    calls: float = 0.0  # extra model calls per question (routing)
    route_tokens: float = 0.0  # mean estimated tokens of a routing prompt, over routed questions


def gold_router(tables: set[tuple[str, str]], columns: set[tuple[str, str, str]]) -> Route:
    """What a router that knows the answer says: the gold sources, and as terms the gold tables'
    and columns' names (the question's words in the catalogue's language) — not the tables
    themselves, so linking still has to rank them."""
    terms = sorted({t for _, t in tables} | {c for _, _, c in columns})
    return Route(tuple(sorted({s for s, _ in tables})), (), tuple(terms[:12]))


def measure(corpus: str, capabilities: CapabilitySet, items: list[Item], budget: Budget | None = None,
            misses: list[str] | None = None, databases: list[Path] | None = None) -> Figures:
    started = time.perf_counter()
    index = linking_index(capabilities)
    build_s = time.perf_counter() - started
    full_tokens = estimate_tokens(capabilities.render())
    t_rec, c_rec, whole, toks, times, cpu_times, flagged = [], [], [], [], [], [], []
    routed_whole, route_toks = [], []
    for item in items:
        found = gold(item, capabilities)
        if found is None or not found[0]:
            continue
        tables, columns = found
        cpu = time.thread_time()
        sel = select(item.question, capabilities, budget=budget)
        cpu_times.append((time.thread_time() - cpu) * 1000)
        times.append(sel.seconds * 1000)
        toks.append(sel.tokens)
        kept_t = [t for t in tables if sel.keeps(*t)]
        kept_c = [c for c in columns if sel.keeps(*c)]
        t_rec.append(len(kept_t) / len(tables))
        c_rec.append(len(kept_c) / len(columns) if columns else 1.0)
        whole.append(len(kept_t) == len(tables))
        flagged.append(not sel.confident)
        if sel.confident:
            routed_whole.append(whole[-1])
        else:  # one routing call, answered by the gold router
            route_toks.append(estimate_tokens(routing_prompt(item.question, capabilities, sel.confidence, sel.budget.route_tokens)))
            routed = select(item.question, capabilities, budget=budget, route=gold_router(tables, columns))
            routed_whole.append(all(routed.keeps(*t) for t in tables))
        if misses is not None and len(kept_t) < len(tables):
            misses.append(f"{item.source}: {item.question[:150]} | missing {sorted(set(tables) - set(kept_t))} | kept "
                          f"{[k.entity.label for k in list(sel.kept.values())[:6]]}")
    times.sort()
    cpu_times.sort()
    print(f"  ({corpus}: index built in {build_s:.2f} s)", file=sys.stderr)
    return Figures(corpus, len(t_rec), len(index.entities), statistics.mean(t_rec), statistics.mean(c_rec),
                   statistics.mean(whole), statistics.mean(toks), full_tokens,
                   times[len(times) // 2], times[int(len(times) * 0.95)],
                   cpu_times[len(cpu_times) // 2], cpu_times[int(len(cpu_times) * 0.95)],
                   langchain_tokens(databases) if databases else None,
                   statistics.mean(flagged), statistics.mean(w or f for w, f in zip(whole, flagged)),
                   statistics.mean(routed_whole), statistics.mean(flagged),
                   statistics.mean(route_toks) if route_toks else 0.0)


BUDGETS = {"demo @1200": Budget(prompt_tokens=1200, linked_tokens=1200)}


def print_table(rows: list[Figures]) -> None:
    header = (f"{'corpus':<16} {'questions':>9} {'tables':>6} {'table rec':>9} {'col rec':>8} {'all tbls':>8} "
              f"{'flagged':>7} {'kept|flg':>8} {'routed':>7} {'calls/q':>7} {'route tk':>8} {'tokens':>7} {'full':>7} {'share':>6} {'langchain':>9} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} {'cpu p95':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.corpus:<16} {r.questions:>9} {r.tables:>6} {r.table_recall:>9.3f} {r.column_recall:>8.3f} "
              f"{r.all_tables:>8.1%} {r.flagged:>7.1%} {r.kept_or_flagged:>8.1%} {r.routed_kept:>7.1%} {r.calls:>7.2f} {r.route_tokens:>8.0f} {r.tokens:>7.0f} {r.full_tokens:>7} {r.tokens / r.full_tokens:>6.1%} "
              f"{r.langchain if r.langchain is not None else 'n/a':>9} "
              f"{r.p50_ms:>7.2f} {r.p95_ms:>7.2f} {r.cpu_p50_ms:>7.2f} {r.cpu_p95_ms:>7.2f}")


WORDS = ("customer order invoice payment product shipment supplier warehouse employee department region "
         "contract ticket campaign account ledger budget project asset vehicle route store return refund "
         "coupon review session device license audit").split()


def synthetic_manifests(tables: int, seed: int = 7) -> tuple[list[dict], list[str]]:
    """``tables`` generated tables (100 to a source), as manifest documents, and questions naming some of them."""
    rng = random.Random(seed)
    manifests, names = [], []
    for first in range(0, tables, 100):
        rows: list[dict] = []
        for i in range(first, min(first + 100, tables)):
            a, b = rng.sample(WORDS, 2)
            name = f"{a}_{b}_{i}"
            names.append((a, b))
            columns = [{"name": "id", "type": "integer", "primary_key": True},
                       {"name": f"{rng.choice(WORDS)}_amount", "type": "numeric", "description": f"{a} {rng.choice(WORDS)} total"},
                       {"name": "status", "type": "text", "description": f"state of the {b}"},
                       {"name": "created_at", "type": "datetime"}]
            if i > first:
                columns.append({"name": "parent_id", "type": "integer", "references": f"{rows[-1]['name']}.id"})
            rows.append({"name": name, "description": f"{a} {b} records of {rng.choice(WORDS)}", "columns": columns})
        manifests.append({"source": f"s{first // 100}", "kind": "sql", "url": "sqlite://", "tables": rows})
    questions = [f"total {a} amount per {b} status last month" for a, b in rng.sample(names, min(50, len(names)))]
    return manifests, questions


def synthetic_catalogue(tables: int, seed: int = 7) -> tuple[CapabilitySet, list[str]]:
    """``synthetic_manifests`` loaded as a capability set."""
    manifests, questions = synthetic_manifests(tables, seed)
    return CapabilitySet([Manifest.model_validate(m) for m in manifests]), questions


def _not_kept() -> LinkingIndex:
    raise SystemExit("the index was not read back from the cache")


def _with_one_change(size: int, manifest: int, seed: int = 7) -> CapabilitySet:
    """The synthetic catalogue of ``size`` with one table's description changed in manifest number ``manifest``."""
    manifests, _ = synthetic_manifests(size, seed)
    table = manifests[manifest]["tables"][0]
    table["description"] += f" (revised {manifest})"
    return CapabilitySet([Manifest.model_validate(m) for m in manifests])


def _relink(capabilities: CapabilitySet) -> tuple[float, int]:
    """Seconds to link ``capabilities`` (a catalogue never seen whole) and the parts built for it."""
    before = parts_module.built
    started = time.perf_counter()
    linking_index(capabilities)
    return time.perf_counter() - started, parts_module.built - before


def synthetic(sizes: list[int]) -> None:
    """Build, keep, load back, link over and change one manifest of synthetic catalogues of each size (figures only).

    ``1 changed`` is linking the catalogue with one manifest changed while this process holds the
    parts of the previous version; ``from disk`` the same with the parts read from the cache
    folder, as the next command does."""
    print(f"{'tables':>7} {'build s':>8} {'write s':>8} {'load s':>8} {'file MiB':>9} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'cpu p50':>7} {'cpu p95':>7} {'1 changed s':>11} {'from disk s':>11} {'parts built':>11}")
    os.environ.pop("STRUCTQ_CACHE", None)
    for size in sizes:
        with tempfile.TemporaryDirectory() as cache:  # one per size: the catalogues share their first manifests
            os.environ["STRUCTQ_CACHE_DIR"] = cache
            parts_module._HELD = {}  # nor the parts of the previous size
            capabilities, questions = synthetic_catalogue(size)
            fingerprint = capabilities.fingerprint()
            started = time.perf_counter()
            built = LinkingIndex.build(capabilities)
            build = time.perf_counter() - started
            started = time.perf_counter()
            persist.cached(fingerprint, lambda: built, LinkingIndex)  # nothing kept yet: writes it
            write = time.perf_counter() - started
            started = time.perf_counter()
            persist.cached(fingerprint, _not_kept, LinkingIndex)
            load = time.perf_counter() - started
            entry = persist.entry_path(fingerprint)
            mib = entry.stat().st_size / 2**20 if entry else 0.0
            linking_index(capabilities)  # warm, as a command after the load
            times, cpu_times = [], []
            for question in questions:
                started, cpu = time.perf_counter(), time.thread_time()
                select(question, capabilities)
                times.append((time.perf_counter() - started) * 1000)
                cpu_times.append((time.thread_time() - cpu) * 1000)
            parts_module.parts(capabilities)  # every part held and kept, as after a first command
            changed, changed_built = _relink(_with_one_change(size, 0))
            parts_module._HELD = {}  # a new process: the parts are on disk only
            from_disk, disk_built = _relink(_with_one_change(size, len(capabilities) - 1))
            print(f"{size:>7} {build:>8.2f} {write:>8.2f} {load:>8.2f} {mib:>9.1f} {percentile(times, 50):>7.2f} "
                  f"{percentile(times, 95):>7.2f} {percentile(cpu_times, 50):>7.2f} {percentile(cpu_times, 95):>7.2f} "
                  f"{changed:>11.2f} {from_disk:>11.2f} {f'{changed_built}, {disk_built} of {len(capabilities)}':>11}")


#: Runs a command from a process of its own (so no memory of this one is counted) and prints its wall
#: seconds, its CPU seconds and its peak resident memory (kB) — ``getrusage(RUSAGE_CHILDREN)`` — as the last line.
_TIMED = ("import resource, subprocess, sys, time; started = time.perf_counter(); "
          "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
          "usage = resource.getrusage(resource.RUSAGE_CHILDREN); "
          "print(time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)")


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak resident memory (MiB) of one process running ``command``."""
    done = subprocess.run([sys.executable, "-S", "-c", _TIMED, *command], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[:4])} … failed: {done.stderr[-2000:]}")
    seconds, cpu, peak = done.stdout.split()[-3:]
    return float(seconds), float(cpu), int(peak) / 1024


#: Warm runs per size: the figure printed is their median.
WARM_RUNS = 3
#: Rounds of the warm 5,000 ÷ warm 100 ratio, each running the two one after the other.
RATIO_ROUNDS = 5


def _plan_command(size: int, root: Path) -> tuple[list[str], dict[str, str]]:
    """``structq plan --explain-linking`` over the synthetic catalogue of ``size`` written under ``root``."""
    manifests, questions = synthetic_manifests(size)
    catalogue, cache = root / f"catalogue-{size}", root / f"cache-{size}"
    catalogue.mkdir()
    for m in manifests:  # JSON is YAML, and much faster to write
        (catalogue / f"{m['source']}.yaml").write_text(json.dumps(m), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("STRUCTQ_CACHE", "STRUCTQ_LLM")}
    here = Path(__file__).resolve().parent.parent
    env.update(STRUCTQ_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(
        [str(here), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return [sys.executable, "-m", "structq", "plan", questions[0], "--explain-linking", "--json",
            "-m", str(catalogue)], env


def whole_process(sizes: list[int]) -> None:
    """``structq plan --explain-linking`` as a user runs it: a new process over a folder of manifests,
    cold (nothing kept: manifests parsed, index built and kept) and warm (both read back). The
    warm 5,000 ÷ warm 100 ratio is taken round by round, the two runs next to each other, so a
    change in the machine's load between sizes does not enter it."""
    print(f"\nwhole process: structq plan --explain-linking --json (warm: median of {WARM_RUNS}; "
          "cpu: the process's user + system seconds)")
    print(f"{'tables':>7} {'cold s':>7} {'cold cpu':>8} {'cold MiB':>9} {'warm s':>7} {'warm cpu':>8} {'warm MiB':>9}")
    with tempfile.TemporaryDirectory() as folder:
        commands = {}
        for size in sizes:
            commands[size] = command, env = _plan_command(size, Path(folder))
            cold = _run(command, env)
            runs = sorted(_run(command, env) for _ in range(WARM_RUNS))
            warm = runs[len(runs) // 2]
            print(f"{size:>7} {cold[0]:>7.2f} {cold[1]:>8.2f} {cold[2]:>9.0f} {warm[0]:>7.2f} {warm[1]:>8.2f} "
                  f"{warm[2]:>9.0f}")
        if 100 in commands and 5000 in commands:
            walls, cpus = [], []
            for _ in range(RATIO_ROUNDS):
                small, large = _run(*commands[100]), _run(*commands[5000])
                walls.append(large[0] / small[0])
                cpus.append(large[1] / small[1])
            print(f"warm 5,000 tables ÷ warm 100 tables, {RATIO_ROUNDS} rounds: {statistics.median(walls):.2f}× wall "
                  f"[{min(walls):.2f}–{max(walls):.2f}], {statistics.median(cpus):.2f}× cpu "
                  f"[{min(cpus):.2f}–{max(cpus):.2f}] (target ≤ 3×)")


def main(argv: list[str]) -> None:
    if "--synthetic" in argv:
        sizes = [int(n) for n in argv[argv.index("--synthetic") + 1].split(",")]
        synthetic(sizes)
        if "--no-process" not in argv:
            whole_process(sizes)
        return
    names = [a for a in argv if not a.startswith("-")] or list(CORPUS_LOADERS)
    show_misses = "--misses" in argv
    rows = []
    for name in names:
        for corpus, capabilities, items, databases in CORPUS_LOADERS[name]():
            misses: list[str] = []
            rows.append(measure(corpus, capabilities, items, BUDGETS.get(corpus), misses=misses, databases=databases))
            if show_misses:
                print("\n".join(misses[:80]), file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
