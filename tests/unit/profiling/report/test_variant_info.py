"""A variant's mode guessed from its name (``Method.name_hints``) and its Medusa tree read
only for a method whose drafts form a tree; expected values written out by hand."""

from __future__ import annotations

import pytest

from trtbench.profiling.report.variant_info import mode_from_name, variant_info


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("Medusa-c63", "medusa"),
        ("draft-k4", "draft_target"),
        ("DTM-k2", "draft_target"),
        ("baseline", "baseline"),
        ("medusa-vs-draft", "medusa"),  # two methods named: the later method's word
        ("baseline-draft", "draft_target"),
        ("eagle3-k4", None),  # no file, no word: unknown rather than a guess
        ("ngram", None),
    ],
)
def test_a_mode_is_guessed_from_the_words_of_a_name(name, mode):
    assert mode_from_name(name) == mode


def test_a_tree_is_read_for_a_tree_method_only():
    tree = {"medusa": {"choices": [[0], [1], [0, 0]]}}
    medusa = variant_info("m", {"mode": "medusa", **tree}, {})
    assert medusa.tree_nodes == 3
    assert medusa.medusa_choices == ((0,), (1,), (0, 0))
    chain = variant_info("d", {"mode": "draft_target", **tree}, {})
    legacy = variant_info("e", {"mode": "eagle", **tree}, {})
    assert (chain.tree_nodes, chain.medusa_choices) == (None, None)
    assert (legacy.tree_nodes, legacy.medusa_choices) == (None, None)
