"""Acceptance 1: our paged varlen forward equals transformers' forward on tiny random models."""
from __future__ import annotations

import pytest
import torch

from kvx.models import load_model
from modelkit import PagedRunner, save_tiny_tokenizer

VOCAB = 96
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
CASES = {
    "llama": ("LlamaConfig", dict(tie_word_embeddings=False)),
    "llama3-rope-tied": ("LlamaConfig", dict(tie_word_embeddings=True, rope_parameters=LLAMA3_ROPE)),
    "mistral": ("MistralConfig", dict(tie_word_embeddings=False, head_dim=16)),
    "qwen2-tied": ("Qwen2Config", dict(tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", dict(tie_word_embeddings=False, head_dim=32, num_key_value_heads=1)),
}


def make_hf_model(tmp_path, case: str):
    import transformers

    cls_name, extra = CASES[case]
    config = getattr(transformers, cls_name)(**(COMMON | extra))
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad():  # norms at 1.0 and zero biases would hide mistakes in those paths
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.uniform_(0.5, 1.5) if "norm" in name else p.normal_(0, 0.5)
    model.save_pretrained(str(tmp_path))
    save_tiny_tokenizer(tmp_path, VOCAB)
    return model


@pytest.mark.parametrize("case", list(CASES))
def test_paged_batch_matches_transformers(tmp_path, case):
    ref = make_hf_model(tmp_path, case)
    ours = load_model(str(tmp_path), dtype="float32")
    assert ours.config.tie_word_embeddings == ref.config.tie_word_embeddings
    gen = torch.Generator().manual_seed(1)
    seqs = {i: torch.randint(0, VOCAB, (n,), generator=gen).tolist() for i, n in enumerate([20, 5, 33, 23])}
    runner = PagedRunner(ours.model, ours.config)
    runner.step({3: seqs[3][:16]})  # sequence 3's prefix is already in the pool before the big batch

    def reference(ids):
        with torch.no_grad():
            return ref(torch.tensor([ids])).logits[0].float()

    prefill = {0: seqs[0], 1: seqs[1], 2: seqs[2], 3: seqs[3][16:]}
    got = runner.step(prefill, all_logits=True)
    worst = 0.0
    for sid, toks in prefill.items():
        want = reference(seqs[sid])[-len(toks):]
        worst = max(worst, (got[sid] - want).abs().max().item())
    for _ in range(8):
        new = {sid: [int(torch.randint(0, VOCAB, (1,), generator=gen))] for sid in seqs}
        for sid, tok in new.items():
            seqs[sid] += tok
        got = runner.step(new)
        for sid in seqs:
            worst = max(worst, (got[sid][0] - reference(seqs[sid])[-1]).abs().max().item())
    assert worst <= 1e-4, f"{case}: max |logit diff| {worst}"
