"""Paraphrases of verified examples take the template path; near-misses reach the model.

On the demo company, with the question sets of ``bench/templates_questions.yaml``: each
paraphrase is planned from its example with the expected slot values by an agent whose
scripted model fails when called (and counts no call); each near-miss (another metric,
grouping, order, period, N, a negation, an extra filter, a value left out) and each question
the strict matcher refuses reaches the model exactly once. Then the matcher's rules one at a
time, and what ``ask`` shows of a paraphrase match (the example, the score, the slots).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from scripted import plan_reply, scripted

from structq import Agent
from structq.cli.render import print_template
from structq.config import Settings
from structq.templates import THRESHOLD, TemplateSet

QUESTIONS = yaml.safe_load((Path(__file__).resolve().parents[1] / "bench" / "templates_questions.yaml")
                           .read_text(encoding="utf-8"))
TODAY: dt.date = QUESTIONS["today"]
#: Paraphrases the matcher does not take (recall below 100%, by design: a word it cannot read
#: sends the question to the model). Each is a question the model still answers.
NOT_TAKEN = {
    "东北地区在职的财务部员工有哪些？",  # 地区 (a column's synonym) where the example writes 区 against the value
    "上个月有多少员工绩效是C？",  # "how many employees" without 人: no example counts employees that way
    "星火项目组有哪些成员？",  # 项目组 names the table only; the example's 项目 also names a search field
    "北斗项目负责人是谁？",  # 项目负责人 is a member role's meaning, read as that value
    "2026年第三季度各部门的周报分别有多少份？",  # 提交 (submitted) left out: a plain word is never implied
}
REFUSAL = {"cannot_answer": "scripted: the model was asked", "steps": []}
ASKED_OF_THE_MODEL = QUESTIONS["near_misses"] + QUESTIONS["must_not_match"]


@pytest.fixture(scope="module")
def offline(demo_capabilities) -> Any:
    """An agent whose model must never be called (no reply scripted: a call fails)."""
    model = scripted()
    with Agent(demo_capabilities, llm=model, settings=Settings(llm=None, cache_enabled=False,
                                                               audit_enabled=False)) as agent:
        yield agent, model


@pytest.fixture(scope="module")
def planner(demo_capabilities) -> Any:
    """An agent whose model refuses every question it is asked (one reply per question)."""
    model = scripted(*[plan_reply(REFUSAL)] * len(ASKED_OF_THE_MODEL))
    with Agent(demo_capabilities, llm=model, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False,
                                                               max_replans=0)) as agent:
        yield agent, model


@pytest.fixture(scope="module")
def strict(demo_capabilities) -> TemplateSet:
    """The strict matcher alone (the example's wording with other values)."""
    return TemplateSet(demo_capabilities, paraphrases=False)


def _how(strict: TemplateSet, agent: Agent, question: str) -> str:
    """How ``question`` must be matched: ``words`` when the strict matcher takes it (entity slots
    looked up as the agent looks them up), else ``paraphrase`` — so a strict match never counts
    as a paraphrase the paraphrase matcher found, nor the other way round."""
    found = strict.match(question, TODAY, lambda column, text: agent.templates.lookup(column, text)).match
    return "words" if found is not None else "paraphrase"


@pytest.mark.parametrize("item", [p for p in QUESTIONS["paraphrases"] if p["q"] not in NOT_TAKEN],
                         ids=lambda p: p["q"])
def test_a_paraphrase_is_planned_from_its_example_with_no_model_call(offline, strict: TemplateSet,
                                                                    item: dict[str, Any]) -> None:
    agent, model = offline
    answer = agent.ask(item["q"], today=TODAY, answer=False)
    assert model.calls == 0
    assert answer.plan_source == "template"
    template = answer.plan.template
    assert template is not None and template.example == item["example"]
    assert {k: template.params[k] for k in item["params"]} == item["params"]
    assert template.how == _how(strict, agent, item["q"])
    if template.how == "paraphrase":
        assert THRESHOLD <= template.score <= 1 and template.why.startswith(f"paraphrase, score {template.score:.2f}")


@pytest.mark.parametrize("question", ASKED_OF_THE_MODEL)
def test_a_near_miss_reaches_the_model(planner, question: str) -> None:
    agent, model = planner
    before = model.calls
    answer = agent.ask(question, today=TODAY, answer=False)
    assert model.calls == before + 1
    assert answer.plan_source == "model" and answer.plan.template is None


#: What docs/manifests.md claims of the held-out paraphrases: of 42, 37 planned right, none wrong.
HELD_OUT, HELD_OUT_RIGHT = 42, 37


def test_the_held_out_paraphrases_keep_their_recall_and_none_is_wrong(demo_capabilities, strict: TemplateSet) -> None:
    """The held-out paraphrases measure recall (``bench/templates.py``) and are never tuned on:
    at least the documented number is planned from the right example with the right values
    (a floor: more is better), a few may go to the model, and none may take another example
    or other values (exactly none)."""
    assert len(QUESTIONS["held_out"]) == HELD_OUT
    right: list[str] = []
    wrong: list[str] = []
    with Agent(demo_capabilities, llm=None, settings=Settings(llm=None, cache_enabled=False,
                                                              audit_enabled=False)) as agent:
        for item in QUESTIONS["held_out"]:
            match = agent.templates.outcome(item["q"], TODAY).match
            if match is None:
                continue
            if match.example.question == item["example"] and all(
                    match.params.get(k) == v for k, v in item["params"].items()):
                assert match.how == _how(strict, agent, item["q"]), item["q"]
                right.append(item["q"])
            else:
                wrong.append(item["q"])
    assert wrong == []
    assert len(right) >= HELD_OUT_RIGHT


def test_the_paraphrases_not_taken_reach_the_model_and_say_why(demo_capabilities) -> None:
    with Agent(demo_capabilities, llm=None, settings=Settings(llm=None, cache_enabled=False,
                                                              audit_enabled=False)) as agent:
        for question in NOT_TAKEN:
            outcome = agent.templates.outcome(question, TODAY)
            assert outcome.match is None and "not a paraphrase of" in outcome.reason


# --- the rules, one at a time ----------------------------------------------------------------


@pytest.fixture(scope="module")
def templates(demo_capabilities) -> TemplateSet:
    return TemplateSet(demo_capabilities)


def _stored(values: dict[str, set[str]]):
    """A lookup over fixed stored values (the demo's own are read through the engine above)."""
    return lambda column, text: text if text in values.get(column, set()) else None


STORED = _stored({"hr.projects.project_name": {"星火", "北斗", "天宫"}, "sales.products.product_name": {"产品X"},
                  "reports.weekly_reports.author_name": {"李玲倩"}})


@pytest.mark.parametrize("question, example, params", [
    # order, question words, measure words
    ("哪三个项目的预算最多？", "预算最高的3个项目是哪些？", {"n": 3}),
    # a coded value by its meaning, each = 各, people = 人数
    ("各个部门在2026年9月绩效为优秀的人数分别是多少", "2026年3月各部门绩效为A的人数是多少？",
     {"month_start": "2026-09-01", "grade": "A"}),
    # a declared synonym (金额 = 销售额) and another question word (哪些 = 什么)
    ("2025年金额最高的10个产品是哪些？", "2025年销售额最高的5个产品是什么？", {"n": 10}),
    # English inflection (were buying = bought) and word order
    ("Last year, how many distinct customers were buying 产品X?", "How many different customers bought 产品X last year?",
     {"product": "产品X", "period_start": "2025-01-01"}),
    # an entity looked up in the data
    ("北斗项目有哪些成员？", "星火项目的成员有哪些？", {"project": "北斗"}),
])
def test_what_a_paraphrase_may_change(templates: TemplateSet, strict: TemplateSet, question: str, example: str,
                                      params: dict[str, Any]) -> None:
    assert strict.match(question, TODAY, STORED).match is None  # not the example's wording
    found = templates.match(question, TODAY, STORED).match
    assert found is not None and found.how == "paraphrase" and found.example.question == example
    assert {k: found.params[k] for k in params} == params


@pytest.mark.parametrize("question, shape, reason", [
    ("哪三个项目的预算最少？", "预算最高的{n}个项目是哪些", "the question does not say '最高'"),  # another order
    ("2026年10月绩效不是D的有几个人？", "{month}绩效为{grade}的员工有多少人", "the question adds '不是'"),
    ("2026年10月和11月绩效评为D的有几个人？", "{month}绩效为{grade}的员工有多少人", "slot 'month': 2 values"),
    ("2026年3月每个大区有多少人绩效是A？", "{month}各部门绩效为{grade}的人数是多少",
     "the question does not say '部门'"),  # another grouping
    ("2025年每个大区的销量是多少？", "{period}各大区的销售额分别是多少", "the question does not say '销售额'"),
    ("2026年第三季度在华东签了几份合同？", "{period}签了多少份合同", "the question adds '华东'"),  # a filter
    ("预算最高的项目是哪些？", "预算最高的{n}个项目是哪些", "slot 'n': no value of its kind"),  # no N
    ("2026年9月哪些周报提到了？", "{month}有哪些周报提到了灰度发布", "the question does not say '灰度发布'"),
    ("研发部区在职的华东员工有哪些？", "{region}区在职的{department}员工有哪些",
     "'区' is not written against the value of slot 'region'"),  # the values swapped
    ("火星项目有哪些成员？", "{project}项目的成员有哪些", "slot 'project': no value of its kind"),  # not stored
    # the example's words in other English, but 北斗 is a project, not a stored product: with
    # the slot unfilled there is no value to bind, so it abstains however the words compare
    ("Last year how many distinct customers bought 北斗?", "How many different customers bought {product}{period}",
     "slot 'product': no value of its kind"),
    ("2024年第一季度华北区销售额小于1000万且回款周期超过60天的合同有哪些？",
     "{quarter}{region}区销售额超过1000万且回款周期小于60天的合同有哪些",
     "'超过' does not stand after '销售额' as in the example"),  # the comparisons swapped
    # what is counted: customers (家) where the example counts contracts (份)
    ("上个季度有多少家签了合同？", "{period}签了多少份合同", "the question counts organisations, the example things"),
    # several where the example ranks and gives the first one
    ("去年第三季度在华东区销售额最高的产品有哪些？", "{period}在{region}区销售额最高的产品是什么",
     "the question asks for several, the example gives the first one"),
    ("2025年销售额最高的客户有哪些？", "{period}销售额最高的客户是哪家", "the question does not say '哪家'"),
    ("星火项目的成员是哪位？", "{project}项目的成员有哪些", "the question does not say '哪些'"),  # one, not several
    # a modal: a plan or a forecast, not what happened
    ("上个季度要签多少份合同？", "{period}签了多少份合同", "the question adds '要'"),
    ("What will the total sales in the 华南 region be in 2024?",
     "What were the total sales in the {region} region in {period}", "the question adds 'will'"),
    # ranks the contracts, then filters them: the example filters, then ranks
    ("金额最大的5份合同中哪些是2024年签约的？", "{period}签约的合同中金额最大的{n}份是哪些",
     "'{period}' is not on the same side of '中' as in the example"),
    ("2025年10个客户中销售额最高的是哪些？", "{period}销售额最高的{n}个客户是哪些",
     "the question chooses among something ('中'), the example does not"),
    # lists employees, where the example lists projects
    ("2026年3月都参与了项目的绩效为A的员工有哪些？", "{month}绩效为{grade}的员工都参与了哪些项目",
     "the question asks for employees, the example for projects_mentioned"),
    # reports written about 李玲倩, not by her
    ("2026年10月哪些周报写了李玲倩？", "{person}在{month}写了哪些周报",
     "the value of slot 'person' is not on the same side of '写' as in the example"),
    # where, not which; an amount, not a count
    ("2025年销售额最高的客户在哪里？", "{period}销售额最高的客户是哪家", "the question does not say '哪家'"),
    ("How much did different customers buy 产品X last year?", "How many different customers bought {product}{period}",
     "the question does not say 'How many'"),
    # what else; who stayed D
    ("星火项目还有哪些成员？", "{project}项目的成员有哪些", "the question adds '还'"),
    ("上个月绩效仍为D的员工有多少人？", "{month}绩效为{grade}的员工有多少人", "the question adds '仍'"),
    # from a month on: a range's start, not the month
    ("What was the average performance score of the R&D department (研发部) from September 2026?",
     "What was the average performance score of the R&D department 研发部 in {month}", "the question adds 'from'"),
])
def test_a_near_miss_is_refused_by_the_rule_it_breaks(templates: TemplateSet, question: str, shape: str,
                                                      reason: str) -> None:
    assert templates.paraphrases is not None
    assert templates.match(question, TODAY, STORED).match is None
    assert reason in templates.paraphrases.explain(question, TODAY, STORED)[shape]


def test_a_subject_noun_may_be_implied_and_lowers_the_score(templates: TemplateSet) -> None:
    found = templates.match("2026年10月绩效评为D的有几个人？", TODAY).match
    assert found is not None and found.example.question == "上个月绩效为D的员工有多少人？"
    assert found.score == pytest.approx(5 / 6) and found.score >= THRESHOLD
    assert found.why == ("paraphrase, score 0.83 (5 of 6 words; implied: 员工); "
                         "slots: month = 2026-10 (2026年10月), grade = D")


def test_a_noun_that_says_what_is_listed_is_never_implied(templates: TemplateSet) -> None:
    assert templates.paraphrases is not None
    outcome = templates.match("2025年销售额最高的10个是哪些？", TODAY)  # customers or products?
    assert outcome.match is None
    assert "does not say '客户'" in templates.paraphrases.explain(
        "2025年销售额最高的10个是哪些？", TODAY, None)["{period}销售额最高的{n}个客户是哪些"]


def test_without_paraphrases_only_the_examples_wording_matches(demo_capabilities) -> None:
    strict = TemplateSet(demo_capabilities, paraphrases=False)
    assert strict.match("哪三个项目的预算最多？", TODAY).match is None
    assert strict.match("预算最高的5个项目是哪些？", TODAY).match.params == {"n": 5}  # type: ignore[union-attr]


#: Three examples: slotted; unslotted with no period (paraphrased); unslotted with a period
#: (its dates cannot move: never paraphrased).
LAZY = """
source: office
kind: sql
url: sqlite://
tables:
  - name: projects
    synonyms: [项目]
    columns:
      - {name: title, type: text, primary_key: true}
      - {name: budget, type: integer, synonyms: [预算]}
      - {name: started, type: date}
examples:
  - question: 预算最高的5个项目是哪些？
    slots: {n: {type: integer, example: 5, max: 20}}
    steps: [{output_key: top, source: office, query: "SELECT title FROM projects ORDER BY budget DESC LIMIT :n"}]
  - question: 预算最低的项目是哪个？
    steps: [{output_key: low, source: office, query: "SELECT title FROM projects ORDER BY budget LIMIT 1"}]
  - question: 2025年立项的项目有哪些？
    steps: [{output_key: started, source: office,
             query: "SELECT title FROM projects WHERE started >= '2025-01-01' AND started < '2026-01-01'"}]
"""


def test_paraphrase_matching_is_built_only_when_a_question_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unslotted examples' templates and the vocabulary are built on the first question the
    strict matcher refuses, and never with paraphrases off (counted by the templates built)."""
    from structq.capabilities import CapabilitySet, load_manifest_text
    from structq.templates import Template

    catalogue = CapabilitySet([load_manifest_text(LAZY)[0]])
    built: list[str] = []
    build = Template.build

    def counted(manifest, example, capabilities, synonyms):  # the real build, counted
        built.append(example.question)
        return build(manifest, example, capabilities, synonyms)

    monkeypatch.setattr(Template, "build", staticmethod(counted))
    slotted, unslotted = ["预算最高的5个项目是哪些？"], ["预算最低的项目是哪个？"]

    off = TemplateSet(catalogue, paraphrases=False)
    assert off.match("哪三个项目的预算最多？", TODAY).match is None and off.paraphrases is None
    assert built == slotted

    built.clear()
    on = TemplateSet(catalogue)
    words = on.match("预算最高的8个项目是哪些？", TODAY).match
    assert words is not None and words.how == "words" and words.paraphrase is None and words.score == 1.0
    assert built == slotted and "paraphrases" not in vars(on)  # matched word for word: nothing more built
    found = on.match("哪三个项目的预算最多？", TODAY).match
    assert found is not None and found.how == "paraphrase" and found.paraphrase is not None
    assert (found.params, found.score, found.why) == ({"n": 3}, found.paraphrase.score, found.paraphrase.why)
    assert built == slotted + unslotted  # the dated example is not built at all
    assert on.paraphrases is not None and [t.example.question for t in on.paraphrases.templates] == slotted + unslotted
    unslotted_found = on.match("哪个项目预算最低？", TODAY).match
    assert unslotted_found is not None and unslotted_found.example.question == unslotted[0]
    assert built == slotted + unslotted  # built once


def test_ask_shows_the_example_the_score_and_the_slots(offline) -> None:
    agent, model = offline
    answer = agent.ask("哪三个项目的预算最多？", today=TODAY, answer=False)
    out = Console(record=True, width=200)
    print_template(out, answer.plan.template)  # type: ignore[arg-type]
    assert out.export_text().strip() == ("from the verified example '预算最高的3个项目是哪些？' as a paraphrase, "
                                         "score 1.00 (5 of 5 words); slots: n = 3")
    assert answer.to_dict()["plan"]["template"]["how"] == "paraphrase"
    assert model.calls == 0


# --- reading a question as words ----------------------------------------------------------------


@pytest.mark.parametrize("question, words", [
    ("哪十一个项目的预算最多？", [("class", "哪"), ("number", "十一"), ("concept", "项目"), ("word", "预算"),
                                 ("class", "最多")]),
    ("预算最多的一个项目是哪一个", [("word", "预算"), ("class", "最多"), ("number", "一"), ("concept", "项目"),
                                   ("class", "哪一个")]),
    ("Which projects aren't in progress?", [("class", "Which"), ("concept", "projects"), ("class", "aren"),
                                            ("class", "t"), ("word", "progress")]),
    ("a grade of A", [("word", "grade"), ("value", "A")]),  # the article is no grade (and a filler)
    ("2026年3月每个部门有多少人绩效是A", [("period", "2026年3月"), ("class", "每个"), ("concept", "部门"),
                                       ("class", "多少"), ("class", "人"), ("concept", "绩效"), ("value", "A")]),
])
def test_a_question_reads_as_its_meaningful_words(templates: TemplateSet, question: str,
                                                  words: list[tuple[str, str]]) -> None:
    from structq.templates import match_text

    assert templates.paraphrases is not None
    read = templates.paraphrases.vocabulary.read(match_text(question), TODAY)
    assert [(w.kind, w.text) for w in read if w.kind != "filler"] == words


def test_a_paraphrase_runs_the_examples_own_steps(offline) -> None:
    from structq.agent.plan import Plan

    agent, _ = offline
    answer = agent.ask("2026年3月每个部门有多少人绩效是A？", today=TODAY, answer=False)
    example = next(e for _, e in agent.capabilities.examples() if e.question == answer.plan.template.example)  # type: ignore[union-attr]
    assert answer.plan.steps == Plan.from_example(example).steps
    assert answer.plan.template.params == {"month_start": "2026-03-01", "month_end": "2026-03-31",  # type: ignore[union-attr]
                                           "month_next": "2026-04-01", "grade": "A"}
