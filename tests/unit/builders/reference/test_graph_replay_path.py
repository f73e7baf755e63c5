"""ModelRunner.forward's replay path, called the way the batcher calls it (outside inference mode).

The static input buffers of a captured CUDA graph are made inside ``torch.inference_mode``
(``ModelRunner.capture``); on an H200 every graph configuration failed at the first replay
with "Inplace update to inference tensor outside InferenceMode", because the batcher calls
``forward`` outside it and the unit tests had always wrapped it in ``inference_mode``. A CUDA
graph needs a GPU, so the graph here is a CPU stand-in with the same contract: static inputs
and outputs made under inference mode, and ``replay()`` recomputing the outputs from
whatever the inputs hold (what replaying a captured graph does). The reference value is the
same forward run eagerly by a second runner.
"""

from __future__ import annotations

import torch

from trtbench.builders.reference.runner import CapturedGraph, ModelRunner


class _ReplayStandIn:
    """CPU stand-in of ``torch.cuda.CUDAGraph``: replay reruns the captured forward."""

    def __init__(self, runner: ModelRunner, buffers: dict, outputs: dict) -> None:
        self.runner, self.buffers, self.outputs = runner, buffers, outputs

    def replay(self) -> None:
        logits, hidden = self.runner._eager(
            self.buffers["ids"],
            self.buffers["positions"],
            self.buffers["slots"],
            self.buffers["mask"],
            first=0,
        )
        self.outputs["logits"].copy_(logits)
        self.outputs["hidden"].copy_(hidden)


def _install_stand_in(runner: ModelRunner, b: int, q: int) -> None:
    """What ModelRunner.capture leaves for (b, q), with the stand-in as the graph."""
    with torch.inference_mode():
        ids = torch.zeros(b, q, dtype=torch.long)
        positions = torch.arange(q).expand(b, q).contiguous()
        slots = positions.clone()
        mask = runner._mask([0] * b, torch.ones(q, q, dtype=torch.bool).tril_())
        logits, hidden = runner._eager(ids, positions, slots, mask, first=0)
        logits, hidden = logits.clone(), hidden.clone()
    buffers = {"ids": ids, "positions": positions, "slots": slots, "mask": mask}
    outputs = {"logits": logits, "hidden": hidden}
    graph = _ReplayStandIn(runner, buffers, outputs)
    runner._graphs[(b, q)] = CapturedGraph(
        graph, ids, positions, slots, mask, logits, hidden, None
    )


def test_replay_outside_inference_mode_matches_the_eager_forward(target) -> None:
    prompt = [5, 9, 11, 3]
    eager, replayed = ModelRunner(target, 32), ModelRunner(target, 32)
    _install_stand_in(replayed, 1, 1)
    assert not torch.is_inference_mode_enabled()
    for runner in (eager, replayed):
        runner.prefill(0, prompt)
    steps = [[7], [12], [30]]
    for tokens in steps:
        want, _ = eager.forward([tokens])
        got, _ = replayed.forward([tokens])  # the (1, 1) stand-in graph's path
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert replayed.lengths == eager.lengths == [len(prompt) + len(steps)]
