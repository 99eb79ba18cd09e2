"""Linking knows when it does not know: the confidence verdict, its reasons, and its
calibration on the corpora (same-language questions stay confident; cross-language ones keep
their tables or are flagged).

The small catalogues are written here; the calibration reads ``../shared/corpora`` through the
benchmark's loaders and skips, saying so, where the corpora are absent.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from structq.capabilities import CapabilitySet
from structq.cli import app
from structq.linking import Budget, select
from structq.linking.languages import names_language, question_language

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
SMALL = Budget(prompt_tokens=300, linked_tokens=300)


@pytest.mark.parametrize("text, language", [
    ("How many singers do we have?", "en"),
    ("Wie viele Sänger haben wir?", "de"),
    ("JetBlue Airways 的缩写是什么？", "zh"),
    ("列出所有客户", "zh"),
])
def test_question_language(text: str, language: str) -> None:
    assert question_language(text) == language


@pytest.mark.parametrize("names, language", [
    (["sänger", "konzert", "stadion_id", "name", "land"], "de"),
    (["mitarbeiter", "abteilung", "gehalt", "vorname"], "de"),
    (["singer", "concert", "stadium_id", "name", "country"], "latin"),
    (["cust_nm", "ord_amt", "kehu_mingcheng"], "latin"),
    (["客户", "name"], "zh"),
])
def test_names_language(names: list[str], language: str) -> None:
    assert names_language(names) == language


def _table(name: str, columns: list[str], **more: Any) -> dict[str, Any]:
    return {"name": name, "columns": [{"name": c, "type": "text"} for c in columns], **more}


def _write(folder: Path, manifests: list[dict[str, Any]]) -> CapabilitySet:
    folder.mkdir(parents=True, exist_ok=True)
    for m in manifests:
        (folder / f"{m['source']}.yaml").write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return CapabilitySet.from_path(folder)


def _english(filler: int = 10) -> list[dict[str, Any]]:
    sales = {"source": "sales", "kind": "sql", "url": "sqlite://", "tables": [
        _table("customers", ["customer_id", "name", "city"]),
        _table("orders", ["order_id", "customer_id", "amount", "order_date"]),
        *[_table(f"audit_log_{i}", [f"field_{j}" for j in range(8)]) for i in range(filler)]]}
    return [sales]


def _german(**synonyms: list[str]) -> dict[str, Any]:
    tables = [_table("mitarbeiter", ["mitarbeiter_id", "vorname", "nachname", "gehalt"],
                     synonyms=synonyms.get("mitarbeiter", [])),
              _table("abteilung", ["abteilung_id", "bezeichnung", "standort"], synonyms=synonyms.get("abteilung", []))]
    return {"source": "personal", "kind": "sql", "url": "sqlite://", "tables": tables}


def test_a_same_language_question_is_confident(tmp_path: Path) -> None:
    caps = _write(tmp_path / "c", _english())
    selection = select("total order amount per customer city", caps, budget=SMALL)
    assert selection.pruned and selection.confident, selection.confidence
    assert selection.keeps("sales", "orders") and selection.keeps("sales", "customers")


def test_a_question_that_matches_nothing_is_not_confident(tmp_path: Path) -> None:
    caps = _write(tmp_path / "c", _english())
    selection = select("weather forecast tomorrow", caps, budget=SMALL)
    assert not selection.confident
    assert any("matched the question's words" in r for r in selection.confidence.reasons)


def test_a_question_in_another_script_is_not_confident(tmp_path: Path) -> None:
    caps = _write(tmp_path / "c", _english())
    selection = select("明天的天气预报怎么样？", caps, budget=SMALL)
    assert not selection.confident
    assert any("Chinese" in r and "cannot reach" in r for r in selection.confidence.reasons)


def test_german_names_are_out_of_reach_of_english_questions_until_a_synonym_bridges(tmp_path: Path) -> None:
    caps = _write(tmp_path / "a", [*_english(), _german()])
    flagged = select("average salary of employees", caps, budget=SMALL)
    assert not flagged.confident and flagged.confidence.unreachable == ("personal",)
    assert any("German" in r for r in flagged.confidence.reasons)
    bridged = _write(tmp_path / "b", [*_english(), _german(mitarbeiter=["employees", "staff"],
                                                            abteilung=["department"])])
    selection = select("average salary of employees", bridged, budget=SMALL)
    assert selection.confident, selection.confidence
    assert selection.keeps("personal", "mitarbeiter")


def test_german_questions_reach_names_in_unrecognised_latin(tmp_path: Path) -> None:
    """Only a language linking recognises is out of reach: English names stay reachable from German."""
    caps = _write(tmp_path / "c", _english())
    selection = select("Gesamtbetrag der orders pro customer", caps, budget=SMALL)
    assert not selection.confidence.unreachable


def test_a_whole_catalogue_is_confident(tmp_path: Path) -> None:
    caps = _write(tmp_path / "c", _english(filler=0))
    selection = select("明天的天气预报怎么样？", caps)
    assert not selection.pruned and selection.confident


def test_explain_linking_json_says_whether_it_is_confident(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    _write(folder, [*_english(), _german()])
    env = {"STRUCTQ_PROMPT_TOKENS": "300", "STRUCTQ_LINK_TOKENS": "300", "STRUCTQ_LLM": None, "OPENAI_API_KEY": None}
    result = CliRunner().invoke(app, ["plan", "average salary of employees", "--explain-linking", "--json",
                                      "-m", str(folder)], env=env)
    assert result.exit_code == 0, result.output
    explained = json.loads(result.output)
    assert explained["confident"] is False
    assert explained["confidence"]["reasons"] and explained["confidence"]["language"] == "en"
    text = CliRunner().invoke(app, ["plan", "average salary of employees", "--explain-linking", "-m", str(folder)],
                              env=env)
    assert "not confident" in text.output


# --- calibration on the corpora ------------------------------------------------------------------


def _outcomes(loader: str, corpus: str, every: int = 1) -> list[tuple[bool, bool]]:
    """(kept every gold table, flagged not confident) per question of one bench corpus (every
    ``every``-th question: the large corpora are sampled to keep the suite quick)."""
    linking_corpora = pytest.importorskip("linking_corpora")
    if not (linking_corpora.CORPORA / "spider_en").is_dir():
        pytest.skip("../shared/corpora is absent (a user's clone): calibration runs where the corpora are")
    from linking import gold

    for name, capabilities, items, _ in linking_corpora.CORPUS_LOADERS[loader]():
        if name != corpus:
            continue
        out = []
        for item in items[::every]:
            found = gold(item, capabilities)
            if found and found[0]:
                selection = select(item.question, capabilities)
                out.append((all(selection.keeps(*t) for t in found[0]), not selection.confident))
        return out
    raise AssertionError(f"no corpus {corpus}")


@pytest.mark.parametrize("loader, corpus, every", [("spider_en", "spider_en dev", 3), ("defog", "defog", 1),
                                                   ("bird", "bird mini-dev", 2)])
def test_same_language_questions_stay_confident(loader: str, corpus: str, every: int) -> None:
    outcomes = _outcomes(loader, corpus, every)
    kept = statistics.mean(k for k, _ in outcomes)
    flagged = statistics.mean(f for _, f in outcomes)
    assert kept >= 0.95 and flagged <= 0.10, (kept, flagged)


@pytest.mark.parametrize("loader, corpus, every", [("en_de", "en→de names", 3), ("zh", "zh→en names", 1)])
def test_cross_language_questions_keep_their_tables_or_are_flagged(loader: str, corpus: str, every: int) -> None:
    outcomes = _outcomes(loader, corpus, every)
    share = statistics.mean(k or f for k, f in outcomes)
    assert len(outcomes) >= 40 and share >= 0.90, share


# --- the offline bridge for Chinese: lexicon and pinyin --------------------------------------------


def test_the_lexicon_finds_the_longest_words_and_skips_function_words() -> None:
    from structq.linking.lexicon import bridge

    found = bridge("所有订单号的总金额是多少？")
    assert [w for w, _ in found.words] == ["订单号", "总金额"]
    assert found.covered == 1.0 and {"order", "amount", "total"} <= set(found.terms)
    assert bridge("明天的天气预报怎么样").covered == 0.0
    assert not bridge("How many orders?").terms


def test_a_chinese_question_reaches_english_names_through_the_lexicon(tmp_path: Path) -> None:
    caps = _write(tmp_path / "c", _english())
    selection = select("每个城市的客户订单总金额是多少？", caps, budget=SMALL)
    assert selection.confident, selection.confidence
    assert selection.keeps("sales", "orders") and selection.keeps("sales", "customers")
    assert selection.to_dict()["confidence"]["signals"]["lexicon"]["客户"] == ["customer", "client"]


def test_a_chinese_question_reaches_names_in_pinyin(tmp_path: Path) -> None:
    pytest.importorskip("pypinyin", reason="pinyin needs the chinese extra (pypinyin)")
    pinyin = {"source": "erp", "kind": "sql", "url": "sqlite://", "tables": [
        _table("kehu_xinxi", ["kehu_id", "kehu_mingcheng", "suozai_chengshi"]),
        *[_table(f"rizhi_{i}", [f"ziduan_{j}" for j in range(8)]) for i in range(10)]]}
    caps = _write(tmp_path / "c", [pinyin])
    selection = select("所在城市是上海的客户名称", caps, budget=SMALL)
    assert selection.keeps("erp", "kehu_xinxi")
