"""Medusa choices (the speculation tree): parse, resolve, validate, expand, and turn into tensors.

A *choice* is a root path ``(k_1, ..., k_d)``: the rank-``k_1`` candidate of Medusa head 1, then
the rank-``k_2`` candidate of head 2, ... The root (the base model's own token) is implicit, so ``n``
choices verify ``n + 1`` tokens per step (NVIDIA/TensorRT-LLM
``docs/source/legacy/advanced/speculative-decoding.md``). Position 0 is the root, position
``i + 1`` is ``choices[i]`` sorted by (depth, path) as Medusa's ``generate_medusa_buffers``.

Text forms: Python lists ``"[[0], [0, 1]]"`` (``run.py --medusa_choices``) and Triton brace syntax
``"{0}, {0, 1}"`` (``tensorrt_llm`` parameter ``medusa_choices``); inside ``fill_template.py``
arguments every comma needs a backslash, ``"{0}\\, {0\\, 1}"`` (NVIDIA/TensorRT-LLM
``triton_backend/tools/fill_template.py`` splits its pairs on unescaped commas).

Named trees: the lists in FasterDecoding/Medusa ``medusa/model/medusa_choices.py`` (``e2a5d20``),
63 nodes each; ``mc_sim_7b_63`` is the TensorRT-LLM and Triton default.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from trtbench.core.errors import ConfigError

Choices = tuple[tuple[int, ...], ...]

DEFAULT_TREE = "mc_sim_7b_63"

# fmt: off
NAMED_TREES: dict[str, list[list[int]]] = {
    "mc_sim_7b_63": [
        [0], [0, 0], [1], [0, 1], [2], [0, 0, 0], [1, 0], [0, 2], [3], [0, 3], [4],
        [0, 4], [2, 0], [0, 5], [0, 0, 1], [5], [0, 6], [6], [0, 7], [0, 1, 0], [1, 1],
        [7], [0, 8], [0, 0, 2], [3, 0], [0, 9], [8], [9], [1, 0, 0], [0, 2, 0], [1, 2],
        [0, 0, 3], [4, 0], [2, 1], [0, 0, 4], [0, 0, 5], [0, 0, 0, 0], [0, 1, 1],
        [0, 0, 6], [0, 3, 0], [5, 0], [1, 3], [0, 0, 7], [0, 0, 8], [0, 0, 9], [6, 0],
        [0, 4, 0], [1, 4], [7, 0], [0, 1, 2], [2, 0, 0], [3, 1], [2, 2], [8, 0],
        [0, 5, 0], [1, 5], [1, 0, 1], [0, 2, 1], [9, 0], [0, 6, 0], [0, 0, 0, 1],
        [1, 6], [0, 7, 0]
    ],
    "vicuna_7b_stage1": [
        [0], [0, 0], [1], [2], [0, 1], [1, 0], [3], [0, 2], [4], [0, 0, 0], [0, 3],
        [5], [2, 0], [0, 4], [6], [0, 5], [1, 1], [0, 0, 1], [7], [3, 0], [0, 6], [8],
        [9], [0, 1, 0], [0, 7], [0, 8], [4, 0], [0, 0, 2], [1, 2], [0, 9], [2, 1],
        [5, 0], [1, 0, 0], [0, 0, 3], [1, 3], [0, 2, 0], [0, 1, 1], [0, 0, 4], [6, 0],
        [1, 4], [0, 0, 5], [2, 2], [0, 3, 0], [3, 1], [0, 0, 6], [7, 0], [1, 5],
        [1, 0, 1], [2, 0, 0], [0, 0, 7], [8, 0], [0, 0, 0, 0], [4, 1], [0, 1, 2],
        [0, 4, 0], [9, 0], [0, 2, 1], [2, 3], [1, 6], [0, 0, 8], [0, 5, 0], [3, 2],
        [5, 1]
    ],
    "vicuna_7b_stage2": [
        [0], [0, 0], [1], [0, 1], [0, 0, 0], [1, 0], [2], [0, 2], [0, 0, 1], [0, 3],
        [3], [0, 1, 0], [2, 0], [4], [0, 0, 2], [0, 4], [1, 1], [1, 0, 0],
        [0, 0, 0, 0], [5], [0, 0, 3], [0, 5], [0, 2, 0], [3, 0], [0, 1, 1], [0, 6],
        [6], [0, 7], [0, 0, 4], [4, 0], [1, 2], [0, 8], [7], [0, 3, 0], [0, 0, 0, 1],
        [0, 0, 5], [2, 1], [0, 0, 6], [1, 0, 1], [0, 0, 1, 0], [2, 0, 0], [5, 0],
        [0, 9], [0, 1, 2], [8], [0, 4, 0], [0, 2, 1], [1, 3], [0, 0, 7], [0, 0, 0, 2],
        [0, 0, 8], [1, 1, 0], [0, 1, 0, 0], [6, 0], [9], [0, 1, 3], [0, 0, 0, 3],
        [1, 0, 2], [0, 5, 0], [3, 1], [0, 0, 2, 0], [7, 0], [1, 4]
    ],
    "vicuna_13b_stage1": [
        [0], [0, 0], [1], [0, 1], [2], [1, 0], [0, 0, 0], [0, 2], [3], [0, 3], [4],
        [2, 0], [0, 4], [0, 0, 1], [0, 5], [5], [1, 1], [0, 1, 0], [6], [0, 6],
        [0, 0, 2], [7], [3, 0], [8], [0, 7], [0, 8], [1, 0, 0], [0, 0, 3], [4, 0],
        [1, 2], [9], [0, 9], [2, 1], [0, 2, 0], [0, 0, 4], [1, 3], [0, 1, 1],
        [0, 0, 5], [5, 0], [0, 3, 0], [0, 0, 0, 0], [0, 0, 6], [6, 0], [1, 4],
        [2, 0, 0], [0, 1, 2], [3, 1], [0, 4, 0], [1, 0, 1], [2, 2], [0, 0, 7], [1, 5],
        [7, 0], [0, 0, 8], [8, 0], [0, 5, 0], [0, 0, 9], [0, 2, 1], [1, 1, 0],
        [0, 1, 3], [4, 1], [2, 3], [1, 6]
    ],
    "vicuna_13b_stage2": [
        [0], [0, 0], [1], [0, 0, 0], [0, 1], [1, 0], [2], [0, 2], [0, 0, 1], [0, 1, 0],
        [3], [0, 3], [2, 0], [0, 0, 2], [0, 0, 0, 0], [0, 4], [1, 0, 0], [1, 1], [4],
        [0, 0, 3], [0, 5], [0, 2, 0], [5], [3, 0], [0, 1, 1], [0, 6], [0, 0, 4],
        [0, 0, 0, 1], [0, 7], [0, 0, 5], [1, 2], [0, 0, 1, 0], [0, 3, 0], [1, 0, 1],
        [4, 0], [0, 0, 6], [0, 8], [2, 0, 0], [0, 9], [6], [7], [2, 1], [5, 0],
        [0, 1, 2], [0, 0, 0, 2], [8], [0, 4, 0], [0, 1, 0, 0], [0, 2, 1], [0, 0, 7],
        [1, 1, 0], [1, 3], [0, 0, 2, 0], [9], [0, 0, 8], [0, 5, 0], [0, 0, 0, 3],
        [0, 0, 9], [0, 1, 3], [1, 0, 2], [0, 0, 1, 1], [3, 0, 0], [1, 0, 0, 0]
    ],
    "vicuna_33b_stage1": [
        [0], [1], [0, 0], [2], [0, 1], [3], [1, 0], [4], [0, 2], [5], [0, 3],
        [0, 0, 0], [6], [0, 4], [2, 0], [7], [1, 1], [0, 5], [3, 0], [8], [9], [0, 6],
        [0, 7], [0, 0, 1], [1, 2], [4, 0], [0, 1, 0], [0, 8], [0, 9], [2, 1],
        [0, 0, 2], [5, 0], [1, 3], [0, 0, 3], [1, 0, 0], [1, 4], [6, 0], [0, 2, 0],
        [3, 1], [2, 2], [0, 0, 4], [7, 0], [0, 1, 1], [1, 5], [4, 1], [0, 0, 5],
        [0, 3, 0], [9, 0], [8, 0], [1, 6], [0, 0, 6], [2, 3], [0, 1, 2], [3, 2],
        [0, 4, 0], [2, 0, 0], [1, 7], [1, 0, 1], [0, 0, 7], [5, 1], [2, 4], [0, 0, 8],
        [0, 2, 1]
    ],
    "vicuna_33b_stage2": [
        [0], [0, 0], [1], [0, 1], [0, 0, 0], [1, 0], [2], [0, 2], [0, 0, 1], [0, 3],
        [3], [0, 1, 0], [2, 0], [0, 4], [4], [0, 0, 2], [1, 1], [1, 0, 0], [0, 5], [5],
        [0, 0, 0, 0], [0, 0, 3], [3, 0], [0, 2, 0], [0, 6], [0, 1, 1], [6], [0, 0, 4],
        [0, 7], [7], [1, 2], [4, 0], [8], [0, 3, 0], [0, 0, 5], [0, 0, 0, 1], [0, 8],
        [2, 1], [0, 9], [1, 0, 1], [2, 0, 0], [0, 0, 6], [5, 0], [0, 0, 1, 0], [1, 3],
        [0, 1, 2], [0, 4, 0], [0, 0, 7], [0, 2, 1], [9], [1, 1, 0], [0, 0, 0, 2],
        [6, 0], [0, 0, 8], [0, 1, 0, 0], [7, 0], [0, 1, 3], [0, 5, 0], [1, 4],
        [0, 0, 9], [3, 1], [1, 0, 2], [2, 2]
    ],
    "zephyr_stage2": [
        [0], [0, 0], [1], [0, 1], [2], [0, 0, 0], [1, 0], [0, 2], [3], [0, 3], [4],
        [2, 0], [0, 0, 1], [0, 4], [5], [0, 5], [0, 1, 0], [1, 1], [6], [0, 0, 2],
        [3, 0], [0, 6], [7], [0, 7], [0, 8], [0, 0, 3], [1, 0, 0], [0, 9], [0, 2, 0],
        [1, 2], [4, 0], [8], [9], [2, 1], [0, 1, 1], [0, 0, 4], [0, 0, 0, 0], [5, 0],
        [0, 3, 0], [1, 3], [0, 0, 5], [0, 0, 6], [6, 0], [2, 0, 0], [1, 0, 1],
        [0, 1, 2], [0, 4, 0], [1, 4], [3, 1], [2, 2], [0, 0, 7], [7, 0], [0, 2, 1],
        [0, 0, 8], [0, 1, 3], [0, 5, 0], [1, 5], [0, 0, 9], [1, 1, 0], [0, 0, 0, 1],
        [0, 0, 1, 0], [4, 1], [2, 3]
    ],
}
# fmt: on


def _tree_names() -> str:
    return ", ".join(sorted(NAMED_TREES))


def _is_rank(k: object) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0


def _as_choices(obj: object, source: str) -> Choices:
    """Check that ``obj`` is a sequence of sequences of non-negative ints; tuple-ize it."""
    if isinstance(obj, (str, bytes)) or not isinstance(obj, Sequence):
        raise ConfigError(
            f"medusa choices from {source} must be a list of paths such as [[0], [0, 1]], "
            f"got {type(obj).__name__}"
        )
    out = []
    for i, path in enumerate(obj):
        is_list = isinstance(path, Sequence) and not isinstance(path, (str, bytes))
        if not is_list or not all(_is_rank(k) for k in path):
            raise ConfigError(
                f"medusa choice #{i} from {source} is {path!r}, not a list of non-negative "
                "integer ranks; write every path as a list, e.g. [[0], [0, 1]]"
            )
        out.append(tuple(int(k) for k in path))
    return tuple(out)


def parse_choices(text: str) -> Choices:
    """Parse a tree written as a Python list or in Triton brace syntax.

    Accepts ``"[[0], [0, 1]]"``, ``"{0}, {0, 1}"``, ``"{{0}, {0, 1}}"`` and the
    ``fill_template.py`` form with escaped commas ``"{0}\\, {0\\, 1}"``
    (``triton_backend/tools/fill_template.py``). Order and duplicates are kept; call
    :func:`validate_choices` for the structural rules.

    Raises:
        ConfigError: the text is not a list of lists of non-negative integers.
    """
    raw = text.strip().replace("\\,", ",")
    if raw.startswith("{"):  # brace lists may omit the outer braces
        raw = raw.replace("{", "[").replace("}", "]")
        raw = raw if raw.startswith("[[") else f"[{raw}]"
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ConfigError(
            f"cannot parse medusa choices {text!r} ({exc.__class__.__name__}); write them as "
            "[[0], [0, 1]] or {0}, {0, 1}"
        ) from None
    return _as_choices(value, f"text {text!r}")


def resolve_choices(tree: str | Sequence[Sequence[int]]) -> Choices:
    """Turn a tree name (``NAMED_TREES``), a tree as text, or a list of paths into ``Choices``.

    The order of the input is kept; nothing is expanded or validated beyond types.

    Raises:
        ConfigError: unknown name (the message lists the known names) or malformed paths.
    """
    if isinstance(tree, str):
        name = tree.strip()
        if name in NAMED_TREES:
            return _as_choices(NAMED_TREES[name], f"tree {name!r}")
        if name and name[0] in "[{":
            return parse_choices(name)
        raise ConfigError(
            f"unknown medusa tree {tree!r}; use one of {_tree_names()} or a list of paths "
            "such as [[0], [0, 1]]"
        )
    return _as_choices(tree, "the given list")


def sort_choices(choices: Sequence[Sequence[int]]) -> Choices:
    """Canonical order: by depth, then lexicographic (Medusa ``generate_medusa_buffers``)."""
    return tuple(sorted((tuple(c) for c in choices), key=lambda c: (len(c), c)))


def expand_choices(choices: Sequence[Sequence[int]]) -> Choices:
    """Add every missing prefix (a leaves-only list becomes the full tree); drop duplicates.

    Returns canonical order (:func:`sort_choices`); empty paths (the root) are dropped.
    """
    nodes = {tuple(c[:d]) for c in choices for d in range(1, len(c) + 1)}
    return sort_choices(nodes)


def validate_choices(
    choices: Sequence[Sequence[int]],
    *,
    max_draft_len: int | None,
    num_heads: int | None,
) -> Choices:
    """Check a tree against the TensorRT-LLM C++ runtime rules; return it sorted.

    Rules (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/runtime/utils/speculativeChoicesUtils.cpp``):
    a path at least, none empty or duplicated, every prefix listed,
    ``len(choices) <= max_draft_len`` (the engine's = ``--max_medusa_token_len``), depth
    ``<= num_heads``; ``None`` skips a limit.

    Raises:
        ConfigError: naming the first rule broken and how to fix it.
    """
    paths = _as_choices(choices, "the tree")
    if not paths:
        raise ConfigError(
            f"medusa choices are empty; give at least one path such as [[0]] or a named tree "
            f"({_tree_names()})"
        )
    if () in paths:
        raise ConfigError(
            f"medusa choice #{paths.index(())} is the empty path []; the root is implicit, "
            "remove it"
        )
    seen = set(paths)
    if len(seen) < len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise ConfigError(
            f"medusa choice {list(dup)} is listed {paths.count(dup)} times; remove the "
            "duplicates (expand_choices also drops them)"
        )
    for path in sort_choices(paths):
        if len(path) > 1 and path[:-1] not in seen:
            raise ConfigError(
                f"medusa choice {list(path)} lacks its prefix {list(path[:-1])}; the "
                "TensorRT-LLM C++ runtime needs every prefix listed: add it, or expand "
                "the tree with trtbench.builders.medusa_tree.expand_choices"
            )
    depth = max(len(p) for p in paths)
    if max_draft_len is not None and len(paths) > max_draft_len:
        raise ConfigError(
            f"medusa tree has {len(paths)} nodes but the engine's max_draft_len is "
            f"{max_draft_len}; use a tree of <= {max_draft_len} nodes or convert the "
            f"checkpoint with --max_medusa_token_len >= {len(paths)}"
        )
    if num_heads is not None and depth > num_heads:
        raise ConfigError(
            f"medusa tree depth {depth} exceeds num_medusa_heads {num_heads}; use a tree "
            f"of depth <= {num_heads} or heads >= {depth}"
        )
    return sort_choices(paths)


def render_brace(
    choices: Sequence[Sequence[int]], *, escape_commas: bool = False
) -> str:
    """Render Triton brace syntax, ``"{0}, {0, 1}"``, in the given order.

    ``escape_commas=True`` writes every comma as ``\\,`` for a ``fill_template.py`` argument
    (``triton_backend/tools/fill_template.py``): ``"{0}\\, {0\\, 1}"``.
    """
    text = ", ".join("{" + ", ".join(str(k) for k in c) + "}" for c in choices)
    return text.replace(",", "\\,") if escape_commas else text


@dataclass(frozen=True)
class MedusaTree:
    """A validated tree laid out for one verification pass of ``num_nodes + 1`` tokens.

    Position 0 is the root (the base model's token); position ``i + 1`` is ``choices[i]``.
    ``attention_mask[i, j]`` ([num_nodes+1, num_nodes+1], bool) is True iff ``j`` is ``i`` or
    an ancestor of ``i`` (the root is everyone's ancestor); ``position_offsets`` is each
    position's depth (added to the current sequence length for rotary positions);
    ``retrieve_paths`` ([num_leaves, depth+1], int64) lists the positions along each
    root→leaf path in lexicographic leaf order, padded with -1. The arrays are read-only.
    """

    choices: Choices
    num_nodes: int
    depth: int
    topk_per_depth: tuple[int, ...]
    parents: tuple[int, ...]
    position_offsets: tuple[int, ...]
    attention_mask: np.ndarray = field(compare=False, repr=False)
    retrieve_paths: np.ndarray = field(compare=False, repr=False)


def _structured(choices: str | Sequence[Sequence[int]]) -> Choices:
    """Resolve and check structure only (no engine limits); sorted."""
    return validate_choices(
        resolve_choices(choices), max_draft_len=None, num_heads=None
    )


def build_tree(choices: str | Sequence[Sequence[int]]) -> MedusaTree:
    """Lay out a tree (name, text or list of paths) for one verification pass.

    The tree must be prefix-closed without duplicates (:func:`validate_choices`, no
    engine limits); it is sorted first.

    Raises:
        ConfigError: unknown name or a structural rule broken.
    """
    tree = _structured(choices)
    index = {path: i + 1 for i, path in enumerate(tree)}
    parents = (-1,) + tuple(index.get(p[:-1], 0) for p in tree)
    offsets = (0,) + tuple(len(p) for p in tree)
    size = len(tree) + 1
    mask = np.eye(size, dtype=bool)
    for pos in range(1, size):  # a parent sorts before its children: its row is done
        mask[pos] |= mask[parents[pos]]
    depth = max(offsets)
    has_child = {p[:-1] for p in tree}
    leaves = sorted(p for p in tree if p not in has_child)
    paths = np.full((len(leaves), depth + 1), -1, dtype=np.int64)
    for row, leaf in enumerate(leaves):
        paths[row, 0] = 0
        for d in range(1, len(leaf) + 1):
            paths[row, d] = index[leaf[:d]]
    topk = tuple(max(p[d] for p in tree if len(p) > d) + 1 for d in range(depth))
    mask.setflags(write=False)
    paths.setflags(write=False)
    return MedusaTree(tree, len(tree), depth, topk, parents, offsets, mask, paths)


def expected_acceptance_length(
    choices: str | Sequence[Sequence[int]], accuracies: Sequence[Sequence[float]]
) -> float:
    """Expected tokens produced per verification step under head independence.

    ``accuracies[h][k]`` is the probability that the rank-``k`` candidate (the ``(k+1)``-th
    prediction) of head ``h + 1`` is the correct token — per rank, not cumulative top-k;
    convert cumulative tables with :func:`per_rank_accuracies`. Formula (Medusa paper,
    Cai et al. 2024, arXiv 2401.10774, App. C)::

        E[tokens] = 1 + sum over nodes (k_1..k_d) of  a_1(k_1) * ... * a_d(k_d)

    The 1 is the base model's own token. Heads are positively correlated in practice,
    so this underestimates measured acceptance.

    Raises:
        ConfigError: bad tree, accuracies outside [0, 1], or a node whose head/rank has no
            accuracy.
    """
    tree = _structured(choices)
    table = [[float(a) for a in row] for row in accuracies]
    if any(not 0.0 <= a <= 1.0 for row in table for a in row):
        raise ConfigError("medusa head accuracies must lie in [0, 1] (probabilities)")
    total = 1.0
    for path in tree:
        prob = 1.0
        for head, rank in enumerate(path):
            if head >= len(table) or rank >= len(table[head]):
                raise ConfigError(
                    f"medusa choice {list(path)} needs the accuracy of rank {rank} of "
                    f"head {head + 1}, which the accuracy table lacks; measure more "
                    "heads/ranks or use a smaller tree"
                )
            prob *= table[head][rank]
        total += prob
    return total


def per_rank_accuracies(cumulative: Sequence[Sequence[float]]) -> list[list[float]]:
    """Cumulative top-k accuracies (Medusa ``assets/medusa_acc.csv``) → per-rank ones.

    ``per_rank[h][k] = cumulative[h][k] - cumulative[h][k-1]``; ``k = 0`` is unchanged.

    Raises:
        ConfigError: a row decreases (not cumulative).
    """
    out = []
    for h, row in enumerate(cumulative):
        values = [float(a) for a in row]
        diffs = [b - a for a, b in zip([0.0, *values[:-1]], values, strict=True)]
        if any(d < -1e-12 for d in diffs):
            raise ConfigError(
                f"top-k accuracies of head {h + 1} decrease ({values}); pass cumulative "
                "top-1..top-k values, or per-rank values directly"
            )
        out.append([max(d, 0.0) for d in diffs])
    return out


def packed_mask_words(max_draft_len: int) -> int:
    """int32 words per token of TensorRT-LLM's packed tree mask: ceil((max_draft_len+1)/32).

    Source: NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/runtime/utils/speculativeChoicesUtils.cpp``.

    Raises:
        ConfigError: ``max_draft_len`` is negative.
    """
    if max_draft_len < 0:
        raise ConfigError(f"max_draft_len must be >= 0, got {max_draft_len}")
    return math.ceil((max_draft_len + 1) / 32)
