"""Medusa tree acceptance for every row of a batch at once, as tensor operations on the device.

Given the tree's token per position ``nodes [b, N+1]`` (position 0 the root, the row's last
token) and the target's greedy pick at each position ``preds [b, N+1]``, a node *matches*
when its token equals the pick at its parent; it is *accepted* when it and every ancestor
match (the root always is). Accepted nodes form one chain from the root: siblings hold
distinct top-k tokens, so at most one child of a node matches the pick there. The row's
*end* is the deepest accepted node; its path from the root is what the row keeps, and
``preds[end]`` is the bonus token. This is the walk of FasterDecoding's ``evaluate_posterior``
(greedy case, Cai et al. 2024, arXiv 2401.10774) done without a per-row loop: the operations
and their shapes depend on ``b`` and the tree only, never on which drafts were accepted, so
the step can be captured and its launch count does not grow with the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trtbench.builders.medusa_tree import MedusaTree


@dataclass(frozen=True)
class TreeTables:
    """A tree's constant index tensors on the decode device.

    Attributes:
        parent: ``[N+1]`` int64, each position's parent (the root its own).
        ancestors: ``[N+1, N+1]`` float, ``[j, i]`` 1 iff ``j`` is ``i`` or an ancestor of
            ``i`` other than the root (the root always matches: it is left out).
        score: ``[N+1]`` int64, depth + 1 (the deepest accepted position scores most).
        rows: ``[N+1, 1 + 2(D+1)]`` int64, row ``i``: its depth; the positions root → ``i``
            padded on the right with ``i``; the positions after the root on that path, then
            ``i`` repeated (D the tree's depth).
        columns: ``[D+1]`` int64, ``0..D``.
    """

    parent: torch.Tensor
    ancestors: torch.Tensor
    score: torch.Tensor
    rows: torch.Tensor
    columns: torch.Tensor

    @classmethod
    def build(cls, tree: MedusaTree, device: torch.device) -> TreeTables:
        """The tables of ``tree`` (built on the host, moved to ``device`` once)."""
        parent = [max(p, 0) for p in tree.parents]
        rows = []
        for node in range(tree.num_nodes + 1):
            path = [node]
            while path[-1] != 0:
                path.append(parent[path[-1]])
            path.reverse()
            pad = [node] * (tree.depth + 1 - len(path))
            rows.append([len(path) - 1, *path, *pad, *path[1:], *pad, node])
        ancestors = tree.attention_mask.astype("float32").T.copy()
        ancestors[0, :] = 0  # the root
        return cls(
            parent=torch.tensor(parent, device=device),
            ancestors=torch.from_numpy(ancestors).to(device),
            score=torch.tensor(tree.position_offsets, device=device) + 1,
            rows=torch.tensor(rows, device=device),
            columns=torch.arange(tree.depth + 1, device=device),
        )

    @property
    def depth(self) -> int:
        """The tree's depth D."""
        return self.columns.shape[0] - 1


@dataclass(frozen=True)
class TreeAccept:
    """One verification's outcome per row, all ``[b, ...]`` tensors on the device.

    Attributes:
        end: ``[b]`` the deepest accepted position (0: no draft accepted).
        accepted: ``[b]`` its depth (drafts accepted).
        path: ``[b, D+1]`` positions root → end, padded with ``end`` (for
            ``ModelRunner.keep_paths``).
        tokens: ``[b, D+1]`` the row's emitted tokens: the accepted drafts then the bonus
            token, padded on the right with the bonus token (the first ``accepted + 1``
            count).
    """

    end: torch.Tensor
    accepted: torch.Tensor
    path: torch.Tensor
    tokens: torch.Tensor


def accept_tree(
    tables: TreeTables,
    nodes: torch.Tensor,
    preds: torch.Tensor,
    allow: torch.Tensor | None = None,
) -> TreeAccept:
    """Accept the longest matching path of every row (module docstring).

    Args:
        tables: the tree's :class:`TreeTables`.
        nodes: ``[b, N+1]`` int64, the tokens fed (root first).
        preds: ``[b, N+1]`` int64, the target's greedy pick at each position.
        allow: ``[b]`` bool; a row not allowed accepts nothing (its end is the root).
            None: every row is allowed.

    Returns:
        A :class:`TreeAccept`.
    """
    # [b, N+1]: drafts missed along each position's path (the root left out)
    missed = (nodes != preds[:, tables.parent]).to(tables.ancestors.dtype)
    ok = (missed @ tables.ancestors) == 0
    if allow is not None:
        ok &= allow[:, None]
    end = (ok * tables.score).argmax(dim=1)  # the deepest accepted; the root when none
    info = tables.rows[end]  # [b, 1 + 2(D+1)]
    steps = tables.depth + 1
    accepted, path = info[:, 0], info[:, 1 : 1 + steps]
    drafted = nodes.gather(1, info[:, 1 + steps :])  # the path's tokens after the root
    bonus = preds.gather(1, end[:, None])  # [b, 1]
    tokens = torch.where(tables.columns < accepted[:, None], drafted, bonus)
    return TreeAccept(end=end, accepted=accepted, path=path, tokens=tokens)
