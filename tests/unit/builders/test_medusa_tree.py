"""Medusa choices: parsing, validation, tree layout and expected acceptance length.

Expected values are worked out by hand below, or are facts from FasterDecoding/Medusa
``medusa/model/medusa_choices.py`` (mc_sim_7b_63: 63 nodes, depth 4, top-k [10, 10, 10, 2]) and
``assets/medusa_acc.csv`` (per-head accuracies).
"""

from __future__ import annotations

import numpy as np
import pytest

from trtbench.builders.medusa_tree import (
    NAMED_TREES,
    build_tree,
    expand_choices,
    expected_acceptance_length,
    packed_mask_words,
    parse_choices,
    per_rank_accuracies,
    render_brace,
    resolve_choices,
    sort_choices,
    validate_choices,
)
from trtbench.core.errors import ConfigError

SMALL = ((0,), (1,), (0, 0), (0, 1))  # root -> {[0] -> {[0,0], [0,1]}, [1]}


def test_small_tree_layout_by_hand():
    # Positions: 0 root, 1 [0], 2 [1], 3 [0,0], 4 [0,1] (sorted by depth, then path),
    # whatever order the input lists them in.
    tree = build_tree([[0, 1], [1], [0], [0, 0]])
    assert tree.choices == SMALL
    assert tree.num_nodes == 4
    assert tree.depth == 2
    assert tree.topk_per_depth == (2, 2)  # ranks 0..1 at depth 1 and at depth 2
    assert tree.parents == (-1, 0, 0, 1, 1)
    assert tree.position_offsets == (0, 1, 1, 2, 2)
    expected_mask = np.array(
        [  # columns: root, [0], [1], [0,0], [0,1]
            [1, 0, 0, 0, 0],  # root sees itself
            [1, 1, 0, 0, 0],  # [0]: root + self
            [1, 0, 1, 0, 0],  # [1]: root + self, not its sibling [0]
            [1, 1, 0, 1, 0],  # [0,0]: root, [0], self
            [1, 1, 0, 0, 1],  # [0,1]: root, [0], self, not its sibling [0,0]
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(tree.attention_mask, expected_mask)
    assert tree.attention_mask.dtype == np.bool_
    # Leaves in lexicographic order: [0,0], [0,1], [1]; rows padded to depth+1 = 3.
    np.testing.assert_array_equal(
        tree.retrieve_paths, [[0, 1, 3], [0, 1, 4], [0, 2, -1]]
    )


def test_tree_arrays_are_read_only():
    tree = build_tree(SMALL)
    with pytest.raises(ValueError):
        tree.attention_mask[0, 1] = True
    with pytest.raises(ValueError):
        tree.retrieve_paths[0, 0] = 7


def test_chain_mask_is_lower_triangular():
    tree = build_tree([[0], [0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(tree.attention_mask, np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(tree.retrieve_paths, [[0, 1, 2, 3]])
    assert tree.parents == (-1, 0, 1, 2)


def test_mc_sim_7b_63_shape():
    tree = build_tree("mc_sim_7b_63")
    assert tree.num_nodes == 63
    assert tree.depth == 4
    assert tree.topk_per_depth == (10, 10, 10, 2)
    # The first ten positions after the root are the top-10 candidates of head 1.
    assert tree.choices[:10] == tuple((k,) for k in range(10))
    assert tree.attention_mask.shape == (64, 64)
    assert tree.retrieve_paths.shape[1] == 5


@pytest.mark.parametrize("name", sorted(NAMED_TREES))
def test_named_trees_are_complete_63_node_trees(name):
    tree = build_tree(name)  # raises if a prefix were missing or a path repeated
    assert tree.num_nodes == 63  # every named tree has 63 nodes (medusa_choices.py)
    offsets = np.array(tree.position_offsets)
    # Each position sees itself, its ancestors and the root: depth + 1 positions.
    np.testing.assert_array_equal(tree.attention_mask.sum(axis=1), offsets + 1)
    for pos in range(1, 64):
        assert offsets[tree.parents[pos]] == offsets[pos] - 1
    # Every non-root position lies on some root->leaf path.
    seen = set(tree.retrieve_paths.ravel().tolist()) - {-1}
    assert seen == set(range(64))


def test_modelopt_61_node_tree_fits_three_heads():
    # The ModelOpt Llama-3.1-8B-Medusa example (NVIDIA/TensorRT-LLM
    # examples/llm-api/_tensorrt_engine/llm_medusa_decoding.py) drops [0,0,0,0] and
    # [0,0,0,1] from mc_sim_7b_63, leaving 61 nodes of depth 3 for 3 heads.
    drop = ([0, 0, 0, 0], [0, 0, 0, 1])
    choices = [c for c in NAMED_TREES["mc_sim_7b_63"] if c not in drop]
    assert len(validate_choices(choices, max_draft_len=61, num_heads=3)) == 61
    tree = build_tree(choices)
    assert (tree.depth, tree.topk_per_depth) == (3, (10, 10, 10))


def test_sort_and_expand():
    assert sort_choices([[1], [0, 0], [2, 0], [0], [1, 0]]) == (
        (0,),
        (1,),
        (0, 0),
        (1, 0),
        (2, 0),
    )
    # Leaves only -> every prefix added once; duplicates and the empty path dropped.
    assert expand_choices([[0, 1, 2], [3], [0, 1, 2], []]) == (
        (0,),
        (3,),
        (0, 1),
        (0, 1, 2),
    )
    assert expand_choices(SMALL) == SMALL


@pytest.mark.parametrize(
    "text",
    [
        "[[0], [0, 1]]",
        "{0}, {0, 1}",
        "{{0}, {0, 1}}",
        "{0}\\, {0\\, 1}",  # fill_template.py escapes (TensorRT-LLM triton_backend/tools/)
        "  [[0],\n [0,1]] ",
    ],
)
def test_parse_choices_forms(text):
    assert parse_choices(text) == ((0,), (0, 1))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[[0], [a]]", "cannot parse"),
        ("{0}, {1", "cannot parse"),
        ("[0, 1]", "not a list"),  # a flat Python list is not a tree
        ("[[-1]]", "non-negative"),
        ("[[0.5]]", "non-negative"),
        ("[[True]]", "non-negative"),
        ("7", "list of paths"),
    ],
)
def test_parse_choices_rejects_garbage(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_choices(text)


def test_render_brace_and_round_trip():
    assert render_brace(SMALL) == "{0}, {1}, {0, 0}, {0, 1}"
    assert render_brace([[0], [0, 1]], escape_commas=True) == "{0}\\, {0\\, 1}"
    for name in NAMED_TREES:
        choices = resolve_choices(name)
        assert parse_choices(render_brace(choices)) == choices
        assert parse_choices(render_brace(choices, escape_commas=True)) == choices


def test_resolve_choices():
    assert resolve_choices("mc_sim_7b_63")[:3] == (
        (0,),
        (0, 0),
        (1,),
    )  # file order kept
    assert resolve_choices("{0}, {0, 1}") == ((0,), (0, 1))
    assert resolve_choices([[0], [0, 1]]) == ((0,), (0, 1))
    with pytest.raises(ConfigError, match="mc_sim_7b_666.*mc_sim_7b_63.*zephyr_stage2"):
        resolve_choices("mc_sim_7b_666")


@pytest.mark.parametrize(
    ("choices", "max_draft_len", "num_heads", "pattern"),
    [
        ([], None, None, r"empty; give at least one path"),
        ([[0], []], None, None, r"empty path \[\]; the root is implicit"),
        ([[0], [0, 1], [0]], None, None, r"\[0\] is listed 2 times"),
        (
            [[0], [0, 1, 2]],
            None,
            None,
            r"\[0, 1, 2\] lacks its prefix \[0, 1\].*expand",
        ),
        ([[1, 0]], None, None, r"\[1, 0\] lacks its prefix \[1\]"),
        ("mc_sim_7b_63", 10, None, r"63 nodes.*max_draft_len is 10"),
        ("mc_sim_7b_63", None, 3, r"depth 4 exceeds num_medusa_heads 3"),
    ],
)
def test_validate_choices_failures(choices, max_draft_len, num_heads, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate_choices(
            resolve_choices(choices), max_draft_len=max_draft_len, num_heads=num_heads
        )


def test_validate_choices_accepts_and_sorts():
    assert validate_choices([[0, 1], [0]], max_draft_len=2, num_heads=2) == (
        (0,),
        (0, 1),
    )
    assert (
        len(
            validate_choices(NAMED_TREES["mc_sim_7b_63"], max_draft_len=63, num_heads=4)
        )
        == 63
    )


@pytest.mark.parametrize(
    ("top1", "expected"),
    [
        # Vicuna-7B Medusa-1 top-1 per head (Medusa assets/medusa_acc.csv): .560 .316 .201 .147
        # 1 + .56 + .56*.316 + .17696*.201 + .03556896*.147
        #   = 1 + .56 + .17696 + .03556896 + .0052286371 = 1.7777575971 -> 1.78
        ((0.560, 0.316, 0.201, 0.147), 1.7777575971),
        # 13B: 1 + .594 + .20196 + .04362336 + .006543504 = 1.846126864 -> 1.85
        ((0.594, 0.340, 0.216, 0.150), 1.846126864),
        # 33B: 1 + .605 + .21538 + .0484605 + .00775368 = 1.87659418 -> 1.88
        ((0.605, 0.356, 0.225, 0.160), 1.87659418),
    ],
)
def test_expected_acceptance_length_top1_chain(top1, expected):
    chain = [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]
    accuracies = [[a] for a in top1]
    assert expected_acceptance_length(chain, accuracies) == pytest.approx(
        expected, abs=1e-9
    )


def test_expected_acceptance_length_uses_ranks():
    # Nodes [0], [1], [0,0]: 1 + a1(0) + a1(1) + a1(0)*a2(0) = 1 + .5 + .2 + .5*.4 = 1.9
    accuracies = [[0.5, 0.2], [0.4]]
    assert expected_acceptance_length([[0], [1], [0, 0]], accuracies) == pytest.approx(
        1.9
    )
    with pytest.raises(ConfigError, match="rank 1 of head 2"):
        expected_acceptance_length([[0], [0, 1]], accuracies)
    with pytest.raises(ConfigError, match="must lie in"):
        expected_acceptance_length([[0], [0, 0]], [[1.5], [0.4]])


def test_per_rank_accuracies():
    # cumulative top-1/2/3 = .5/.7/.8 -> per rank .5, .2, .1
    assert per_rank_accuracies([[0.5, 0.7, 0.8]])[0] == pytest.approx([0.5, 0.2, 0.1])
    with pytest.raises(ConfigError, match="head 1 decrease"):
        per_rank_accuracies([[0.5, 0.4]])


@pytest.mark.parametrize(
    ("max_draft_len", "words"), [(0, 1), (31, 1), (32, 2), (63, 2), (64, 3)]
)
def test_packed_mask_words(max_draft_len, words):
    # ceil((max_draft_len + 1) / 32): 1/32->1, 32/32->1, 33/32->2, 64/32->2, 65/32->3
    assert packed_mask_words(max_draft_len) == words


def test_packed_mask_words_rejects_negative():
    with pytest.raises(ConfigError, match="max_draft_len"):
        packed_mask_words(-1)
