"""The web page in a real browser: Debian's headless chromium, driven through chromedriver,
against a real ``structq serve`` (the two-tenant shop, a scripted OpenAI-compatible model on
loopback for the follow-up). One person's session: pick a verified question, read the plan,
the table and the chart, sort, download the CSV, follow up, hit a refusal with its hint.

Screenshots go to the test's folder (and to ``$STRUCTQ_SCREENSHOTS_DIR`` when set).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_stub import OpenAIStub
from server_support import CATEGORY_QUESTION, SERIES_QUESTION, ServerProcess, build_shop, start_server

from structq.server.store import Store

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")

FOLLOW_UP = "那按客户看呢？"
REFUSED = "把银行卡号列出来"
RULES = {
    FOLLOW_UP: {"reasoning": "上一问按月汇总；这次按客户汇总", "steps": [{
        "output_key": "by_customer", "source": "shop", "purpose": "按客户汇总订单金额",
        "query": "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer ORDER BY total DESC"}]},
    REFUSED: {"steps": [{"output_key": "cards", "source": "shop", "query": "SELECT card_number FROM orders"}]},
}


def _need_browser() -> None:
    if CHROMIUM and CHROMEDRIVER:
        return
    reason = "chromium and chromium-driver are not installed (scripts/test.sh installs them as root)"
    if os.environ.get("STRUCTQ_REQUIRE_BROWSER") == "1":  # scripts/test.sh sets it where it installed them
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    shop = build_shop(tmp_path / "shop")
    with OpenAIStub(RULES) as stub:
        env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "stub", "STRUCTQ_AUDIT": "0",
               "STRUCTQ_MAX_REPAIRS": "1"}
        process = start_server(["-m", str(shop.manifests), "--var", "tenant_id=1", "--llm", "openai:stub",
                                "--no-cache"], env=env, log=tmp_path / "serve.log")
        yield process
        process.stop()


@pytest.fixture
def browser(tmp_path: Path):
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1400", "--lang=zh-CN"):
        options.add_argument(flag)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False,
                                              "intl.accept_languages": "zh-CN,zh"})  # headless ignores --lang
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads  # type: ignore[attr-defined]
    yield driver
    driver.quit()


def shot(driver, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    extra = os.environ.get("STRUCTQ_SCREENSHOTS_DIR")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)


def wait_for_file(path: Path, deadline_s: float = 30) -> str:
    give_up = time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        if path.exists() and path.stat().st_size:
            return path.read_text(encoding="utf-8-sig")
        time.sleep(0.2)
    raise AssertionError(f"{path.name} was not downloaded")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_a_person_asks_reads_sorts_downloads_and_follows_up(server, browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 90)
    browser.get(server.url + "/")
    examples = wait.until(ready.visibility_of_element_located((By.ID, "examples")))
    # the interface speaks the browser's language (Chinese here)
    assert browser.find_element(By.ID, "reset").text == "新对话" and browser.find_element(By.ID, "send").text == "提问"
    assert examples.find_element(By.TAG_NAME, "h2").text == "从经过验证的问题开始"
    assert {CATEGORY_QUESTION, SERIES_QUESTION} <= {b.text for b in examples.find_elements(By.CSS_SELECTOR, "button.example")}
    examples.find_element(By.XPATH, f"//button[text()='{SERIES_QUESTION}']").click()

    # the answer: a line chart (a time series), the plan with the query as it ran, the table
    first = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#turn-1 .chart svg.chart-line")))
    turn = browser.find_element(By.ID, "turn-1")
    assert len(first.find_elements(By.CSS_SELECTOR, "circle.dot")) == 6
    answer = turn.find_element(By.CSS_SELECTOR, ".answer-text")
    assert "[by_month]" in answer.text and "|" not in answer.text  # Markdown, not pipes and dashes
    assert not answer.find_elements(By.TAG_NAME, "table")  # the step below shows the same rows
    assert "计划来源：verified" in turn.find_element(By.CSS_SELECTOR, ".status").text
    query = turn.find_element(By.CSS_SELECTOR, "pre.query").text
    assert "LIMIT" in query and "tenant_id" in query  # as it ran: the sandbox's limit and row filter
    assert "6 行" in turn.find_element(By.CSS_SELECTOR, ".step .meta").text
    assert turn.find_element(By.CSS_SELECTOR, ".step .params").text == "绑定：var_tenant_id = 1"
    cells = lambda: [r.find_elements(By.TAG_NAME, "td")[1].text for r in turn.find_elements(By.CSS_SELECTOR, "tbody tr")]  # noqa: E731
    assert len(cells()) == 6
    assert any("," in c for c in cells())  # thousands separators (1,500), not 1500.0
    labels = [t for t in first.find_elements(By.CSS_SELECTOR, "text.tick") if t.get_attribute("text-anchor") != "end"]
    boxes = sorted((t.rect["x"], t.rect["x"] + t.rect["width"]) for t in labels)
    assert all(left[1] <= right[0] for left, right in zip(boxes, boxes[1:]))  # no x-axis label overlaps another
    shot(browser, tmp_path, "1-time-series")

    # sorting by the total, twice: ascending then descending
    header = turn.find_elements(By.CSS_SELECTOR, "th")[1]
    header.click()
    ascending = [_number(v) for v in cells()]
    assert ascending == sorted(ascending)
    turn.find_elements(By.CSS_SELECTOR, "th")[1].click()
    assert [_number(v) for v in cells()] == sorted(ascending, reverse=True)

    # the CSV of the full result, its numbers as stored
    turn.find_element(By.CSS_SELECTOR, "button.csv").click()
    csv = wait_for_file(browser.downloads / "by_month.csv").splitlines()
    assert csv[0] == "order_month,total" and len(csv) == 7 and "," not in csv[1].split(",", 1)[1]

    # a citation link leads to its step
    turn.find_element(By.CSS_SELECTOR, "a.cite").click()
    assert browser.current_url.endswith("#turn-1-step-by_month")

    # a second verified question in the same conversation: answered without the model, as bars
    box = browser.find_element(By.ID, "question")
    box.send_keys(CATEGORY_QUESTION)
    wait.until(ready.element_to_be_clickable((By.ID, "send"))).click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#turn-2 .chart svg.chart-bar")))
    second = browser.find_element(By.ID, "turn-2")
    assert "计划来源：verified" in second.find_element(By.CSS_SELECTOR, ".status").text

    # 👎 with a comment on it
    down = second.find_element(By.CSS_SELECTOR, "button.rate[data-rating='down']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", down)  # clear of the question box
    down.click()
    comment = second.find_element(By.CSS_SELECTOR, "input.comment")
    comment.send_keys("家电的金额不对")
    shot(browser, tmp_path, "2-second-verified-and-feedback")
    second.find_element(By.CSS_SELECTOR, "button.send-feedback").click()
    wait.until(ready.text_to_be_present_in_element((By.CSS_SELECTOR, "#turn-2 .feedback"), "谢谢"))
    rated = Store(f"sqlite:///{server.log.with_suffix('.store.db')}").list_feedback()
    assert [(f["rating"], f["comment"], f["question"]) for f in rated] == [("down", "家电的金额不对", CATEGORY_QUESTION)]

    # a follow-up in the same conversation: planned by the (scripted) model, drawn as bars
    box.send_keys(FOLLOW_UP)
    wait.until(ready.element_to_be_clickable((By.ID, "send"))).click()
    bars = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#turn-3 .chart svg.chart-bar")))
    assert len(bars.find_elements(By.CSS_SELECTOR, "rect.bar")) == 7  # tenant 1's seven customers
    third = browser.find_element(By.ID, "turn-3")
    assert "计划来源：model" in third.find_element(By.CSS_SELECTOR, ".status").text
    assert all(c.text.startswith("T1-") for c in third.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child"))
    browser.execute_script("arguments[0].scrollIntoView()", third)
    shot(browser, tmp_path, "3-follow-up")

    # a refusal appears in place, with its hint
    box.send_keys(REFUSED)
    wait.until(ready.element_to_be_clickable((By.ID, "send"))).click()
    error = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, "#turn-4 .error")))
    assert "no_working_plan" in error.text and "card_number" in error.text
    assert "提示：" in error.text
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "turn-4"))
    shot(browser, tmp_path, "4-refusal")


def test_the_pages_chart_markdown_and_tables_choose_by_the_results_shape(server, browser) -> None:
    """The page's pure parts, in the browser that runs them: which chart a result's shape gets,
    Markdown answers, and the search columns a table hides until asked."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.url + "/")
    WebDriverWait(browser, 60).until(ready.visibility_of_element_located((By.ID, "examples")))
    kind = lambda columns, rows: browser.execute_script(  # noqa: E731
        "return StructqChart.chartKind(arguments[0], arguments[1])", columns, rows)
    growth = [["2025-Q1", 1200.0, None], ["2025-Q2", 1500.0, 25.0], ["2025-Q3", 1350.0, -10.0]]
    assert kind(["quarter", "total_amount", "growth_pct"], growth) == {"kind": "line", "label": 0, "value": 2}
    assert kind(["季度", "销售额", "同比增长率"], [["2025年第一季度", 1, 0.1], ["2025年第二季度", 2, 0.2]])["value"] == 2
    assert kind(["region", "total"], [["华东", 3], ["华北", 2], ["华南", 1]]) == {"kind": "bar", "label": 0, "value": 1}
    assert kind(["name", "title"], [["a", "b"], ["c", "d"]]) is None  # nothing to plot: no chart

    # a line of negative growth stays inside the chart
    svg_height = browser.execute_script(
        "const s = StructqChart.draw(arguments[0], arguments[1]); document.body.append(s);"
        "return [...s.querySelectorAll('circle.dot')].map((c) => Number(c.getAttribute('cy')));",
        ["quarter", "total_amount", "growth_pct"], growth[1:])
    assert all(0 < y < 280 for y in svg_height)

    rendered = browser.execute_script(
        "const r = StructqMarkdown.render(arguments[0], {keys: ['top'], shown: [['customer', 'total']], "
        "cite: (k) => { const a = document.createElement('a'); a.textContent = `[${k}]`; return a; }});"
        "return [r.querySelectorAll('table').length, r.querySelectorAll('strong').length, r.querySelectorAll('li').length,"
        " r.querySelectorAll('a').length, r.textContent];",
        "**合计** 1,200 元 [top]。\n\n- 第一\n- 第二\n\n| k | v |\n|---|---|\n| a | 1 |\n\n"
        "[top] 客户 — 3 行\n| customer | total |\n|---|---|\n| x | 1 |\n… 2 more\n\n<b>not markup</b>")
    tables, bold, items, links, text = rendered
    assert (tables, bold, items, links) == (1, 1, 2, 1)  # the step's own table is left out, the other kept
    assert "客户 — 3 行" not in text and "2 more" not in text and "<b>not markup</b>" in text

    headers = browser.execute_script(
        "const t = resultTable({output_key: 'hits', columns: ['_id', '_score', 'title', 'week'], "
        "rows: [['r1', null, '灰度发布', '2026-10-05']]}); document.body.append(t);"
        "const before = [...t.querySelectorAll('th')].map((th) => th.textContent);"
        "t.querySelector('button.reveal').click();"
        "return [before, [...t.querySelectorAll('th')].map((th) => th.textContent)];")
    assert headers == [["title", "week"], ["_id", "_score", "title", "week"]]
