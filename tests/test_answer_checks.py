"""The answer check (``structq.agent.figures``): every figure of a model-written answer traced to
a cell, a count, the question or a derivation from the cited steps; citations that name
steps which hold the figures; one repair for a wrong citation; a fallback that still answers.
The model is scripted; the results are built in memory (the check reads results, not databases)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from scripted import scripted, text_reply

from structq.agent import Plan, PlanResult, StepResult
from structq.agent.figures import Evidence, check_answer, figures_in
from structq.agent.llm import CallLog
from structq.agent.numerals import chinese_value, english_value, word_numbers
from structq.agent.synthesis import format_number, render_deterministic, synthesize

#: Two yearly totals whose growth is 21.07% (3,008,785,678 / 2,485,162,000 − 1 = 0.210700…).
TOTAL_2024, TOTAL_2025 = 2485162000.0, 3008785678.0


def run_of(*steps: tuple[str, tuple[str, ...], list[tuple[Any, ...]]], purposes: dict[str, str] | None = None,
           queries: dict[str, str] | None = None) -> PlanResult:
    """A run whose steps returned these (key, columns, rows)."""
    purposes, queries = purposes or {}, queries or {}
    plan = Plan.parse({"steps": [{"output_key": key, "source": "sales", "purpose": purposes.get(key, ""),
                                  "query": queries.get(key, "SELECT 1")} for key, _, _ in steps]})
    results = {key: StepResult(key, "sales", purpose=purposes.get(key, ""), columns=columns, rows=rows)
               for key, columns, rows in steps}
    return PlanResult(plan, results, [], 0.0)


YEARLY = run_of(("yearly", ("year", "total_amount"), [(2024, TOTAL_2024), (2025, TOTAL_2025)]),
                purposes={"yearly": "每年的销售总额"})
COUNTS = run_of(("headcount", ("headcount",), [(135,)]), ("members", ("employee_id", "name"), [(3, "张三")]),
                ("top", ("n",), [(1,)]))


def verdicts(text: str, run: PlanResult, question: str = "") -> list[tuple[str, str | None, str | None]]:
    return [(c.figure.text, c.basis, c.problem) for c in check_answer(text, Evidence(run, question)).checks]


# --- number words ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("两", 2), ("三十", 30), ("一百二十", 120), ("一百零五", 105),
                                         ("三千五百万", 35_000_000), ("三亿五千万", 350_000_000), ("二〇二六", 2026)])
def test_chinese_numerals(text: str, value: int) -> None:
    assert chinese_value(text) == value


@pytest.mark.parametrize("text, value", [("twelve", 12), ("forty-two", 42), ("two hundred and five", 205),
                                         ("three million", 3_000_000)])
def test_english_number_words(text: str, value: int) -> None:
    assert english_value(text) == value


def test_idioms_and_pronouns_are_not_numbers() -> None:
    text = "一共有三人，唯一的负责人十分重要；千万不要。No one knows; one of them wrote twelve reports."
    assert [(n.text, int(n.value)) for n in word_numbers(text)] == [("三", 3), ("twelve", 12)]


# --- no free figures --------------------------------------------------------------------------


def test_a_wrong_small_count_is_caught_where_the_result_said_1() -> None:
    assert verdicts("其中 3 人绩效为A [top]。", COUNTS) == [("3", None, "unsupported")]
    assert verdicts("其中三人绩效为A [top]。", COUNTS) == [("三", None, "unsupported")]
    assert verdicts("其中1人绩效为A [top]。", COUNTS)[0][2] is None  # digits right after Chinese text
    assert verdicts("其中3人绩效为A [top]。", COUNTS) == [("3", None, "unsupported")]


def test_an_id_in_the_rows_is_not_a_figure_the_answer_may_state() -> None:
    # employee_id 3 is in the rows, but an id is a name for a row, not a count
    assert verdicts("星火项目有 3 名成员 [members]。", COUNTS) == [("3", None, "unsupported")]


def test_142_for_135_is_caught_and_135_rounded_or_in_words_passes() -> None:
    assert verdicts("在职 142 人 [headcount]。", COUNTS) == [("142", None, "unsupported")]
    assert verdicts("在职一百三十五人 [headcount]。", COUNTS) == [("一百三十五", "cell", None)]
    assert verdicts("There are one hundred thirty-five employees [headcount].", COUNTS)[0][1:] == ("cell", None)


def test_roundings_and_units_the_prompt_allows_and_no_others() -> None:
    ok = ["总额 30.09亿元 [yearly]", "总额 3,008,785,678 元 [yearly]", "总额 300,878.57万元 [yearly]",
          "total 3.01 billion [yearly]", "total 3,008.8 million [yearly]", "总额 30亿元 [yearly]"]
    for text in ok:
        assert [v[2] for v in verdicts(text, YEARLY)] == [None], text
    # one significant digit is not a rounding the prompt allows; a unit changes the value
    for text in ["总额 3十亿元 [yearly]", "总额 3 亿元 [yearly]", "总额 30.09万元 [yearly]"]:
        assert any(v[2] == "unsupported" for v in verdicts(text, YEARLY)), text


def test_a_number_the_user_wrote_passes_and_one_from_the_plan_reasoning_does_not() -> None:
    run = run_of(("top", ("name",), [("甲",), ("乙",)]))
    assert verdicts("预算最高的三个项目中 [top]", run, "预算最高的3个项目是哪些？") == [("三", "question", None)]
    reasoned = run.plan.model_copy(update={"reasoning": "取前 7 个"})
    assert verdicts("共 7 个 [top]", PlanResult(reasoned, run.steps, [], 0.0)) == [("7", None, "unsupported")]


def test_dates_come_from_cells_the_question_or_the_period_the_plan_read() -> None:
    run = run_of(("reports", ("title", "week_start_date"), [("周报", "2026-03-02")]),
                 queries={"reports": "SELECT title FROM r WHERE d BETWEEN '2026-03-02' AND '2026-03-08'"})
    assert [v[1] for v in verdicts("2026年3月2日那周 [reports]", run)] == ["cell"]
    assert [v[1] for v in verdicts("3月8日之前 [reports]", run)] == ["query"]
    assert [v[2] for v in verdicts("2026-04-01 [reports]", run)] == ["unsupported"]


def test_list_numbering_and_ordinals_within_the_rows_are_not_figures_to_refuse() -> None:
    run = run_of(("top", ("name", "budget"), [("甲", 500), ("乙", 400), ("丙", 300)]))
    assert all(v[2] is None for v in verdicts("1. 甲 500 [top]\n2. 乙 400 [top]\n第3名是丙 [top]", run))
    assert verdicts("第5名 [top]", run) == [("5", None, "unsupported")]


# --- derived figures --------------------------------------------------------------------------


def test_a_correct_growth_from_two_yearly_totals_is_accepted() -> None:
    assert verdicts("2025年比2024年同比增长 21.07% [yearly]。", YEARLY, "2025年销售额比2024年增长了多少？")[-1] == \
        ("21.07%", "derived", None)


@pytest.mark.parametrize("text", ["同比增长 25% [yearly]", "同比增长 21.5% [yearly]", "两年合计 60亿元 [yearly]"])
def test_a_wrong_derived_figure_is_refused(text: str) -> None:
    assert verdicts(text, YEARLY)[-1][2] == "unsupported"


@pytest.mark.parametrize("text", ["两年合计 54.94亿元 [yearly]", "2025年多出 5.24亿元 [yearly]",
                                  "2025年是2024年的 1.21 倍 [yearly]", "平均每年 27.47亿元 [yearly]",
                                  "2025年占两年合计的 54.77% [yearly]"])
def test_sums_differences_ratios_averages_and_shares_are_derived(text: str) -> None:
    assert verdicts(text, YEARLY)[-1][1:] == ("derived", None)


def test_a_derived_figure_needs_a_word_of_derivation_or_a_ratio_form() -> None:
    # 135 + 1 = 136 is computable, but "有 136 人" says nothing is computed
    assert verdicts("有 136 人 [headcount] [top]", COUNTS) == [("136", None, "unsupported")]
    assert verdicts("合计 136 人 [headcount] [top]", COUNTS)[0][1:] == ("derived", None)


# --- citations --------------------------------------------------------------------------------


def test_a_dangling_citation_and_a_figure_cited_to_the_wrong_step_are_found() -> None:
    check = check_answer("在职 135 人 [customer_count]。", Evidence(COUNTS))
    assert check.dangling == ("customer_count",) and not check.ok
    check = check_answer("在职 135 人 [top]。", Evidence(COUNTS))
    assert [(c.problem, c.steps, c.cited) for c in check.checks] == [("miscited", ("headcount",), ("top",))]


def test_checks_are_in_the_json_shape() -> None:
    [check] = check_answer("同比增长 21.07% [yearly]", Evidence(YEARLY)).checks
    assert check.to_dict() == {"text": "21.07%", "value": 0.2107, "basis": "derived", "steps": ["yearly"],
                               "cited": ["yearly"], "ok": True, "problem": None}
    assert "text" not in check.to_dict(with_values=False) and "value" not in check.to_dict(with_values=False)


# --- the model's answer: kept, repaired once, or replaced ---------------------------------------


def answer(run: PlanResult, *replies: str, question: str = "在职多少人？") -> tuple[Any, Any]:
    model = scripted(*(text_reply(r) for r in replies))
    return synthesize(model, question, run, log=CallLog()), model


def test_a_checked_answer_is_kept_with_its_checks() -> None:
    written, model = answer(COUNTS, "在职 135 人 [headcount]。")
    assert written.text == "在职 135 人 [headcount]。" and model.calls == 1
    assert [c.basis for c in written.checks] == ["cell"]


def test_a_dangling_citation_gets_one_repair_call() -> None:
    written, model = answer(COUNTS, "在职 135 人 [customer_count]。", "在职 135 人 [headcount]。")
    assert written.text == "在职 135 人 [headcount]。" and model.calls == 2
    assert "[customer_count] names no step" in model.prompt_text(1) and "[headcount]" in model.prompt_text(1)
    assert any("repaired once" in n for n in written.notes)


def test_a_citation_still_wrong_after_the_repair_gives_the_fallback_with_a_note() -> None:
    written, model = answer(COUNTS, "在职 135 人 [top]。", "在职 135 人 [top]。")
    assert model.calls == 2 and "still wrong after one repair" in written.notes[0]
    assert written.text.startswith("n为 1 [top]") or "[top]" in written.text.splitlines()[0]


def test_an_invented_figure_gives_the_fallback_without_a_repair() -> None:
    written, model = answer(COUNTS, "在职 142 人 [headcount]。")
    assert model.calls == 1 and "142" not in written.text and "142" in written.notes[0]


# --- the fallback -----------------------------------------------------------------------------


def test_the_fallback_answers_in_the_questions_language_with_formatted_numbers() -> None:
    zh = render_deterministic("2025年的销售总额是多少亿？", YEARLY).splitlines()[0]
    assert zh == "结果：year为 2024，total_amount为 24.85亿；year为 2025，total_amount为 30.09亿 [yearly]。"
    en = render_deterministic("What were the yearly sales totals?", YEARLY).splitlines()[0]
    assert en == "Result: year = 2024, total_amount = 2,485,162,000; year = 2025, total_amount = 3,008,785,678 [yearly]."
    assert "3008785678.0" not in render_deterministic("x?", YEARLY)


def test_the_fallback_names_a_single_value_by_the_steps_purpose_and_shows_no_table_it_spelt_out() -> None:
    run = run_of(("headcount", ("headcount",), [(135,)]), purposes={"headcount": "华东区在职员工数"})
    text = render_deterministic("华东区有多少在职员工？", run)
    assert text.splitlines()[0] == "华东区在职员工数为 135 [headcount]。"
    assert "|" not in text  # the one value is in the sentence; no table repeats it


def test_the_fallback_keeps_a_derived_figure_that_checked() -> None:
    written, _ = answer(YEARLY, "2025年销售额 31亿元 [yearly]，同比增长 21.07% [yearly]。",
                        question="2025年销售额比2024年增长了多少？")
    assert "31亿" not in written.text  # 3,008,785,678 is not 31亿
    assert "据此计算：同比增长 21.07% [yearly]" in written.text


def test_format_number() -> None:
    assert format_number(3008785678.0) == "3,008,785,678" and format_number(7747) == "7,747"
    assert format_number(2024, year=True) == "2024"
    assert format_number(85.3333) == "85.33" and format_number(0.210712) == "0.2107"
    assert format_number(3008785678.0, big_units=True) == "30.09亿" and format_number(52000, big_units=True) == "5.2万"


def test_every_figure_the_fallback_writes_passes_the_check() -> None:
    for question in ("2025年的销售总额是多少亿？", "What were the yearly sales totals?"):
        text = render_deterministic(question, YEARLY)
        check = check_answer(text, Evidence(YEARLY, question))
        assert check.ok, [c for c in check.checks if not c.ok]


def test_figures_are_found_in_order_with_their_units() -> None:
    found = [(f.text, f.unit, f.value) for f in figures_in("增长 21.07%，共 30.09亿元，three reports")]
    assert found == [("21.07%", "%", Decimal("0.2107")), ("30.09亿", "亿", Decimal("3009000000.00")),
                     ("three", "", Decimal(3))]


def test_a_word_of_total_admits_sums_only() -> None:
    departments = run_of(("by_department", ("department", "doc_count"),
                          [("研发部", 489), ("销售部", 130), ("运维部", 100), ("产品部", 94), ("客户成功部", 60), ("市场部", 41)]))
    assert verdicts("六个部门共 914 份 [by_department]。", departments) == [("六", "count", None), ("914", "derived", None)]
    # 489 - 130 = 359 is a difference: "共" does not say so
    assert verdicts("共 359 份 [by_department]。", departments) == [("359", None, "unsupported")]
    assert verdicts("研发部比销售部多 359 份 [by_department]。", departments)[-1][1:] == ("derived", None)
    assert verdicts("共有 3 名成员 [members]。", COUNTS) == [("3", None, "unsupported")]


def test_the_fallback_names_columns_and_aggregates_as_the_manifest_describes_them(demo_capabilities) -> None:
    plan = Plan.parse({"steps": [{"output_key": "by_region", "source": "sales", "query":
                                  "SELECT region, SUM(amount) AS total_amount FROM sales GROUP BY region"}]})
    step = StepResult("by_region", "sales", query=plan.steps[0].query, columns=("region", "total_amount"),
                      rows=[("华东", 1078023349.0), ("华北", 661385759.5)])
    text = render_deterministic("各大区的销售额？", PlanResult(plan, {"by_region": step}, [], 0.0),
                                capabilities=demo_capabilities)
    assert text.splitlines()[0] == ("结果：成交所属大区为 华东，成交金额合计为 1,078,023,349；"
                                    "成交所属大区为 华北，成交金额合计为 661,385,759.5 [by_region]。")


def test_a_percentage_written_in_words() -> None:
    assert verdicts("同比增长百分之二十一点零七 [yearly]", YEARLY) == [("百分之二十一点零七", "derived", None)]
    assert verdicts("同比增长百分之二十五 [yearly]", YEARLY) == [("百分之二十五", None, "unsupported")]
