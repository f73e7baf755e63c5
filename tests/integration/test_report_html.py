"""report.html in a real browser: ``trtbench report`` renders the committed demo run
(``tests/data/demo_run``, its memory samples included) and ``trtbench collect`` a cluster
run made of it (two shards, each a part of the demo's variants beside the baseline; Slurm
answers that it no longer knows the jobs, so their exit codes decide), and headless
Chromium opens each page from disk, offline.

Checked against the run's own tables, not the page's code: the pages fit the 5 MB budget,
no console error, the answer box reads recommendation.json's sentence, every plot has one
trace per variant (memory: per variant and GPU) the CSVs hold, each carries its unit and a
link to a heading docs/metrics.md has, a legend click hides its variant, a table sorts by
a number and filters by a word. Skipped with the reason when Chromium, its driver or
Selenium cannot be had (``tests/support/browser.py`` installs them with apt-get as root).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.browser import headless_chromium
from tests.support.data import REPO_ROOT
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


SHARDS = (("baseline", "draft-k4", "eagle3-k4"), ("baseline", "medusa", "ngram-k4"))
"""The cluster run's shards: the baseline first, as the driver plans them."""
FORGOTTEN_JOBS = {
    "squeue": "exit 0",  # queued or running: none
    "scontrol": "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
    "sbatch": "echo 'not in this test' >&2; exit 1",
    "scancel": "exit 0",
}
"""A Slurm that ended the jobs long ago (past MinJobAge): each shard's exit_code decides."""


def _cluster_run(root: Path, demo: Path, bin_dir: Path) -> None:
    """A finished cluster run in ``root``: per shard of :data:`SHARDS` the demo run with the
    rows and engines of its variants only, exit code 0; state.json naming them as tasks 0
    and 1 of job 101; the Slurm commands of :data:`FORGOTTEN_JOBS` in ``bin_dir``."""
    for k, variants in enumerate(SHARDS):
        shard = root / "shards" / f"s{k}"
        shutil.copytree(demo, shard)
        for path in shard.rglob("*.csv"):
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            if "variant" in frame:
                frame[frame["variant"].isin(variants)].to_csv(path, index=False)
        for engine in (shard / "engines").iterdir():
            if engine.name not in variants:
                shutil.rmtree(engine)
        (shard / "exit_code").write_text("0\n")
        (shard / "host.txt").write_text(f"host=node{k}\nnode=node{k}\n")
    state = {
        "schema_version": 1,
        "spec": str(root / "spec.yaml"),  # gone: progress counts only
        "spec_sha256": "0" * 64,
        "baseline": "baseline",
        "shards": [{"index": k, "variants": list(v)} for k, v in enumerate(SHARDS)],
        "options": {"poll_s": 0.1},
        "submissions": [
            {"shard": f"s{k}", "job_id": "101", "task": k, "submitted_at": "-"}
            for k in range(len(SHARDS))
        ],
    }
    (root / "cluster").mkdir(parents=True)
    (root / "cluster" / "state.json").write_text(json.dumps(state))
    bin_dir.mkdir()
    for name, body in FORGOTTEN_JOBS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


@pytest.fixture(scope="module")
def collect_page(tmp_path_factory):
    """(run directory, report.html) of ``trtbench collect --no-wait`` on :func:`_cluster_run`,
    whose last line names the page."""
    base = tmp_path_factory.mktemp("collect")
    root = base / "run"
    _cluster_run(root, copy_real_run(base / "demo"), base / "bin")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{base / 'bin'}:{os.environ['PATH']}")
        done = CliRunner().invoke(cli, ["collect", str(root), "--no-wait"])
    assert done.exit_code == 0, done.output
    html = root / "report.html"
    assert done.output.rstrip().splitlines()[-1] == f"page: {html}"
    return root, html


def _metrics_anchors() -> set[str]:
    """The anchors GitHub gives docs/metrics.md's headings (outside code blocks): the text
    lower-cased, all but letters, digits, '-', '_' and spaces dropped, spaces made '-'."""
    anchors, fenced = set(), False
    for line in (REPO_ROOT / "docs" / "metrics.md").read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (m := re.match(r"^#{1,6} (.+)$", line)):
            anchors.add(
                re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            )
    return anchors


def _memory_lines(root: Path) -> list[str]:
    """memory.csv's lines by the figure's definition (docs/metrics.md): one per variant and
    NVML device holding a device reading, one per variant with an RSS reading."""
    memory = pd.read_csv(root / "memory.csv")
    nvml = memory[memory["source"] == "nvml"]
    held = nvml[nvml["proc_used_bytes"].notna() | nvml["mem_used_bytes"].notna()]
    rss = memory[(memory["source"] == "rss") & memory["rss_bytes"].notna()]
    devices = (
        held[["variant", "device_index"]].drop_duplicates().itertuples(index=False)
    )
    return sorted(
        [f"{v} GPU {int(d)}" for v, d in devices] + list(rss["variant"].unique())
    )


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
    categories = pd.read_csv(loadtest / "categories.csv")
    complete = categories[categories["tier_status"] == "complete"]
    return {
        "speedup": sorted(measured - {baseline}),
        "ttft": sorted(measured),
        "tpot": sorted(measured),
        "throughput": sorted(measured),
        "acceptance": sorted(measured - {baseline}),
        "positions": sorted(
            set(acceptance.loc[acceptance["kind"] == "position", "variant"])
        ),
        "categories": sorted(
            set(complete.loc[complete["acceptance_length_tokens"].notna(), "variant"])
        ),
        "memory_time": _memory_lines(root),
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


def _evaluate(browser, html: Path, script: str):
    """The value of ``script`` run in the page ``html`` once it has drawn."""
    _open(browser, html)
    return browser.execute_script(script)


@pytest.mark.parametrize("which", ["page", "collect_page"])
def test_the_page_is_one_offline_file_within_budget(which, request):
    _, html = request.getfixturevalue(which)
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
        for key, name in (("rounds", "rounds"), ("memory_time", "memory")):
            figure = browser.find_element("css selector", f"figure[data-key={key}]")
            browser.execute_script("arguments[0].scrollIntoView()", figure)
            figure.screenshot(str(Path(folder) / f"report_html_{name}.png"))


def test_the_collect_page_loads_and_opens_with_the_answer(collect_page, browser):
    root, html = collect_page
    browser.get_log("browser")
    _open(browser, html)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    answer = json.loads((root / "recommendation.json").read_text())["answer"]
    assert browser.find_element("id", "answer").text == answer.replace("`", "")
    assert browser.execute_script(  # first on the page: before every table
        "var a=document.getElementById('answer');return Array.from("
        "document.querySelectorAll('table')).every(function(e){return "
        "a.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING})"
    )


def test_the_collect_page_comparison_sorts_and_filters(collect_page, browser):
    root, html = collect_page
    _open(browser, html)
    table = _table_with(browser, "tok/s speedup [≥ 95 % CI]")
    heads = table.find_elements("css selector", "th")
    column = [h.text for h in heads].index("output tok/s")
    before = [float(c) for c in _column(table, column)]
    browser.execute_script("arguments[0].click()", heads[column])
    assert [float(c) for c in _column(table, column)] == sorted(before)

    summary = pd.read_csv(root / "loadtest" / "summary.csv")  # the merged rows
    shown = _filtered(browser, table, "@s1")
    assert shown == ["baseline@s1"] * int((summary["variant"] == "baseline@s1").sum())


def test_each_plot_names_its_unit_and_links_its_definition(page, browser):
    captions = _evaluate(
        browser,
        page[1],
        "return Array.from(document.querySelectorAll('figure.plot')).map(function(f){"
        "var c=f.querySelector('figcaption'), a=c && c.querySelector('a.definition');"
        "return [f.dataset.key, c ? c.textContent : '', a ? a.href : '']})",
    )
    anchors = _metrics_anchors()
    for key, text, href in captions:
        assert re.match(r"Unit: \S+", text), key
        doc, _, anchor = href.partition("#")
        assert doc.endswith("docs/metrics.md") and anchor in anchors, (key, href)


def test_the_memory_plot_is_thinned_within_its_budget_and_says_so(page, browser):
    root, html = page
    points, note = _evaluate(
        browser,
        html,
        "var f=document.querySelector('figure.plot[data-key=memory_time]');"
        "return [f.querySelector('.plotly-graph-div').data.reduce(function(n,t)"
        "{return n+t.x.length},0), f.querySelector('figcaption').textContent]",
    )
    memory = pd.read_csv(root / "memory.csv")
    readings = int(memory["rss_bytes"].notna().sum())  # the demo ran without NVML
    assert readings > 2000 and points <= 2000  # thinned to the figure's budget
    assert f"{readings} readings drawn as {points} points" in note


def test_every_plot_draws_one_trace_per_variant(page, browser):
    root, html = page
    drawn = _evaluate(
        browser,
        html,
        "var out={};document.querySelectorAll('figure.plot').forEach(function(f){"
        "out[f.dataset.key]=f.querySelector('.plotly-graph-div').data"
        ".map(function(t){return t.name})});return out",
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


def _table_with(browser, heading: str):
    """The first table with a column headed ``heading``."""
    tables = browser.find_elements("css selector", "table")
    return next(
        t
        for t in tables
        if heading in [h.text for h in t.find_elements("css selector", "th")]
    )


def _column(table, column: int) -> list[str]:
    """The shown rows' cells of ``column``, top to bottom."""
    return [
        r.find_elements("css selector", "td")[column].text
        for r in table.find_elements("css selector", "tbody tr")
        if r.is_displayed()
    ]


def _filtered(browser, table, word: str) -> list[str]:
    """The first cells of the rows still shown after typing ``word`` in the table's box."""
    box = browser.execute_script("return arguments[0].previousElementSibling", table)
    box.send_keys(word)
    return _column(table, 0)


def _per_tier(browser):
    return _table_with(browser, "TPOT mean ms")


def test_the_per_tier_table_sorts_by_a_number_and_filters(page, browser):
    root, html = page
    _open(browser, html)
    table = _per_tier(browser)
    heads = table.find_elements("css selector", "th")
    column = [h.text for h in heads].index("output tok/s")
    before = [float(c) for c in _column(table, column)]
    browser.execute_script("arguments[0].click()", heads[column])
    assert [float(c) for c in _column(table, column)] == sorted(before)
    browser.execute_script("arguments[0].click()", heads[column])
    assert [float(c) for c in _column(table, column)] == sorted(before, reverse=True)

    summary = pd.read_csv(root / "loadtest" / "summary.csv")
    rows = _filtered(browser, table, "medusa")
    assert rows == ["medusa"] * int((summary["variant"] == "medusa").sum())
