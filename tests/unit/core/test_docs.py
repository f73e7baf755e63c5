"""The README (a landing page) and docs/ say what the code does (issue 51): the two commands
CI runs, every link and anchor resolves, the GPU spec the README shows is a valid spec that
races its variants, the spec page names every variant field, and the run-directory tree
names the follow-up's files."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests.support.data import REPO_ROOT
from trtbench.profiling.report.followup_check import (
    CHECK_JSON,
    CONFIRM_DIR,
    FOLLOW_UP_DIR,
)
from trtbench.spec.bench import VariantSpec, parse_spec
from trtbench.spec.design import resolve_design

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (``-`` and ``_`` kept),
    spaces to ``-``."""
    text = heading.strip().lower()
    kept = "".join(
        c
        for c in text
        if c in " -_" or unicodedata.category(c)[0] in "LN"  # letters, numbers
    )
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def test_slug_follows_github():
    """Hand-worked: GitHub's anchors of three headings of these pages."""
    assert slug("Your model on your GPU (NGC container)") == (
        "your-model-on-your-gpu-ngc-container"
    )
    assert slug("`recommendation.json`") == "recommendationjson"
    assert slug("Measured side by side: rounds") == "measured-side-by-side-rounds"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    text = FENCE.sub("", page.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (
            anchor and dest.suffix == ".md" and anchor not in anchors(dest)
        ):
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_landing_page_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 230
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert "bash scripts/demo.sh\n" in blocks
    assert "bash scripts/test.sh\n" in blocks
    assert "exec bash scripts/test.sh" in (REPO_ROOT / ".ci" / "run").read_text()
    contents = text.split("**Contents**", 1)[1].split("\n## ", 1)[0]
    headings = re.findall(r"^## (.+)$", text, re.M)
    for heading in headings:  # every section is in the table of contents
        assert f"(#{slug(heading)})" in contents, heading


def test_every_doc_page_is_reachable_from_the_readme():
    """A page moved out of the README must stay findable: every docs/*.md page is linked
    from the README or from a page the README links."""
    linked = {README.resolve()}
    frontier = [README]
    while frontier:
        page = frontier.pop()
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            path = target.partition("#")[0]
            if not path or re.match(r"[a-z]+:", target):
                continue
            dest = (page.parent / path).resolve()
            if dest.suffix == ".md" and dest.exists() and dest not in linked:
                linked.add(dest)
                frontier.append(dest)
    unreachable = [
        str(p.relative_to(REPO_ROOT))
        for p in DOCS.glob("*.md")
        if p.resolve() not in linked
    ]
    assert unreachable == []


def readme_gpu_spec() -> str:
    section = README.read_text().split("## Your model on your GPU", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_gpu_spec_races_a_draft_model_and_eagle3_on_trtllm_serve(
    tmp_path, monkeypatch
):
    for var in ("MODEL_DIR", "DRAFT_DIR", "EAGLE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    spec = parse_spec(readme_gpu_spec(), source="README.md", base_dir=tmp_path)
    assert spec.backend == "trtllm-pytorch"
    assert [v.mode for v in spec.variants] == ["baseline", "draft_target", "eagle3"]
    assert {v.server for v in spec.variants} == {"trtllm-serve"}
    assert spec.variants[2].speculative_model == tmp_path / "eagle_dir"
    assert spec.models.draft == tmp_path / "draft_dir"
    # the servers share the GPU: interleaved rounds, raced until decided, 20 minutes at most
    design = resolve_design(spec, spec.variants)
    assert (design.name, design.stop_when_decided, design.max_minutes) == (
        "interleaved",
        True,
        20,
    )
    assert max(spec.loadtest.concurrency) <= min(
        v.max_batch_size for v in spec.variants
    )


def test_the_spec_pages_name_every_variant_field():
    text = (DOCS / "spec.md").read_text() + (DOCS / "llmapi.md").read_text()
    missing = [f for f in VariantSpec.model_fields if f"`{f}`" not in text]
    assert missing == []


def test_the_run_directory_tree_names_the_follow_ups_files():
    """The tree in docs/outputs.md and the README's table name follow-up/ (issue 51: the
    tree omitted it), with the check file and the confirmation folder it writes."""
    tree = (DOCS / "outputs.md").read_text().split("## The run directory", 1)[1]
    tree = re.search(r"```\n(.*?)```", tree, re.S).group(1)
    for path in (
        f"{FOLLOW_UP_DIR}/",
        f"{FOLLOW_UP_DIR}/{CHECK_JSON}",
        f"{FOLLOW_UP_DIR}/{CONFIRM_DIR}/",
    ):
        assert re.search(rf"^  {re.escape(path)}\s", tree, re.M), path
    assert f"| `{FOLLOW_UP_DIR}/` |" in README.read_text()
