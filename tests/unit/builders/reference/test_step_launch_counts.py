"""A speculative step's operations do not grow with the batch: Medusa's tree acceptance and
EAGLE-3's catch-up, chain and acceptance run once for all rows (issue 47).

What is counted: every ATen operation dispatched while ``decoder.step()`` runs
(``TorchDispatchMode``), on CPU, except views (an operation whose results alias an input
without writing it: ``view``, ``transpose``, ``lift_fresh``… make no kernel; their number
varies with contiguity, e.g. at one row). On a GPU each counted operation on a device tensor
is at most one kernel launch when the step runs eagerly, so the count bounds the eager
launches per step;
with the captured target and draft forwards those collapse into graph replays. The definition
checked: the count at 4 rows equals the count at 1 row and at 2 rows, and a step's count
does not depend on how many drafts were accepted (every step of a run counts the same).
The per-row loops these replace (``ModelRunner.keep`` per row, a pending list fused and
cloned per row) added operations for every row.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trtbench.builders.reference.decoding import Greedy
from trtbench.builders.reference.loading import make_engine

VOCAB = 64  # the family's (conftest.py)
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
K = 3
STEPS = 4
GEN = torch.Generator().manual_seed(5)
PROMPTS = [torch.randint(2, VOCAB, (n,), generator=GEN).tolist() for n in (5, 9, 3, 7)]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def is_view(func) -> bool:
    """Whether every result of ``func`` aliases an input without writing it."""
    returns = func._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched inside the ``with`` block, by name (views
    left out: :func:`is_view`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not is_view(func):
            self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def test_views_are_told_from_kernels():
    """Hand-picked: a view and a transpose alias; an in-place add writes (a kernel);
    a matmul makes a new tensor (a kernel)."""
    aten = torch.ops.aten
    assert is_view(aten.view.default) and is_view(aten.transpose.int)
    assert not is_view(aten.add_.Tensor) and not is_view(aten.mm.default)


@pytest.fixture(scope="module")
def engines(family, eagle3_draft):
    """Engines of 4 slots over the float64 family (shared fixtures: ``conftest.py``)."""
    target, tok, heads = family["target"], family["tokenizer"], family["heads"]
    kw = {"max_seq_len": 64, "max_input_len": 16, "max_batch_size": 4}
    return {
        "medusa": make_engine("medusa", target, tok, heads=heads, choices=TREE, **kw),
        "eagle3": make_engine(
            "eagle3", target, tok, draft_len=K, eagle3=eagle3_draft, **kw
        ),
        "eagle3-static": make_engine(
            "eagle3", target, tok, draft_len=K, eagle3=eagle3_draft, **kw
        ),
    }


def step_counts(engine, rows: int) -> list[tuple[int, Counter[str]]]:
    """(ops, by name) of each of STEPS decode steps with ``rows`` rows active, after one
    step uncounted."""
    decoder = engine.decoder
    decoder.clear()
    for i in range(rows):
        decoder.admit(i, PROMPTS[i], Greedy(eos_id=None))
    decoder.step()  # steady state: the runner makes its mask template once per step shape
    counts = []
    for _ in range(STEPS):
        with OpCounter() as counter:
            proposals = decoder.step()
        assert len(proposals) == rows
        counts.append((sum(counter.ops.values()), counter.ops))
    decoder.clear()
    return counts


# EAGLE-3 with static shapes, as where its draft is captured; eager (static_shapes off) its
# catch-up width follows the pending positions, and a width seen for the first time makes
# the runner's mask template for it (a few operations, once).
@pytest.mark.parametrize("mode", ["medusa", "eagle3-static"])
def test_step_operations_do_not_grow_with_rows(engines, mode):
    engines["eagle3-static"].decoder.static_shapes = True  # as with captured graphs
    by_rows = {rows: step_counts(engines[mode], rows) for rows in (1, 2, 4)}
    totals = {rows: [n for n, _ in steps] for rows, steps in by_rows.items()}
    first = totals[1][0]
    assert first > 0
    # The same count at every batch size and every step (acceptance varies between them).
    assert totals == {rows: [first] * STEPS for rows in totals}, {
        rows: dict(steps[0][1]) for rows, steps in by_rows.items()
    }


def test_rows_accept_different_lengths_in_the_counted_steps(engines):
    """The counts above compare steps whose rows accepted different numbers of drafts
    (else a count independent of acceptance would be untested)."""
    for mode in ("medusa", "eagle3"):
        decoder = engines[mode].decoder
        decoder.clear()
        for i in range(4):
            decoder.admit(i, PROMPTS[i], Greedy(eos_id=None))
        accepted = {p.accepted for _ in range(STEPS) for p in decoder.step()}
        decoder.clear()
        assert len(accepted) > 1, (mode, accepted)


def test_static_draft_shapes_depend_on_k_and_rows_only(engines):
    """With static shapes (as where the draft is captured) every draft forward of a
    drafting step is ``[rows, K + 1]`` (the catch-up) or ``[rows, 1]`` (the chain), and every
    target forward ``[rows, K + 1]``, whatever was accepted."""
    decoder = engines["eagle3-static"].decoder
    decoder.static_shapes = True
    seen = {"draft": set(), "target": set()}

    def recording(runner, role):
        forward = runner.forward

        def wrapped(rows, *args, **kwargs):
            shape = tuple(rows.shape) if isinstance(rows, torch.Tensor) else None
            seen[role].add(shape)
            return forward(rows, *args, **kwargs)

        return wrapped

    decoder.draft.forward = recording(decoder.draft, "draft")
    decoder.target.forward = recording(decoder.target, "target")
    try:
        for rows in (1, 3):
            decoder.clear()
            for i in range(rows):
                decoder.admit(i, PROMPTS[i], Greedy(eos_id=None))
            for _ in range(STEPS):
                decoder.step()
            assert seen == {
                "draft": {(rows, K + 1), (rows, 1)},
                "target": {(rows, K + 1)},
            }, rows
            seen = {"draft": set(), "target": set()}
    finally:
        del decoder.draft.forward, decoder.target.forward
        decoder.clear()
