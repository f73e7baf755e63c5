"""report.html in a real browser: ``trtbench report`` renders the committed demo run
(``tests/data/demo_run``) and headless Chromium opens the page from disk, offline.

Checked against the run's own tables, not the page's code: no console error, the answer box
reads recommendation.json's sentence, every plot has one trace per variant the CSVs hold,
a legend click hides its variant, the per-tier table sorts by a number and filters by a
word. Skipped with the reason when Chromium, its driver or Selenium cannot be had
(``tests/support/browser.py`` installs them with apt-get as root).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.browser import headless_chromium
from tests.support.report_runs import copy_real_run
from trtbench.cli import cli

PAGE_LIMIT_BYTES = 5_000_000
"""The issue's budget for the demo's page (plotly.js inlined: about 4.6 MB of it)."""
WAIT_S = 60
"""How long the browser may take to draw (a wait, not a bound: the box is busy)."""


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as driver:
        if isinstance(driver, str):
            pytest.skip(driver)
        yield driver


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(run directory, report.html) of the demo run rendered again by ``trtbench report``,
    whose last line names the page."""
    root = copy_real_run(tmp_path_factory.mktemp("page") / "demo")
    done = CliRunner().invoke(cli, ["report", str(root)])
    assert done.exit_code == 0, done.output
    html = root / "report.html"
    assert done.output.rstrip().splitlines()[-1] == f"page: {html}"
    return root, html


def _expected_traces(root: Path) -> dict[str, list[str]]:
    """The traces each figure draws (their names, sorted), from the run's CSVs by the
    figures' definitions: one per variant with a complete tier (the speculative ones for
    the speedup and tokens per step), per variant with acceptance-per-position rows, per
    (variant, tier) with rounds."""
    loadtest = root / "loadtest"
    summary = pd.read_csv(loadtest / "summary.csv")
    baseline = json.loads((root / "recommendation.json").read_text())["baseline"]
    measured = set(summary.loc[summary["tier_status"] == "complete", "variant"])
    acceptance = pd.read_csv(loadtest / "acceptance.csv")
    rounds = pd.read_csv(loadtest / "rounds.csv")
    cells = rounds[["variant", "tier"]].drop_duplicates()
    return {
        "speedup": sorted(measured - {baseline}),
        "ttft": sorted(measured),
        "tpot": sorted(measured),
        "throughput": sorted(measured),
        "acceptance": sorted(measured - {baseline}),
        "positions": sorted(
            set(acceptance.loc[acceptance["kind"] == "position", "variant"])
        ),
        "rounds": sorted(cells["variant"]),
    }


def _open(driver, html: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(html.as_uri())
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('.plotly-graph-div'))"
            ".every(function(g){return g._fullLayout && g.querySelector('.legend')})"
        )
    )


def test_the_page_is_one_offline_file_within_budget(page):
    _, html = page
    text = html.read_text()
    assert html.stat().st_size <= PAGE_LIMIT_BYTES
    # nothing fetched: no script, stylesheet or image from elsewhere
    assert not re.search(r"<(script|link|img)\b[^>]*\b(src|href)=\"(?!data:)", text)


def test_the_page_loads_without_a_console_error_and_opens_with_the_answer(
    page, browser
):
    root, html = page
    browser.get_log("browser")  # earlier pages' entries
    _open(browser, html)
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    answer = json.loads((root / "recommendation.json").read_text())["answer"]
    shown = browser.find_element("id", "answer").text
    assert shown == answer.replace("`", "")  # code spans shown without their backticks
    # the answer comes first: before every table and figure
    before_all = browser.execute_script(
        "var a=document.getElementById('answer');"
        "return Array.from(document.querySelectorAll('table, figure')).every("
        "function(e){return a.compareDocumentPosition(e)"
        " & Node.DOCUMENT_POSITION_FOLLOWING})"
    )
    assert before_all
    if folder := os.environ.get("TRTBENCH_PAGE_SCREENSHOTS"):  # README's pictures
        browser.save_screenshot(str(Path(folder) / "report_html.png"))
        rounds = browser.find_element("id", "plot-rounds")
        browser.execute_script("arguments[0].scrollIntoView()", rounds)
        rounds.screenshot(str(Path(folder) / "report_html_rounds.png"))


def test_every_plot_draws_one_trace_per_variant(page, browser):
    root, html = page
    _open(browser, html)
    drawn = browser.execute_script(
        "var out={};document.querySelectorAll('figure.plot').forEach(function(f){"
        "out[f.dataset.key]=f.querySelector('.plotly-graph-div').data"
        ".map(function(t){return t.name})});return out"
    )
    assert {k: sorted(v) for k, v in drawn.items()} == _expected_traces(root)


def test_a_legend_click_hides_its_variant(page, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    _, html = page
    _open(browser, html)
    toggle = browser.find_element(
        "css selector", "#plot-throughput .legend .traces .legendtoggle"
    )
    browser.execute_script("arguments[0].scrollIntoView({block:'center'})", toggle)
    ActionChains(browser).move_to_element(toggle).click().perform()
    state = "return document.getElementById('plot-throughput').data.map(function(t){return t.visible})"
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.execute_script(state)[0] == "legendonly"
    )
    visible = browser.execute_script(state)
    assert visible[0] == "legendonly"
    assert all(v in (None, True) for v in visible[1:])  # the others stay drawn


def _per_tier(browser):
    tables = browser.find_elements("css selector", "table")
    return next(
        t
        for t in tables
        if "TPOT mean ms" in [h.text for h in t.find_elements("css selector", "th")]
    )


def test_the_per_tier_table_sorts_by_a_number_and_filters(page, browser):
    root, html = page
    _open(browser, html)
    table = _per_tier(browser)
    heads = table.find_elements("css selector", "th")
    column = [h.text for h in heads].index("output tok/s")

    def cells() -> list[str]:
        return [
            r.find_elements("css selector", "td")[column].text
            for r in table.find_elements("css selector", "tbody tr")
            if r.is_displayed()
        ]

    before = [float(c) for c in cells()]
    browser.execute_script("arguments[0].click()", heads[column])
    after = [float(c) for c in cells()]
    assert after == sorted(before)
    browser.execute_script("arguments[0].click()", heads[column])
    assert [float(c) for c in cells()] == sorted(before, reverse=True)

    summary = pd.read_csv(root / "loadtest" / "summary.csv")
    box = browser.execute_script("return arguments[0].previousElementSibling", table)
    box.send_keys("medusa")
    rows = [
        r.find_elements("css selector", "td")[0].text
        for r in table.find_elements("css selector", "tbody tr")
        if r.is_displayed()
    ]
    assert rows == ["medusa"] * int((summary["variant"] == "medusa").sum())
