"""A tiny deterministic attention model over the paged pool, a tokenizer for it, and a reference loop.

The model is a real (random-weight, float32) two-layer attention network that stores its K/V in the
kvx pool and reads them back through the attention backend, so its next-token logits depend on the
whole prefix: a wrong block table, slot, cached prefix or recompute changes the output.
"""
from __future__ import annotations

from pathlib import Path

import torch

from kvx.kernels.interface import AttentionMetadata, KVCache
from kvx.kernels.torch_backend import TorchBackend
from kvx.engine.api import EngineConfig
from kvx.engine.engine import model_device
from kvx.models.base import LoadedModel, ModelConfig, ModelSource

VOCAB = 61
EOS = 0


class TinyAttentionModel(torch.nn.Module):
    def __init__(self, vocab: int = VOCAB, hidden: int = 16, layers: int = 2, heads: int = 2, kv_heads: int = 1,
                 head_dim: int = 8, max_len: int = 512, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)

        def w(*shape, std=1.0):
            return torch.nn.Parameter(torch.randn(*shape, generator=g, dtype=torch.float32) * std, requires_grad=False)

        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.embed = w(vocab, hidden)
        self.pos = w(max_len, hidden, std=0.5)
        self.wq = torch.nn.ParameterList([w(hidden, heads * head_dim, std=0.5) for _ in range(layers)])
        self.wk = torch.nn.ParameterList([w(hidden, kv_heads * head_dim, std=0.5) for _ in range(layers)])
        self.wv = torch.nn.ParameterList([w(hidden, kv_heads * head_dim) for _ in range(layers)])
        self.wo = torch.nn.ParameterList([w(heads * head_dim, hidden, std=0.3) for _ in range(layers)])
        self.out = w(hidden, vocab)
        self.backend = TorchBackend()
        self.forward_calls: list[list[int]] = []  # query lengths of every forward (a spy for tests)

    def forward(self, input_ids, positions, meta: AttentionMetadata, kv_cache: KVCache, logits_indices):
        self.forward_calls.append(list(meta.query_lens_cpu))
        x = self.embed[input_ids] + self.pos[positions]
        t = x.shape[0]
        for i in range(len(self.wq)):
            layer = kv_cache.layer(i)
            q = (x @ self.wq[i]).view(t, self.heads, self.head_dim)
            k = (x @ self.wk[i]).view(t, self.kv_heads, self.head_dim)
            v = (x @ self.wv[i]).view(t, self.kv_heads, self.head_dim)
            self.backend.store_kv(k, v, layer, meta.slot_mapping)
            o = self.backend.attention(q, layer, meta, self.head_dim ** -0.5)
            x = x + o.reshape(t, -1) @ self.wo[i]
        return (x[logits_indices] @ self.out).float()


class OddMatcher:
    """A grammar stand-in: odd tokens only (EOS once 6 are out); after 7 it forces [11, 13, 15]."""

    def __init__(self, vocab=VOCAB - 3, n=0, log=()):
        self.vocab, self.n, self.log = vocab, n, list(log)

    def allowed_mask(self):
        m = torch.zeros(self.vocab, dtype=torch.bool)
        m[1::2] = True
        m[EOS] = self.n >= 6
        return m

    def is_allowed(self, tok):
        return (tok % 2 == 1 and tok < self.vocab) or (tok == EOS and self.n >= 6)

    def advance(self, tok):
        assert self.is_allowed(tok), tok
        self.log.append(tok)
        self.n += 1

    def forced_tokens(self):
        return [11, 13, 15] if self.log and self.log[-1] == 7 else []

    def fork(self):
        return OddMatcher(self.vocab, self.n, self.log)


class FakeTokenizer:
    vocab_size = VOCAB
    eos_token_ids = [EOS]

    def decode(self, ids):
        return " ".join(f"t{i}" for i in ids)


def tiny_loaded(max_len: int = 512, **kw) -> LoadedModel:
    model = TinyAttentionModel(max_len=max_len, **kw)
    cfg = ModelConfig(
        arch="llama", vocab_size=VOCAB, hidden_size=16, intermediate_size=0, num_layers=len(model.wq),
        num_heads=model.heads, num_kv_heads=model.kv_heads, head_dim=model.head_dim,
        max_position_embeddings=max_len, eos_token_ids=[EOS],
    )
    return LoadedModel(cfg, model, FakeTokenizer(), ModelSource("tiny", Path("."), "fake"), torch.float32)


def pool_bytes(loaded: LoadedModel, blocks: int, block_size: int) -> int:
    c = loaded.config
    return blocks * KVCache.bytes_per_block(c.num_layers, block_size, c.num_kv_heads, c.head_dim, loaded.dtype)


def config_for(loaded: LoadedModel, blocks: int, block_size: int = 4, attention: str = "torch", **kw) -> EngineConfig:
    return EngineConfig(block_size=block_size, kv_memory=pool_bytes(loaded, blocks, block_size), attention=attention, **kw)


@torch.inference_mode()
def reference_greedy(loaded: LoadedModel, prompt: list[int], max_tokens: int, stop: set[int] = frozenset({EOS}),
                     matcher=None) -> list[int]:
    """Plain single-sequence loop: own contiguous blocks, whole-prompt prefill, then one token a step.

    With a matcher: mask before argmax, advance, then append forced tokens one by one (each its own
    decode step), the same tokens the engine's jump-forward must produce."""
    c, bs = loaded.config, 8
    total = len(prompt) + max_tokens + 8
    nblocks = -(-total // bs)
    dev = model_device(loaded.model)
    kv = KVCache(c.num_layers, nblocks, bs, c.num_kv_heads, c.head_dim, loaded.dtype, dev)
    table = list(range(nblocks))
    tokens, out, fed = list(prompt), [], 0

    def forward_new():
        nonlocal fed
        n, end = len(tokens) - fed, len(tokens)
        meta = AttentionMetadata.build([n], [end], [table], list(range(fed, end)), dev)
        ids = torch.tensor(tokens[fed:], dtype=torch.int64, device=dev)
        pos = torch.arange(fed, end, device=dev)
        fed = end
        return loaded.model(ids, pos, meta, kv, torch.tensor([n - 1], device=dev))[0].cpu()

    pending: list[int] = []
    while len(out) < max_tokens:
        if pending:
            tok, pending = pending[0], pending[1:]
            forward_new()  # the forced token's predecessor still goes through the model
        else:
            logits = forward_new().clone()
            if matcher is not None:
                allowed = matcher.allowed_mask()
                logits[: allowed.shape[0]][~allowed] = float("-inf")
                logits[allowed.shape[0] :] = float("-inf")  # model rows past the tokenizer's vocab
            tok = int(logits.argmax())
        tokens.append(tok)
        out.append(tok)
        if matcher is not None:
            matcher.advance(tok)
        if tok in stop:
            break
        if matcher is not None and not pending:
            pending = list(matcher.forced_tokens())
    return out
