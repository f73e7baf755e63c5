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
        depth: ``[N+1]`` int64, each position's depth (root 0).
        ancestors: ``[N+1, N+1]`` float, ``[i, j]`` 1 iff ``j`` is ``i`` or its ancestor.
        paths: ``[N+1, D+1]`` int64, row ``i`` the positions root → ``i``, padded on the
            right with ``i`` (D the tree's depth).
    """

    parent: torch.Tensor
    depth: torch.Tensor
    ancestors: torch.Tensor
    paths: torch.Tensor

    @classmethod
    def build(cls, tree: MedusaTree, device: torch.device) -> TreeTables:
        """The tables of ``tree`` (built on the host, moved to ``device`` once)."""
        parent = [max(p, 0) for p in tree.parents]
        paths = []
        for node in range(tree.num_nodes + 1):
            path = [node]
            while path[-1] != 0:
                path.append(parent[path[-1]])
            path.reverse()
            paths.append(path + [node] * (tree.depth + 1 - len(path)))
        return cls(
            parent=torch.tensor(parent, device=device),
            depth=torch.tensor(tree.position_offsets, device=device),
            ancestors=torch.from_numpy(tree.attention_mask.astype("float32")).to(
                device
            ),
            paths=torch.tensor(paths, device=device),
        )


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
    match = nodes == preds[:, tables.parent]  # [b, N+1]; the root compares with itself
    match[:, 0] = True
    misses = (~match).to(tables.ancestors.dtype) @ tables.ancestors.T  # [b, N+1]
    ok = misses == 0
    if allow is not None:
        ok &= allow[:, None]
    end = (ok * (tables.depth + 1)).argmax(dim=1)  # deepest; the root when none
    path = tables.paths[end]  # [b, D+1]
    steps = path.shape[1]
    accepted = tables.depth[end]
    bonus = preds.gather(1, end[:, None])  # [b, 1]
    drafted = nodes.gather(1, path[:, 1:])  # [b, D] the path's tokens (padded: end's)
    column = torch.arange(steps - 1, device=nodes.device)
    drafted = torch.where(column < accepted[:, None], drafted, bonus)
    tokens = torch.cat([drafted, bonus], dim=1)
    return TreeAccept(end=end, accepted=accepted, path=path, tokens=tokens)
