"""Cutting the matrix into shards: hand-worked cases."""

from __future__ import annotations

import pytest

from trtbench.cluster.shards import Shard, plan_shards, shard_label, shard_of_variant
from trtbench.core.errors import ConfigError

FIVE = ["baseline", "draft-k4", "medusa", "ngram-k4", "eagle3-k4"]


def test_one_variant_per_shard_each_beside_the_baseline():
    assert plan_shards(FIVE, "baseline", 1) == [
        Shard(0, ("baseline", "draft-k4")),
        Shard(1, ("baseline", "medusa")),
        Shard(2, ("baseline", "ngram-k4")),
        Shard(3, ("baseline", "eagle3-k4")),
    ]


def test_two_per_shard_leaves_a_last_shard_of_one():
    # 4 non-baseline variants / 2 = 2 shards; 3 / 2 = 2 shards, the last with 1.
    assert [s.variants for s in plan_shards(FIVE[:4], "baseline", 2)] == [
        ("baseline", "draft-k4", "medusa"),
        ("baseline", "ngram-k4"),
    ]


def test_a_baseline_not_first_in_the_spec_still_leads_each_shard():
    shards = plan_shards(["a", "base", "b"], "base", 5)
    assert shards == [Shard(0, ("base", "a", "b"))]
    assert shards[0].name == "s0"


def test_the_baseline_alone_is_one_shard():
    assert plan_shards(["base"], "base", 1) == [Shard(0, ("base",))]


@pytest.mark.parametrize(
    ("names", "baseline", "per", "needle"),
    [
        (["a", "b"], None, 1, "mode: baseline"),
        (["a", "b"], "base", 1, "mode: baseline"),
        (["base", "a"], "base", 0, "--variants-per-shard is 0"),
    ],
)
def test_refused(names, baseline, per, needle):
    with pytest.raises(ConfigError, match=needle):
        plan_shards(names, baseline, per)


def test_labels_name_the_baseline_per_shard_only():
    s1 = Shard(1, ("base", "med"))
    assert shard_label("base", s1, "base") == "base@s1"
    assert shard_label("med", s1, "base") == "med"
    assert shard_of_variant([Shard(0, ("base", "dt")), s1], "med") == s1
    assert shard_of_variant([s1], "base") is None
