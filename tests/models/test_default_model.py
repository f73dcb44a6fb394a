"""Acceptance 2: greedy tokens from our paged forward equal transformers' generate on the same GGUF."""
from __future__ import annotations

import torch

from kvx.models import load_model
from kvx.models.resolve import default_gguf_path
from modelkit import PagedRunner

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers."]
STEPS = 32


def test_greedy_matches_transformers_generate():
    from transformers import AutoModelForCausalLM

    lm = load_model("smollm2-135m", dtype="float32")
    tok = lm.tokenizer
    prompts = {i: tok.encode(tok.chat_prompt([{"role": "user", "content": p}])) for i, p in enumerate(PROMPTS)}
    runner = PagedRunner(lm.model, lm.config)
    ours = {i: [] for i in prompts}
    logits = runner.step(prompts)  # all three prompts prefilled in one batch, then decoded together
    for _ in range(STEPS):
        nxt = {i: [int(logits[i][0].argmax())] for i in prompts}
        for i, t in nxt.items():
            ours[i] += t
        logits = runner.step(nxt)

    path = default_gguf_path()
    ref = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    ref.generation_config.eos_token_id = None  # run all STEPS greedily past <|im_end|>, as our loop does
    for i, ids in prompts.items():
        out = ref.generate(torch.tensor([ids]), max_new_tokens=STEPS, do_sample=False, pad_token_id=0,
                           attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        assert ours[i] == out[0, len(ids):].tolist(), f"prompt {i}: {tok.decode(ours[i])!r}"
