"""Small randomly initialised Llamas, tokenizers and Medusa heads saved in real formats.

Losslessness must hold for any weights, so the engine tests run on these (made in
milliseconds) as well as on the trained tiny models.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trtbench.builders.reference.medusa_heads import MedusaHeads, save_medusa_heads

EOS = "</s>"


def make_tokenizer(
    vocab_size: int, prefix: str = "t", eos_id: int = 1
) -> PreTrainedTokenizerFast:
    """A word-level tokenizer: ``<unk>`` = 0, ``</s>`` = ``eos_id``, the rest ``{prefix}{id}``."""
    vocab = {f"{prefix}{i}": i for i in range(1, vocab_size)}
    vocab.update({"<unk>": 0, EOS: eos_id})
    del vocab[f"{prefix}{eos_id}"]
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token=EOS
    )


def random_llama(
    seed: int, vocab_size: int = 64, hidden: int = 32, layers: int = 2
) -> LlamaForCausalLM:
    """A float32 Llama with seeded random weights (eos id 1)."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=1,
        bos_token_id=0,
        pad_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


def greedy_oracle(
    model: LlamaForCausalLM,
    prompt: list[int],
    max_tokens: int,
    eos: int | None = None,
    min_tokens: int = 0,
) -> tuple[list[int], float]:
    """Greedy decoding by re-running the whole sequence each token (no KV cache, the model's
    own causal mask): (tokens, the smallest gap between the top two logits along the way).

    ``eos`` ends the output after it is emitted and is suppressed for the first
    ``min_tokens`` tokens.
    """
    ids, out, gap = list(prompt), [], float("inf")
    with torch.inference_mode():
        while len(out) < max_tokens:
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1].clone()
            if eos is not None and len(out) < min_tokens:
                logits[eos] = float("-inf")
            top = logits.topk(2).values
            gap = min(gap, float(top[0] - top[1]))
            out.append(int(logits.argmax()))
            ids.append(out[-1])
            if out[-1] == eos:
                break
    return out, gap


def perturbed_copy(
    model: LlamaForCausalLM, seed: int, scale: float
) -> LlamaForCausalLM:
    """The same architecture with every weight plus N(0, scale²) noise (a partial drafter)."""
    copy = LlamaForCausalLM(model.config).eval()
    copy.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in copy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return copy


def random_heads(
    model: LlamaForCausalLM, num_heads: int, seed: int, num_layers: int = 1
) -> MedusaHeads:
    """Medusa heads with random ResBlocks over the target's LM head."""
    torch.manual_seed(seed)
    heads = MedusaHeads(
        num_heads, num_layers, model.config.hidden_size, model.config.vocab_size
    )
    heads.init_lm_heads_from(model.lm_head.weight)
    with torch.no_grad():
        for head in heads:
            for block in head[:-1]:
                block.linear.weight.normal_(0.0, 0.5)
    return heads.eval()


def save_model(model: LlamaForCausalLM, directory: Path, tokenizer=None) -> Path:
    """``save_pretrained`` the model (and tokenizer, if given) into ``directory``."""
    model.save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


def save_heads(heads: MedusaHeads, directory: Path, base: Path) -> Path:
    """FasterDecoding-format heads dir."""
    return save_medusa_heads(heads, directory, str(base))


def float64_family(vocab_size: int) -> dict[str, object]:
    """The float64 models the batched lossless tests share: ``target`` (seed 0), ``near`` (a
    drafter: the target plus N(0, 0.005²) noise), ``heads`` (3 random Medusa heads over the
    target's LM head) and a word-level ``tokenizer``."""
    base32 = random_llama(seed=0, vocab_size=vocab_size)
    return {
        "target": random_llama(seed=0, vocab_size=vocab_size).double(),
        "near": perturbed_copy(base32, seed=2, scale=0.005).double(),
        "heads": random_heads(base32, num_heads=3, seed=4).double(),
        "tokenizer": make_tokenizer(vocab_size),
    }
