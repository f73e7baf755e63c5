"""report.html: report.md's own Markdown rendered as one self-contained page (pure: text and
figures in, HTML out).

The page is report.md rendered by markdown-it-py (CommonMark with tables): its answer line
(recommendation.json's sentence, in bold under "Recommendation") set as a box, each
``![caption](plots/NAME.png)`` replaced by the interactive figure keyed NAME
(:mod:`page_figures`) or, where none, by the PNG inlined as a data URI; the figures without
a PNG (acceptance per position and per category, memory over time, rounds) follow the last
plot. Under each figure its unit, a link to its definition in docs/metrics.md (the heading's
anchor as GitHub makes it, :func:`anchor`; the link opens the checkout's copy,
:func:`definition_href`) and how it was drawn where that needs saying. plotly.js is inlined
once and every table sorts (click a header) and filters (the box above it) with a few lines
of inline script: the file opens offline, nothing is fetched.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import plotly.io as pio
from markdown_it import MarkdownIt
from plotly.offline import get_plotlyjs

from trtbench.core.run_dir import RunDir
from trtbench.profiling.report.page_figures import PageFigure, page_figures, palette
from trtbench.profiling.report.page_memory import memory_over_time, read_memory
from trtbench.profiling.report.run_data import RunData

EXTRA_SRC = "page:"
"""The source an extra figure's image line gets in the Markdown the page renders."""
ANSWER_MARK = "trtbench-answer-box"
"""The line that stands for the answer's paragraph until it is rendered as the box."""
_IMAGE = re.compile(r"^!\[[^\]]*\]\(([^)]+)\)$")
METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
"""docs/metrics.md of the checkout this module runs from (absent in a bare install)."""

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;
margin:0 auto;padding:1rem 1.5rem;color:#222;line-height:1.45}
#answer{font-size:1.25rem;font-weight:600;background:#eef6ee;border-left:6px solid #2ca02c;
padding:.8rem 1rem;margin:1rem 0}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.88rem;display:block;
overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;user-select:none;white-space:nowrap}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
input.filter{margin:.3rem 0;padding:.2rem .4rem;width:18rem}
code{background:#f4f4f4;padding:0 .2rem}pre{background:#f4f4f4;padding:.6rem;overflow:auto}
figure.plot{margin:1rem 0}figure img{max-width:100%}
figcaption{font-size:.85rem;color:#555;margin:.2rem 0 0 60px}
"""

SCRIPT = """
function cellKey(td){var t=td.textContent.trim();var m=t.match(/^[+-]?\\d[\\d,]*\\.?\\d*(e[+-]?\\d+)?/i);
return m?parseFloat(m[0].replace(/,/g,'')):null}
function sortTable(th){var table=th.closest('table'),body=table.tBodies[0];
var i=Array.prototype.indexOf.call(th.parentNode.children,th);
var dir=th.dataset.dir==='asc'?'desc':'asc';
table.querySelectorAll('th').forEach(function(h){delete h.dataset.dir});th.dataset.dir=dir;
var rows=Array.from(body.rows);rows.sort(function(a,b){
var x=cellKey(a.cells[i]),y=cellKey(b.cells[i]),s=dir==='asc'?1:-1;
if(x===null&&y===null)return s*a.cells[i].textContent.localeCompare(b.cells[i].textContent);
if(x===null)return 1;if(y===null)return -1;return s*(x-y)});
rows.forEach(function(r){body.appendChild(r)})}
function filterTable(input){var q=input.value.toLowerCase();
Array.from(input.nextElementSibling.tBodies[0].rows).forEach(function(r){
r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':''})}
document.querySelectorAll('table').forEach(function(table){
if(!table.tBodies.length)return;
var box=document.createElement('input');box.className='filter';box.type='search';
box.placeholder='filter rows';box.oninput=function(){filterTable(box)};
table.parentNode.insertBefore(box,table);
table.querySelectorAll('th').forEach(function(th){th.title='click to sort';
th.onclick=function(){sortTable(th)}})});
"""


def with_extra_figures(text: str, extra: Sequence[PageFigure]) -> str:
    """report.md's text with an image line ``![caption](page:KEY)`` per extra figure after
    its last image line (at the end when it has none)."""
    lines = text.splitlines()
    last = max(
        (i for i, line in enumerate(lines) if _IMAGE.match(line.strip())), default=None
    )
    added = [f"![{f.caption}]({EXTRA_SRC}{f.key})" for f in extra]
    at = len(lines) if last is None else last + 1
    return "\n".join([*lines[:at], *added, *lines[at:]]) + "\n"


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: its text lower-cased, every character
    but letters, digits, ``-``, ``_`` and spaces dropped, spaces made ``-``
    (``"Latency (per request, `summary.csv`)"`` → ``latency-per-request-summarycsv``)."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def definition_href(heading: str) -> str:
    """The link to ``heading`` in docs/metrics.md: the checkout's copy as a file URI where
    it exists (a page opened on the machine that made it), else the path relative to a
    trtbench checkout."""
    where = METRICS_DOC.as_uri() if METRICS_DOC.is_file() else "docs/metrics.md"
    return f"{where}#{anchor(heading)}"


def _caption_html(fig: PageFigure) -> str:
    """The line under a figure: unit, definition link, note (the parts it has)."""
    parts = [f"Unit: {html.escape(fig.unit)}."] if fig.unit else []
    if fig.definition:
        name = fig.definition.split(" (")[0]
        parts.append(
            f'Definition: <a class="definition" href="{html.escape(definition_href(fig.definition))}">'
            f"docs/metrics.md, “{html.escape(name)}”</a>."
        )
    if fig.note:
        parts.append(html.escape(fig.note))
    return f"<figcaption>{' '.join(parts)}</figcaption>" if parts else ""


def _figure_html(fig: PageFigure) -> str:
    body = pio.to_html(
        fig.figure,
        full_html=False,
        include_plotlyjs=False,
        div_id=f"plot-{fig.key}",
        config={"displaylogo": False, "responsive": True},
    )
    caption = _caption_html(fig)
    return f'<figure class="plot" data-key="{fig.key}">{body}{caption}</figure>\n'


def _png_html(path: Path, caption: str) -> str:
    if not path.is_file():
        return f"<p>(plot missing: {html.escape(path.name)})</p>\n"
    data = base64.b64encode(path.read_bytes()).decode()
    return (
        f'<figure class="png"><img alt="{html.escape(caption)}" '
        f'src="data:image/png;base64,{data}"></figure>\n'
    )


def render_page(
    markdown_text: str,
    answer: str | None,
    figures: Sequence[PageFigure],
    root: Path,
    title: str,
) -> str:
    """The page (module docstring).

    Args:
        markdown_text: report.md's text, as written.
        answer: recommendation.json's ``answer`` (Markdown inline), shown as a box where
            report.md has it as a bold line (first on the page where it has not); None:
            no box.
        figures: the interactive figures; a key that is a PNG stem in the text replaces
            that image, the others follow the last plot.
        root: the run directory (the PNGs without an interactive figure are read from it).
        title: the page's title.
    """
    by_key = {f.key: f for f in figures}
    images = (_IMAGE.match(line.strip()) for line in markdown_text.splitlines())
    stems = {Path(m.group(1)).stem for m in images if m}
    extra = [f for f in figures if f.key not in stems]
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def image(renderer, tokens, idx, options, env):
        src = tokens[idx].attrGet("src") or ""
        key = src[len(EXTRA_SRC) :] if src.startswith(EXTRA_SRC) else Path(src).stem
        if key in by_key:
            return _figure_html(by_key[key])
        return _png_html(root / src, tokens[idx].content)

    md.add_render_rule("image", image)
    lines = with_extra_figures(markdown_text, extra).splitlines()
    if answer is not None and f"**{answer}**" in lines:  # report.md's own answer line
        lines[lines.index(f"**{answer}**")] = ANSWER_MARK
    elif answer is not None:  # none: the box opens the page
        lines.insert(0, ANSWER_MARK)
    body = md.render("\n".join(lines) + "\n")
    if answer is not None:
        box = f'<p id="answer">{md.renderInline(answer)}</p>'
        body = body.replace(f"<p>{ANSWER_MARK}</p>", box, 1)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head>\n<body>\n{body}"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def write_page(
    report_md: Path,
    answer: str | None = None,
    figures: Sequence[PageFigure] = (),
    title: str | None = None,
) -> Path:
    """``report.html`` beside ``report_md``, rendered from its text as written
    (:func:`render_page`); returns its path.

    Raises:
        OSError: report.md cannot be read or report.html written.
    """
    text = report_md.read_text()
    first = text.splitlines()[0] if text else ""
    name = title or (first[2:] if first.startswith("# ") else report_md.parent.name)
    out = report_md.with_suffix(".html")  # report.md: report.html
    out.write_text(render_page(text, answer, figures, report_md.parent, name))
    return out


def write_run_page(
    report_md: Path,
    answer: str | None,
    run: RunData,
    tiers: pd.DataFrame,
    crossover: pd.DataFrame,
    ratio: str,
) -> Path:
    """``report.html`` of a run: :func:`write_page` with every figure its data allows
    (:func:`page_figures`: ``tiers`` the complete tiers, ``ratio`` the speedup's name;
    memory over time from the run's memory.csv, on one clock unless the run was gathered
    from cluster shards).

    Raises:
        DataFileError: memory.csv is present but corrupt.
    """
    samples = read_memory(RunDir(run.root).memory_csv)
    colors = palette(run.variants)  # one colour a variant, in every figure
    memory = memory_over_time(samples, "cluster" not in run.run, colors=colors)
    figures = page_figures(
        tiers,
        crossover,
        run.acceptance,
        run.rounds,
        ratio,
        run.baseline is not None,
        run.categories,
        memory,
        colors,
    )
    return write_page(report_md, answer, figures)
