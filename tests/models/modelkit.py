"""Helpers for model tests: a tiny tokenizer writer and a paged-batch driver over our forward."""
from __future__ import annotations

import random
from pathlib import Path

import torch

from kvx.kernels import AttentionMetadata, KVCache

BLOCK = 16


def save_tiny_tokenizer(folder: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size - 1)} | {"<eos>": vocab_size - 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>").save_pretrained(str(folder))


class PagedRunner:
    """Drives our model through a KV pool with shuffled, non-contiguous block tables."""

    def __init__(self, model, config, num_blocks: int = 64, seed: int = 0, dtype=torch.float32):
        self.model = model
        self.kv = KVCache(config.num_layers, num_blocks, BLOCK, config.num_kv_heads, config.head_dim, dtype=dtype)
        self.free = list(range(num_blocks))
        random.Random(seed).shuffle(self.free)
        self.tables: dict[int, list[int]] = {}
        self.lens: dict[int, int] = {}

    def _slots(self, sid: int, start: int, end: int) -> list[int]:
        table = self.tables.setdefault(sid, [])
        while len(table) * BLOCK < end:
            table.append(self.free.pop())
        return [table[p // BLOCK] * BLOCK + p % BLOCK for p in range(start, end)]

    def step(self, new_tokens: dict[int, list[int]], all_logits: bool = False) -> dict[int, torch.Tensor]:
        """Append new_tokens[sid] to each sequence in ONE varlen batch; logits per sequence (last or all rows)."""
        ids, pos, slots, qlens, slens, tables, want, rows = [], [], [], [], [], [], [], {}
        for sid, toks in new_tokens.items():
            start = self.lens.get(sid, 0)
            end = start + len(toks)
            slots += self._slots(sid, start, end)
            first = len(ids)
            ids += toks
            pos += range(start, end)
            qlens.append(len(toks))
            slens.append(end)
            tables.append(self.tables[sid])
            picked = list(range(first, len(ids))) if all_logits else [len(ids) - 1]
            rows[sid] = (len(want), len(want) + len(picked))
            want += picked
            self.lens[sid] = end
        meta = AttentionMetadata.build(qlens, slens, tables, slots)
        logits = self.model(torch.tensor(ids), torch.tensor(pos), meta, self.kv, torch.tensor(want))
        return {sid: logits[a:b] for sid, (a, b) in rows.items()}


def gguf_permute(w, n_head: int):
    """llama.cpp's convert_hf_to_gguf q/k permutation (what our loader must undo)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _random_tiny_llama(seed: int, max_len: int = 512):
    """A random 2-layer llama sized for write_tiny_gguf's byte vocabulary (128 tokens)."""
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_len,
                                   tie_word_embeddings=False, initializer_range=0.3)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(cfg).float().eval()


def write_random_tiny_gguf(path: Path, seed: int, max_len: int = 512) -> Path:
    """A random 2-layer llama GGUF with write_tiny_gguf's byte vocabulary (128 tokens, no space)."""
    write_tiny_gguf(path, _random_tiny_llama(seed, max_len))
    return path


def write_looping_tiny_gguf(path: Path, seed: int) -> Path:
    """write_random_tiny_gguf's model made to repeat itself, as small models do: the output layer is
    the embedding and the layers barely write to the residual, so greedy decoding answers with the
    token it was given ("xxxx...") and, where that is refused, with the next most similar one."""
    model = _random_tiny_llama(seed)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.model.embed_tokens.weight)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.01)
            layer.mlp.down_proj.weight.mul_(0.01)
    write_tiny_gguf(path, model)
    return path


def write_tiny_gguf(path: Path, hf_model=None, arch: str = "llama", quant: str = "F16") -> None:
    """A llama GGUF from a transformers model (q/k permuted, 2-D weights quantized), with a gpt2 tokenizer."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    c = hf_model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_tokenizer_model("gpt2")
    byte_chars = [chr(i) for i in range(33, 127)]  # printable bytes are their own byte-level symbols
    tokens = byte_chars + [f"<x{i}>" for i in range(c.vocab_size - len(byte_chars) - 1)] + ["<|end|>"]
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 1) + [3])
    w.add_token_merges([])
    w.add_token_scores([0.0] * len(tokens))
    w.add_eos_token_id(len(tokens) - 1)
    w.add_bos_token_id(len(tokens) - 1)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    for name, t in hf_model.state_dict().items():
        a = t.float().numpy()
        if name.startswith("model.layers."):
            i, rest = name[len("model.layers."):].split(".", 1)
            theirs, suffix = rest.rsplit(".", 1)
            gname = f"blk.{i}.{per_layer[theirs]}.{suffix}"
            if theirs.endswith("q_proj"):
                a = gguf_permute(a, c.num_attention_heads)
            elif theirs.endswith("k_proj"):
                a = gguf_permute(a, c.num_key_value_heads)
        else:
            gname = names[name]
        if a.ndim == 2:
            q = quantize(np.ascontiguousarray(a), qtype)
            w.add_tensor(gname, q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(gname, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
