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
                                              "download.prompt_for_download": False})
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


def test_a_person_asks_reads_sorts_downloads_and_follows_up(server, browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 90)
    browser.get(server.url + "/")
    examples = wait.until(ready.visibility_of_element_located((By.ID, "examples")))
    assert {CATEGORY_QUESTION, SERIES_QUESTION} <= {b.text for b in examples.find_elements(By.CSS_SELECTOR, "button.example")}
    examples.find_element(By.XPATH, f"//button[text()='{SERIES_QUESTION}']").click()

    # the answer: a line chart (a time series), the plan with the query as it ran, the table
    first = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#turn-1 .chart svg.chart-line")))
    turn = browser.find_element(By.ID, "turn-1")
    assert len(first.find_elements(By.CSS_SELECTOR, "circle.dot")) == 6
    assert "[by_month]" in turn.find_element(By.CSS_SELECTOR, ".answer-text").text
    query = turn.find_element(By.CSS_SELECTOR, "pre.query").text
    assert "LIMIT" in query and "tenant_id" in query  # as it ran: the sandbox's limit and row filter
    assert "6 rows" in turn.find_element(By.CSS_SELECTOR, ".step .meta").text
    assert turn.find_element(By.CSS_SELECTOR, ".step .params").text == "bound: var_tenant_id = 1"
    cells = lambda: [r.find_elements(By.TAG_NAME, "td")[1].text for r in turn.find_elements(By.CSS_SELECTOR, "tbody tr")]  # noqa: E731
    assert len(cells()) == 6
    shot(browser, tmp_path, "1-time-series")

    # sorting by the total, twice: ascending then descending
    header = turn.find_elements(By.CSS_SELECTOR, "th")[1]
    header.click()
    ascending = [float(v) for v in cells()]
    assert ascending == sorted(ascending)
    header.click()
    assert [float(v) for v in cells()] == sorted(ascending, reverse=True)

    # the CSV of the full result
    turn.find_element(By.CSS_SELECTOR, "button.csv").click()
    csv = wait_for_file(browser.downloads / "by_month.csv").splitlines()
    assert csv[0] == "order_month,total" and len(csv) == 7

    # a citation link leads to its step
    turn.find_element(By.CSS_SELECTOR, "a.cite").click()
    assert browser.current_url.endswith("#turn-1-step-by_month")

    # a follow-up in the same conversation: planned by the (scripted) model, drawn as bars
    box = browser.find_element(By.ID, "question")
    box.send_keys(FOLLOW_UP)
    wait.until(ready.element_to_be_clickable((By.ID, "send"))).click()
    bars = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#turn-2 .chart svg.chart-bar")))
    assert len(bars.find_elements(By.CSS_SELECTOR, "rect.bar")) == 7  # tenant 1's seven customers
    second = browser.find_element(By.ID, "turn-2")
    assert "plan: model" in second.find_element(By.CSS_SELECTOR, ".status").text
    assert all(c.text.startswith("T1-") for c in second.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child"))
    browser.execute_script("arguments[0].scrollIntoView()", second)
    shot(browser, tmp_path, "2-follow-up")

    # a refusal appears in place, with its hint
    box.send_keys(REFUSED)
    wait.until(ready.element_to_be_clickable((By.ID, "send"))).click()
    error = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, "#turn-3 .error")))
    assert "no_working_plan" in error.text and "card_number" in error.text
    assert "Hint:" in error.text
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "turn-3"))
    shot(browser, tmp_path, "3-refusal")
