"""Medusa acceptance of all rows at once (``tree_accept.py``) and the batched cache compaction
(``ModelRunner.keep_paths``), on hand-worked cases.

The tree ``[[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]`` lays out positions 1..6 with
parents 1→0, 2→0, 3→1, 4→1, 5→2, 6→3. Every row feeds the tokens 10..16 (position p holds
10 + p); the picks ``preds`` decide which path matches.
"""

from __future__ import annotations

import torch

from tests.support.random_llama import random_llama
from trtbench.builders.medusa_tree import build_tree
from trtbench.builders.reference.runner import ModelRunner
from trtbench.builders.reference.tree_accept import TreeTables, accept_tree

TREE = build_tree([[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]])
NODES = list(range(10, 17))
X = 90  # a pick no node holds

CASES = {
    # picks at positions 0..6           end accepted path          tokens
    "0-1-4": ([11, 14, X, X, 99, X, X], 4, 2, [0, 1, 4, 4], [11, 14, 99, 99]),
    "none": ([40, X, X, X, X, X, X], 0, 0, [0, 0, 0, 0], [40, 40, 40, 40]),
    "0-1-3-6": ([11, 13, X, 16, X, X, 77], 6, 3, [0, 1, 3, 6], [11, 13, 16, 77]),
    "0-2-5": ([12, X, 15, X, X, 55, X], 5, 2, [0, 2, 5, 5], [12, 15, 55, 55]),
    # node 3 matches its parent's pick but node 1 (its parent) does not: not accepted
    "orphan": ([40, 13, X, X, X, X, X], 0, 0, [0, 0, 0, 0], [40, 40, 40, 40]),
}


def test_tables_of_the_tree():
    tables = TreeTables.build(TREE, torch.device("cpu"))
    assert tables.parent.tolist() == [0, 0, 0, 1, 1, 2, 3]
    assert tables.score.tolist() == [1, 2, 2, 3, 3, 3, 4]  # depth + 1
    # depth; path root -> node padded with the node; the path after the root, then node
    assert tables.rows[6].tolist() == [3, 0, 1, 3, 6, 1, 3, 6, 6]
    assert tables.rows[2].tolist() == [1, 0, 2, 2, 2, 2, 2, 2, 2]
    assert tables.rows[0].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0]
    # position 6's ancestors other than the root: 1, 3 and itself
    assert tables.ancestors[:, 6].tolist() == [0, 1, 0, 1, 0, 0, 1]


def test_every_row_accepts_its_own_longest_matching_path():
    tables = TreeTables.build(TREE, torch.device("cpu"))
    preds = torch.tensor([case[0] for case in CASES.values()])
    nodes = torch.tensor([NODES] * len(CASES))
    got = accept_tree(tables, nodes, preds, torch.ones(len(CASES), dtype=torch.bool))
    assert got.end.tolist() == [case[1] for case in CASES.values()]
    assert got.accepted.tolist() == [case[2] for case in CASES.values()]
    assert got.path.tolist() == [case[3] for case in CASES.values()]
    assert got.tokens.tolist() == [case[4] for case in CASES.values()]


def test_a_row_not_allowed_accepts_nothing():
    tables = TreeTables.build(TREE, torch.device("cpu"))
    preds = torch.tensor([CASES["0-1-3-6"][0]] * 2)
    nodes = torch.tensor([NODES] * 2)
    got = accept_tree(tables, nodes, preds, torch.tensor([False, True]))
    assert got.accepted.tolist() == [0, 3]
    assert got.tokens[0].tolist() == [11, 11, 11, 11]  # the pick at the root


def test_keep_paths_moves_each_rows_path_to_its_start():
    runner = ModelRunner(random_llama(seed=1), max_cache_len=12, slots=2)
    for layer in runner.cache.keys + runner.cache.values:
        # entry (row r, position p) holds 100 r + p in every head and feature
        marks = 100 * torch.arange(2).view(2, 1) + torch.arange(12).view(1, 12)
        layer.copy_(marks.view(2, 1, 12, 1).expand_as(layer).to(layer.dtype))
    # row 0 verified a step at 2..8 and keeps offsets 0, 2, 3; row 1 at 5.. keeps 0, 1
    runner.keep_paths([2, 5], torch.tensor([[0, 2, 3], [0, 1, 1]]))
    for layer in runner.cache.keys + runner.cache.values:
        assert layer[0, 0, :, 0].tolist()[:5] == [0, 1, 2, 4, 5]
        assert layer[1, 0, :, 0].tolist()[:7] == [100, 101, 102, 103, 104, 105, 106]
        assert layer[0, 1, 6, 3].item() == 6  # past the kept path: untouched
