"""int8 KV end to end: greedy tokens of the default model with an int8 pool vs a float32 pool.

Torch twin path. 20 prompts decode 16 tokens as one batch. Agreement is counted strictly: a
prompt's positions count as agreeing only up to its first divergence; every later position counts
as disagreement (after a divergence the two runs continue from different text).
"""
import pytest
import torch

from kernels.interface import AttentionMetadata, KVCache

kvx_models = pytest.importorskip("kvx.models")

PROMPTS = [f"Write one sentence about {w}." for w in (
    "the sea", "coffee", "a red bicycle", "winter", "databases", "the moon", "bread", "a library",
    "rain in the city", "an old clock", "mountains", "jazz music", "a cat", "trains", "gardening",
    "the number seven", "paper maps", "a lighthouse", "chess", "tea")]
NEW_TOKENS, BLOCK = 16, 16


def greedy(loaded, prompts, kv_dtype):
    cfg = loaded.config
    lens = [len(p) + NEW_TOKENS for p in prompts]
    per_seq = [(n + BLOCK - 1) // BLOCK for n in lens]
    cache = KVCache(cfg.num_layers, sum(per_seq), BLOCK, cfg.num_kv_heads, cfg.head_dim, dtype=kv_dtype)
    tables, start = [], 0
    for n in per_seq:
        tables.append(list(range(start, start + n)))
        start += n
    seqs = [list(p) for p in prompts]
    done = [0] * len(prompts)  # tokens already in the cache
    for _ in range(NEW_TOKENS):
        ids, pos, slots, qlens = [], [], [], []
        for s, d, t in zip(seqs, done, tables):
            ids += s[d:]
            pos += range(d, len(s))
            slots += [t[p // BLOCK] * BLOCK + p % BLOCK for p in range(d, len(s))]
            qlens.append(len(s) - d)
        meta = AttentionMetadata.build(qlens, [len(s) for s in seqs], tables, slots)
        last = torch.tensor(qlens).cumsum(0) - 1
        with torch.no_grad():
            logits = loaded.model(torch.tensor(ids), torch.tensor(pos), meta, cache, last)
        for s, tok in zip(seqs, logits.argmax(-1).tolist()):
            s.append(tok)
        done = [len(s) - 1 for s in seqs]
    return [s[len(p):] for s, p in zip(seqs, prompts)]


@pytest.fixture(scope="module")
def loaded():
    return kvx_models.load_model(None, dtype="float32", attention="torch")


def test_int8_kv_greedy_agrees_with_float32(loaded):
    tok = loaded.tokenizer
    prompts = [tok.encode(tok.chat_prompt([{"role": "user", "content": p}])) for p in PROMPTS]
    ref = greedy(loaded, prompts, torch.float32)
    got = greedy(loaded, prompts, torch.int8)
    agree = 0
    for a, b in zip(ref, got):
        for x, y in zip(a, b):
            if x != y:
                break
            agree += 1
    rate = agree / (NEW_TOKENS * len(prompts))
    print(f"int8 vs float32 greedy agreement (strict, until first divergence): {rate:.4f}")
    assert rate >= 0.98
