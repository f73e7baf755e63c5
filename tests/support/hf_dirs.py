"""Small real model directories for TensorRT-LLM plan tests: HF config.json files written by
``transformers.LlamaConfig.save_pretrained`` and Medusa heads written by ``save_medusa_heads``
(FasterDecoding layout). No weights are needed by the planner; the heads file is tiny."""

from __future__ import annotations

from pathlib import Path

from transformers import LlamaConfig

from trtbench.builders.reference.medusa_heads import MedusaHeads, save_medusa_heads
from trtbench.builders.trtllm.backend import plan_and_check
from trtbench.builders.trtllm.contract import load_contract
from trtbench.builders.trtllm.plan import VariantPlan
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec, parse_spec

TREE6 = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # 6 nodes, depth 3


def write_llama(directory: Path, vocab: int = 64, hidden: int = 32) -> Path:
    """A Llama config.json (float16) in ``directory``."""
    LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        torch_dtype="float16",
    ).save_pretrained(directory)
    return directory


def make_models(root: Path, draft_vocab: int = 64, heads: int = 3) -> dict[str, Path]:
    """target (vocab 64), draft (vocab ``draft_vocab``) and ``heads`` Medusa heads x 1 layer."""
    target = write_llama(root / "target")
    draft = write_llama(root / "draft", vocab=draft_vocab, hidden=16)
    medusa = root / "medusa"
    save_medusa_heads(MedusaHeads(heads, 1, 32, 64), medusa, str(target))
    return {"target": target, "draft": draft, "medusa": medusa}


def spec_for(models: dict[str, Path], variants: str) -> BenchSpec:
    """A trtllm bench spec over ``models``; ``variants`` is the YAML list body."""
    return parse_spec(
        "name: t\nbackend: trtllm\n"
        f"models: {{target: {models['target']}, draft: {models['draft']}, "
        f"medusa: {models['medusa']}}}\n"
        f"variants:\n{variants}"
    )


def plan_all(tmp_path_factory, variants: str) -> dict[str, VariantPlan]:
    """Every variant of a trtllm spec over fresh :func:`make_models` dirs, planned and
    checked against the contract (no GPU): name -> plan."""
    spec = spec_for(make_models(tmp_path_factory.mktemp("models")), variants)
    out = RunDir(tmp_path_factory.mktemp("run"))
    contract = load_contract()
    return {v.name: plan_and_check(spec, v, out, contract, []) for v in spec.variants}
