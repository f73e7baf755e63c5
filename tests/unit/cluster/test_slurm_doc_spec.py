"""docs/slurm.md (the cluster page the README links): its ready-to-edit spec is a valid bench
spec whose shards are the ones the page describes."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.data import REPO_ROOT
from trtbench.cluster.shards import plan_shards
from trtbench.spec.bench import parse_spec


def test_the_cluster_spec_in_the_docs_parses_and_shards():
    text = (REPO_ROOT / "docs" / "slurm.md").read_text()
    section = text[text.index("# Running on a Slurm cluster") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    spec = parse_spec(block.group(1), source="docs/slurm.md", base_dir=Path("/shared"))
    names = [v.name for v in spec.variants]
    assert [s.variants for s in plan_shards(names, "baseline", 1)] == [
        ("baseline", "draft-k4"),
        ("baseline", "medusa"),
    ]
    assert {v.tp_size for v in spec.variants} == {8}
