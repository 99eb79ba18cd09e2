"""What the engine costs on top of the queries it runs.

(a) Every verified example on the demo company: the engine's wall time next to running,
    directly, the final queries each step actually ran — the sandboxed SQL text with its bound
    parameters on a plain SQLAlchemy connection, the DSL body through opensearch-py, a local
    step's SQL over the earlier rows in an in-memory SQLite — in interleaved rounds (median of
    ``--runs``, after a warm-up). Examples of at least 5 ms are marked; their target ratio is
    ≤ 1.25.

    What "direct" leaves out, so read the ratio with it: the direct side runs queries that are
    already checked and rewritten, so it never pays the sandbox. The engine pays it once per
    query (then remembers it, ``safety/sql/memo.py``): the ``engine`` column is a question asked
    again (every SQL check remembered; search bodies are still checked every run), the ``cold``
    column the same run with the SQL checks forgotten before each run — a question seen for
    the first time. The direct side also skips what the engine must do on every run: the
    read-only transaction and statement deadline, JSON-safe values, a search response turned
    into rows, and a local step's column types inferred from the rows. A later step's text
    never depends on an earlier step's values (they are bound), only on their shape (none,
    one, SQLite's cast), so the recorded query is the one the engine would run again.
(b) A step passing N = 1k / 10k / 100k ids to the next step, next to the one JOIN that asks
    the same, on SQLite and — when their servers can be started like the test-suite does
    (``tests/servers.py``) — PostgreSQL and MariaDB (once per installed driver: mysqlclient,
    PyMySQL). Target ≤ 2× at 100k.

(d) Text references: a step passing N = 100k / 1M text codes to the next step, next to the one
    JOIN on the codes, on the same databases as (b) (``--text-sizes``). Targets ≤ 2× at 100k,
    ≤ 3× at 1M; next to each, the codes read with the driver's own cursor alone (the floor
    under any plan that passes them through the client). The peak memory of one engine run at
    the largest size is read in a child process (its maximum resident set, and the growth over
    the same process before the run); on PostgreSQL also with step 1's rows read whole, as
    before they were read in chunks (``executors/sql/postgresql/stream.py``). MariaDB's buffer
    pool is raised first so that both sides run on tables held in memory (``hold_in_memory``).

(c) The fixed cost of one SQLite step: the statement-deadline guard alone around ``SELECT 1``,
    and a whole one-step engine run, with the process's one deadline thread (now) next to a
    ``threading.Timer`` started per statement (before), in interleaved rounds.

Figures only; nothing is asserted. The demo data is built into a temporary folder unless
``$STRUCTQ_DEMO_DIR`` already holds a built demo.

    python bench/engine.py [--runs 15] [--sizes 1000,10000,100000] [--rounds 31]
                           [--text-sizes 100000,1000000] [--text-runs 5]
                           [--only examples|references|text-references|step-cost]
"""

from __future__ import annotations

import argparse
import functools
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from structq.agent import Engine, Plan, PlanResult  # noqa: E402
from structq.agent.templated import TemplatePlans  # noqa: E402
from structq.agent.engine import StepResult  # noqa: E402
from structq.capabilities import CapabilitySet, Manifest  # noqa: E402
from structq.capabilities.loader import load_manifest_text  # noqa: E402
from structq.executors.search import embedded_server  # noqa: E402
# The test-suite's reference tables: ids 1…100,000 and 120,000 detail rows pointing at them.
from manifest_support import manifest_text  # noqa: E402
from test_engine import BIG, DEMO_DAY, create_reference_tables  # noqa: E402

SLOW_MS = 5.0
EXAMPLE_TARGET = 1.25
REFERENCE_TARGET = 2.0
ROWS = BIG


# ---------------------------------------------------------------------------------------------
# (a) verified examples
# ---------------------------------------------------------------------------------------------


@contextmanager
def demo_directory() -> Iterator[Path]:
    """``$STRUCTQ_DEMO_DIR`` when it holds a built demo, else a fresh build (default scale)."""
    from structq.demo import DATABASE_NAME, REPORTS_NAME, build_demo

    existing = os.environ.get("STRUCTQ_DEMO_DIR")
    if existing and (Path(existing) / DATABASE_NAME).is_file() and (Path(existing) / REPORTS_NAME).is_file():
        yield Path(existing)
        return
    with tempfile.TemporaryDirectory(prefix="structq-bench-") as tmp:
        print("building the demo company (default scale) …", flush=True)
        yield build_demo(Path(tmp)).directory


class DirectRunner:
    """Runs the queries an engine run recorded, without the engine: the baseline.

    SQL goes to one plain SQLAlchemy pool per source (no read-only guard, no
    sandbox, no threads); search to one opensearch-py client on the same embedded search server.
    """

    def __init__(self, capabilities: CapabilitySet) -> None:
        self.capabilities = capabilities
        self._sql: dict[str, Any] = {}
        self._search: Any = None

    def close(self) -> None:
        for engine in self._sql.values():
            engine.dispose()
        if self._search is not None:
            self._search.close()

    def run(self, result: PlanResult) -> None:
        """Every step of ``result`` again, in plan order, from its final query and params."""
        rows: dict[str, StepResult] = {}
        for step in result.plan.steps:
            recorded = result.steps[step.output_key]
            if step.source == "local":
                run_local(recorded, rows)
            elif self.capabilities[step.source].is_search:
                self.search(self.capabilities[step.source], recorded)
            else:
                self.sql(self.capabilities[step.source], recorded.query, recorded.params)
            rows[step.output_key] = recorded

    def sql(self, manifest: Manifest, query: str, params: Mapping[str, Any]) -> list[Any]:
        from sqlalchemy import create_engine

        engine = self._sql.get(manifest.source)
        if engine is None:
            engine = self._sql[manifest.source] = create_engine(manifest.url)
        with engine.connect() as connection:
            return connection.execute(bind_direct(query, params, engine.dialect.name), dict(params)).fetchall()

    def search(self, manifest: Manifest, recorded: StepResult) -> dict[str, Any]:
        """The recorded request body on the index the executor used (the embedded search server's
        physical name). Every example's body goes to ``search`` (none is a bare count)."""
        from opensearchpy import OpenSearch

        if self._search is None:
            self._search = OpenSearch(hosts=[embedded_server.server_url()], timeout=30)
        index = embedded_server.physical_index(manifest, recorded.index or "")
        return self._search.search(index=index, body=recorded.query)


def bind_direct(query: str, params: Mapping[str, Any], dialect: str) -> Any:
    """``text(query)``; on MySQL a list parameter expands (``IN :ids``), as the executor binds it."""
    from sqlalchemy import bindparam, text

    clause = text(query)
    if dialect in ("mysql", "mariadb"):
        lists = [bindparam(name, expanding=True) for name, value in params.items() if isinstance(value, list)]
        clause = clause.bindparams(*lists)
    return clause


def run_local(recorded: StepResult, earlier: Mapping[str, StepResult]) -> list[Any]:
    """A local step directly: earlier results loaded into a new in-memory SQLite, then its SQL."""
    connection = sqlite3.connect(":memory:")
    try:
        for key, result in earlier.items():
            columns = ", ".join(f'"{c}"' for c in result.columns)
            marks = ", ".join("?" for _ in result.columns)
            connection.execute(f'CREATE TABLE "{key}" ({columns})')
            connection.executemany(f'INSERT INTO "{key}" VALUES ({marks})', result.rows)
        return connection.execute(recorded.query, recorded.params).fetchall()
    finally:
        connection.close()


def bench_examples(runs: int) -> None:
    """Engine and direct runs of each example in interleaved rounds (engine, direct, engine
    with every check in full, …), so that the load of the shared machine falls on all three."""
    try:
        from structq.safety.sql.memo import clear as forget_checks
    except ImportError:  # before checks were remembered: every run is cold
        def forget_checks() -> None:
            pass

    with demo_directory() as directory:
        env = {**os.environ, "STRUCTQ_DEMO_DIR": str(directory)}
        capabilities = CapabilitySet.from_path(REPO / "capabilities", env=env)
        direct = DirectRunner(capabilities)
        print(f"\n(a) verified examples on the demo data — median of {runs} interleaved rounds, ms "
              f"(* = engine ≥ {SLOW_MS:g} ms; target ratio ≤ {EXAMPLE_TARGET})")
        print("   engine: the example asked again (its checks remembered, as for any repeated question);\n"
              "   cold: the same with every SQL check run in full (a question seen for the first time);\n"
              "   executors: time inside the executors in one engine run (the rest of the engine time is\n"
              "   the sandbox, reference binding and scheduling); direct: the final queries alone.")
        print(f"{'':2}{'source':<8}{'example':<34}{'steps':>5} {'engine':>8} {'cold':>8} {'executors':>9} "
              f"{'direct':>8} {'ratio':>6} {'cold':>6}  target")
        try:
            with Engine(capabilities) as engine:
                templates = TemplatePlans(capabilities, engine)
                for manifest, example in capabilities.examples():
                    plan = example_plan(templates, example)
                    recorded = engine.run(plan)

                    def cold() -> object:
                        forget_checks()
                        return engine.run(plan)

                    figures = interleaved_ms({"engine": lambda: engine.run(plan),
                                              "direct": lambda: direct.run(recorded), "cold": cold}, runs, 1)
                    engine_ms, direct_ms, cold_ms = figures["engine"], figures["direct"], figures["cold"]
                    ratio = engine_ms / direct_ms
                    slow = engine_ms >= SLOW_MS
                    verdict = ("ok" if ratio <= EXAMPLE_TARGET else "MISSED") if slow else "-"
                    print(f"{'*' if slow else ' ':2}{manifest.source:<8}{_label(example.question, 32):<34}"
                          f"{len(plan.steps):>5} {engine_ms:>8.2f} {cold_ms:>8.2f} "
                          f"{executor_ms(engine.run(plan)):>9.2f} {direct_ms:>8.2f} {ratio:>5.2f}× "
                          f"{cold_ms / direct_ms:>5.2f}×  {verdict}")
        finally:
            direct.close()


def example_plan(templates: Any, example: Any) -> Plan:
    """The example's plan; a slotted example's with its own question's values, read on
    ``DEMO_DAY`` (as the test-suite and ``structq demo`` ask them)."""
    if not example.slots:
        return Plan.from_example(example)
    plan = templates.plan(example.question, DEMO_DAY)
    assert plan is not None, f"the slotted example {example.question!r} does not match its own question"
    return plan


def executor_ms(result: PlanResult) -> float:
    """Time spent inside the executors (connection, query, fetch, row conversion)."""
    return sum(step.elapsed_ms for step in result.steps.values())


def _label(text: str, width: int) -> str:
    """``text`` cut to ``width`` display columns (CJK characters take two)."""
    out, used = "", 0
    for char in text:
        cost = 2 if ord(char) > 0x2E7F else 1
        if used + cost > width:
            return out + " " * (width - used)
        out, used = out + char, used + cost
    return out + " " * (width - used)


# ---------------------------------------------------------------------------------------------
# (b) references vs JOIN
# ---------------------------------------------------------------------------------------------

def reference_plan(n: int) -> Plan:
    return Plan.parse({"steps": [
        {"output_key": "picked", "source": "refs", "query": f"SELECT id FROM ids WHERE id <= {n}"},
        {"output_key": "total", "source": "refs",
         "query": "SELECT COUNT(*) AS n, SUM(amount) AS amount FROM detail WHERE id_ref IN (<picked>)"},
    ]})


def join_query(n: int) -> str:
    return ("SELECT COUNT(*) AS n, SUM(d.amount) AS amount FROM detail AS d "
            f"JOIN ids AS i ON i.id = d.id_ref WHERE i.id <= {n}")


def bench_references(label: str, url: str, sizes: list[int], runs: int) -> None:
    """Engine (two steps, N ids passed on) vs the JOIN, at each size, on one database."""
    from sqlalchemy import create_engine, text

    create_reference_tables(url)
    manifest, _ = load_manifest_text(manifest_text("engine_refs_sql", url=url, big=ROWS), f"<{label}>")
    capabilities = CapabilitySet([manifest])
    plain = create_engine(url)
    with plain.begin() as connection:  # statistics, so that both sides are planned from them
        analyze = "ANALYZE TABLE ids, detail" if plain.dialect.name in ("mysql", "mariadb") else "ANALYZE"
        connection.execute(text(analyze))

    def join(n: int) -> list[Any]:
        with plain.connect() as connection:
            return connection.execute(text(join_query(n))).fetchall()

    try:
        with Engine(capabilities) as engine:
            for n in sizes:
                plan = reference_plan(n)
                got = [tuple(r) for r in engine.run(plan).final.rows]
                want = [tuple(_plain(v) for v in r) for r in join(n)]
                figures = interleaved_ms({"engine": lambda: engine.run(plan), "join": lambda: join(n),
                                          "driver": lambda: driver_read(plain, f"SELECT id FROM ids WHERE id <= {n}")},
                                         runs, 1)
                engine_ms, join_ms = figures["engine"], figures["join"]
                ratio = engine_ms / join_ms
                verdict = ("ok" if ratio <= REFERENCE_TARGET else "MISSED") if n >= ROWS else "-"
                same = "same" if got == want else f"DIFFERENT {got} vs {want}"
                steps = engine.run(plan).steps
                fetch_ms, in_ms = steps["picked"].elapsed_ms, steps["total"].elapsed_ms
                print(f"  {label:<20}{n:>8,} {engine_ms:>9.2f} {join_ms:>9.2f} {ratio:>6.2f}×  {verdict:<7}"
                      f"{fetch_ms:>9.1f} {in_ms:>8.1f} {figures['driver']:>8.1f}  {same}")
    finally:
        plain.dispose()


def driver_read(plain: Any, query: str) -> list[Any]:
    """``query``'s rows read with the driver's own cursor, nothing else: what passing a step's
    values through the client costs at the least on this driver."""
    connection = plain.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(query)
        return cursor.fetchall()
    finally:
        connection.close()


def _plain(value: Any) -> Any:
    """Decimal sums (PostgreSQL, MariaDB) as the int or float the executor returns."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def server_urls(stack: ExitStack, databases: set[str], name: str = "bench_engine") -> Iterator[tuple[str, str]]:
    """(label, admin URL of a fresh database) for each server that can start here."""
    try:
        from servers import MariaDBServer, PostgresServer, ServerUnavailable
    except ImportError as exc:
        print(f"  PostgreSQL/MariaDB skipped: {exc}")
        return
    for label, server_class in (("PostgreSQL", PostgresServer), ("MariaDB", MariaDBServer)):
        if label.lower() not in databases:
            continue
        try:
            server = stack.enter_context(server_class.start())
        except ServerUnavailable as exc:
            print(f"  {label} skipped: {str(exc).splitlines()[0]}")
            continue
        if label != "MariaDB":
            yield label, server.create_database(name)
            continue
        # Both drivers a MySQL URL may run with: mysqlclient (now the default when installed)
        # beside PyMySQL (the only one before), each on its own copy of the tables.
        from sqlalchemy import make_url

        from structq.executors.sql.mysql.drivers import DRIVERS

        for driver in DRIVERS.values():
            if driver.installed():
                url = make_url(server.create_database(f"{name}_{driver.name}"))
                yield f"{label} {driver.package}", url.set(drivername=driver.drivername).render_as_string(hide_password=False)


def bench_all_references(sizes: list[int], runs: int, databases: set[str]) -> None:
    print(f"\n(b) N ids passed to the next step vs one JOIN — median of {runs} interleaved rounds, ms "
          f"(target ≤ {REFERENCE_TARGET}× at {ROWS:,})")
    print("   (fetch ids / IN step: time inside the executor for step 1, which reads the N ids, and\n"
          "    step 2, which filters by them, in one engine run; driver: the N ids read with the\n"
          "    driver's own cursor alone — where that nears the JOIN's time, as on pure-Python\n"
          "    PyMySQL, no plan that passes the ids through the client can come within 2×)")
    print(f"  {'database':<20}{'N':>8} {'engine':>9} {'join':>9} {'ratio':>7}  {'target':<7}"
          f"{'fetch ids':>9} {'IN step':>8} {'driver':>8}  result")
    if "sqlite" in databases:
        with tempfile.TemporaryDirectory(prefix="structq-bench-") as tmp:
            bench_references("SQLite", f"sqlite:///{Path(tmp) / 'refs.db'}", sizes, runs)
    with ExitStack() as stack:
        for label, url in server_urls(stack, databases):
            bench_references(label, url, sizes, runs)


# ---------------------------------------------------------------------------------------------
# (d) text references vs JOIN, up to a million values
# ---------------------------------------------------------------------------------------------

TEXT_TARGETS = {100_000: 2.0, 1_000_000: 3.0}

TEXT_MANIFEST = """\
source: codes
kind: sql
url: {url}
limits: {{max_rows: 1000, max_intermediate_rows: {rows}, timeout_s: 300}}
tables:
  - name: codes
    columns:
      - {{name: id, type: integer}}
      - {{name: code, type: text}}
  - name: facts
    columns:
      - {{name: id, type: integer}}
      - {{name: code_ref, type: text}}
      - {{name: amount, type: integer}}
"""


def create_text_tables(url: str, rows: int) -> None:
    """``codes``: ids 1…``rows``, each with a text code (``C1``…); ``facts``: 1.2 × ``rows`` rows
    whose indexed ``code_ref`` names some codes twice, some never, some that do not exist.
    Made by the database from a thousand seed rows' cross products."""
    from sqlalchemy import (BigInteger, Column, Integer, MetaData, String, Table, cast, create_engine, insert,
                            literal, select, text, true)

    metadata = MetaData()
    seed = Table("seed", metadata, Column("n", Integer, primary_key=True, autoincrement=False))
    codes = Table("codes", metadata, Column("id", Integer, primary_key=True, autoincrement=False),
                  Column("code", String(16)))
    facts = Table("facts", metadata, Column("id", Integer, primary_key=True, autoincrement=False),
                  Column("code_ref", String(16), index=True), Column("amount", Integer))
    low, high = seed.alias("low"), seed.alias("high")
    pairs = low.join(high, true())  # the cross product, said on purpose
    n = low.c.n + 1000 * (high.c.n - 1)
    admin = create_engine(url)
    try:
        if admin.dialect.name in ("mysql", "mariadb"):
            hold_in_memory(admin)
        metadata.create_all(admin)
        with admin.begin() as connection:
            connection.execute(insert(seed), [{"n": i} for i in range(1, 1001)])
            connection.execute(insert(codes).from_select(
                ["id", "code"], select(n, literal("C") + cast(n, String)).select_from(pairs).where(
                    high.c.n <= max(rows // 1000, 1))))
            target = (cast(n, BigInteger) * 7919) % (rows + rows // 10) + 1
            connection.execute(insert(facts).from_select(
                ["id", "code_ref", "amount"],
                select(n, literal("C") + cast(target, String), n % 1000).select_from(pairs).where(
                    high.c.n <= (rows + rows // 5) // 1000)))
            analyze = "ANALYZE TABLE codes, facts" if admin.dialect.name in ("mysql", "mariadb") else "ANALYZE"
            connection.execute(text(analyze))
    finally:
        admin.dispose()


#: MariaDB's buffer pool while the text tables are measured: enough for both drivers' copies
#: of the 1M-code tables (~105 MiB each, indexes included).
MARIADB_POOL_BYTES = 512 * 1024 * 1024


def hold_in_memory(admin: Any) -> None:
    """MariaDB's buffer pool raised to ``MARIADB_POOL_BYTES``, so that both sides are measured
    on tables held in memory, as on a server sized for them.

    The test-suite's server keeps a 32 MiB pool (``tests/servers.py``: its tables are small).
    The text tables do not fit in it, and every index lookup of the JOIN and of the list then
    read pages from the files: the JOIN took 5–12 s at 100k codes and 87–111 s at 1M here, and
    the ratio measured the page reads of both sides rather than either plan. The JOIN's own
    plan was the right one all along (a range of ``codes`` by its key, then ``facts`` by its
    ``code_ref`` index); an index on ``codes.code`` did not change it.
    """
    from sqlalchemy import text

    with admin.connect() as connection:
        connection.execute(text(f"SET GLOBAL innodb_buffer_pool_size = {MARIADB_POOL_BYTES}"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the resize finishes in the background
            status = connection.execute(text("SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'")).fetchall()
            size = connection.execute(text("SELECT @@innodb_buffer_pool_size")).scalar()
            if int(size) >= MARIADB_POOL_BYTES and (not status or not status[0][1]
                                                    or "ompleted" in status[0][1]):
                return
            time.sleep(0.2)


def text_reference_plan(n: int) -> Plan:
    return Plan.parse({"steps": [
        {"output_key": "picked", "source": "codes", "query": f"SELECT code FROM codes WHERE id <= {n}"},
        {"output_key": "total", "source": "codes",
         "query": "SELECT COUNT(*) AS n, SUM(amount) AS amount FROM facts WHERE code_ref IN (<picked>)"},
    ]})


def text_join_query(n: int) -> str:
    return ("SELECT COUNT(*) AS n, SUM(f.amount) AS amount FROM facts AS f "
            f"JOIN codes AS c ON c.code = f.code_ref WHERE c.id <= {n}")


def text_capabilities(url: str, rows: int) -> CapabilitySet:
    manifest, _ = load_manifest_text(TEXT_MANIFEST.format(url=url, rows=rows), "<codes>")
    return CapabilitySet([manifest])


def bench_text_references(label: str, url: str, sizes: list[int], runs: int) -> None:
    """Engine (two steps, N codes passed on) vs the JOIN on the codes, at each size."""
    from sqlalchemy import create_engine, text

    create_text_tables(url, max(sizes))
    plain = create_engine(url)

    def join(n: int) -> list[Any]:
        with plain.connect() as connection:
            return connection.execute(text(text_join_query(n))).fetchall()

    try:
        with Engine(text_capabilities(url, max(sizes))) as engine:
            for n in sizes:
                plan = text_reference_plan(n)
                got = [tuple(r) for r in engine.run(plan).final.rows]
                want = [tuple(_plain(v) for v in r) for r in join(n)]
                times: dict[str, list[float]] = {"engine": [], "join": [], "driver": []}
                variants = (("engine", functools.partial(engine.run, plan)), ("join", functools.partial(join, n)),
                            ("driver", functools.partial(driver_read, plain, f"SELECT code FROM codes WHERE id <= {n}")))
                for _ in range(runs):
                    for name, fn in variants:
                        start = time.perf_counter()
                        fn()
                        times[name].append((time.perf_counter() - start) * 1000)
                ratios = sorted(e / j for e, j in zip(times["engine"], times["join"]))
                engine_ms, join_ms = statistics.median(times["engine"]), statistics.median(times["join"])
                target = TEXT_TARGETS.get(n)
                verdict = "-" if target is None else ("ok" if engine_ms / join_ms <= target else "MISSED")
                same = "same" if got == want else f"DIFFERENT {got} vs {want}"
                driver_ms = statistics.median(times["driver"])
                print(f"  {label:<20}{n:>10,} {engine_ms:>9.1f} {join_ms:>9.1f} {engine_ms / join_ms:>6.2f}× "
                      f"[{ratios[0]:.2f}–{ratios[-1]:.2f}]  {verdict:<7}{driver_ms:>8.1f} "
                      f"{driver_ms / join_ms:>5.2f}×  {same}", flush=True)
        print(f"  {label:<20}{'peak':>10} {peak_memory(url, max(sizes))}", flush=True)
        if url.startswith("postgresql"):
            print(f"  {label:<20}{'whole':>10} {peak_memory(url, max(sizes), whole=True)}  (step 1's rows "
                  "read whole, as before chunked reading)", flush=True)
    finally:
        plain.dispose()


def peak_memory(url: str, n: int, *, whole: bool = False) -> str:
    """One engine run of the N-code plan in a child process: its peak resident set, and how
    much it grew over the same process just before the run; with ``whole``, PostgreSQL's rows
    read through SQLAlchemy's cursor, whole in libpq's memory first (as before ``postgresql/stream.py``)."""
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--peak-of", url, str(n), *(["--whole"] if whole else [])],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
    return out.stdout.strip()


def report_peak(url: str, n: int, whole: bool) -> None:
    if whole:
        from structq.executors.sql.guards import Backend
        from structq.executors.sql.postgresql import PostgresBackend

        PostgresBackend.read = Backend.read  # type: ignore[method-assign]
    with Engine(text_capabilities(url, n)) as engine:
        engine.run(Plan.parse({"steps": [{"output_key": "one", "source": "codes",
                                          "query": "SELECT code FROM codes WHERE id = 1"}]}))
        before = resident_peak_mib()
        engine.run(text_reference_plan(n))
        after = resident_peak_mib()
    print(f"{after:.0f} MiB max RSS, +{after - before:.0f} MiB over the process before the run")


def resident_peak_mib() -> float:
    """This process's peak resident set (``VmHWM``: unlike ``ru_maxrss``, not inherited from
    the parent that forked it)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_all_text_references(sizes: list[int], runs: int, databases: set[str]) -> None:
    print(f"\n(d) N text codes passed to the next step vs one JOIN on them — median of {runs} "
          "alternating runs, ms, [range of the per-run ratios]")
    print("   (driver: the N codes read with the driver's own cursor alone, and that ÷ the JOIN: the floor\n"
          "    under any plan that passes them through the client)")
    print(f"  {'database':<20}{'N':>10} {'engine':>9} {'join':>9} {'ratio':>7} {'':<21}{'driver':>8} {'floor':>6}")
    if "sqlite" in databases:
        with tempfile.TemporaryDirectory(prefix="structq-bench-") as tmp:
            bench_text_references("SQLite", f"sqlite:///{Path(tmp) / 'codes.db'}", sizes, runs)
    with ExitStack() as stack:
        for label, url in server_urls(stack, databases, "bench_text"):
            bench_text_references(label, url, sizes, runs)


# ---------------------------------------------------------------------------------------------
# (c) fixed cost of one SQLite step
# ---------------------------------------------------------------------------------------------

@contextmanager
def timer_deadline(dbapi_connection: sqlite3.Connection, timeout_s: float) -> Iterator[None]:
    """The guard as it was: the same progress handler plus one ``threading.Timer`` per
    statement (``guards.Backstop``, which server backstops still use) calling ``interrupt()``."""
    from structq.executors.sql.guards import Backstop
    from structq.executors.sql.sqlite import SQLITE_PROGRESS_STEPS

    deadline = time.monotonic() + timeout_s
    dbapi_connection.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0,
                                          SQLITE_PROGRESS_STEPS)
    backstop = Backstop(dbapi_connection.interrupt, timeout_s)
    try:
        yield
    finally:
        backstop.finish()
        dbapi_connection.set_progress_handler(None, 0)


@contextmanager
def guard_as(guard: Callable[..., Any]) -> Iterator[None]:
    """Both executors' SQLite guard replaced by ``guard`` for the duration."""
    from structq.executors.local import executor as local
    from structq.executors.sql import sqlite

    saved = sqlite.sqlite_deadline, local.sqlite_deadline
    sqlite.sqlite_deadline = local.sqlite_deadline = guard
    try:
        yield
    finally:
        sqlite.sqlite_deadline, local.sqlite_deadline = saved


def interleaved_ms(variants: Mapping[str, Callable[[], object]], rounds: int, per_round: int) -> dict[str, float]:
    """Per-call median (over ``rounds``) of each variant, the variants alternating every round."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        fn()
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            times[name].append((time.perf_counter() - start) / per_round)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def bench_step_cost(rounds: int) -> None:
    from structq.executors.sql import limit_sqlite, sqlite_deadline

    print(f"\n(c) fixed cost of one SQLite step — median of {rounds} interleaved rounds, ms per call "
          "(target ≤ 0.5 ms, no thread per query)")
    print(f"  {'measure':<46}{'before':>9}{'now':>9}{'saved':>9}")
    raw = sqlite3.connect(":memory:", check_same_thread=False)
    limit_sqlite(raw)

    def guarded(guard: Callable[..., Any]) -> Callable[[], object]:
        def run() -> object:
            with guard(raw, 30.0):
                return raw.execute("SELECT 1").fetchall()
        return run

    def bare() -> object:
        return raw.execute("SELECT 1").fetchall()

    figures = interleaved_ms({"before": guarded(timer_deadline), "now": guarded(sqlite_deadline),
                              "bare": bare}, rounds, 200)
    _cost_row(f"guard + SELECT 1 (bare SELECT 1: {figures['bare']:.3f})", figures)
    raw.close()
    with tempfile.TemporaryDirectory(prefix="structq-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'refs.db'}"
        create_reference_tables(url)
        manifest, _ = load_manifest_text(manifest_text("engine_refs_sql", url=url, big=ROWS), "<SQLite>")
        plan = Plan.parse({"steps": [{"output_key": "one", "source": "refs",
                                      "query": "SELECT id FROM ids WHERE id = 7"}]})
        with Engine(CapabilitySet([manifest])) as engine:
            def run_before() -> object:
                with guard_as(timer_deadline):
                    return engine.run(plan)

            figures = interleaved_ms({"before": run_before, "now": lambda: engine.run(plan)}, rounds, 20)
            _cost_row("one-step engine run on SQLite", figures)
    print(f"  threads alive now: {threading.active_count()} "
          f"(the deadline thread: {sum(t.name == 'structq-sqlite-deadlines' for t in threading.enumerate())})")


def _cost_row(label: str, figures: Mapping[str, float]) -> None:
    before, now = figures["before"], figures["now"]
    print(f"  {label:<46}{before:>9.3f}{now:>9.3f}{before - now:>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="comma-separated list sizes for (b), at most 100000")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds for (c)")
    parser.add_argument("--text-sizes", default="100000,1000000", help="comma-separated list sizes for (d)")
    parser.add_argument("--text-runs", type=int, default=5, help="alternating runs per size for (d)")
    parser.add_argument("--only", choices=["examples", "references", "text-references", "step-cost"])
    parser.add_argument("--peak-of", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb",
                        help="comma-separated databases for (b): sqlite, postgresql, mariadb")
    args = parser.parse_args()
    if args.peak_of:
        report_peak(args.peak_of[0], int(args.peak_of[1]), args.whole)
        return
    sizes = [min(int(s), ROWS) for s in args.sizes.split(",")]
    if args.only in (None, "examples"):
        bench_examples(args.runs)
    if args.only in (None, "references"):
        bench_all_references(sizes, args.runs, set(args.databases.lower().split(",")))
    if args.only in (None, "text-references"):
        bench_all_text_references([int(s) for s in args.text_sizes.split(",")], args.text_runs,
                                  set(args.databases.lower().split(",")))
    if args.only in (None, "step-cost"):
        bench_step_cost(args.rounds)


if __name__ == "__main__":
    main()
