"""Acceptance 3 + cache: one-line ModelErrors for bad models, GGUF round trips, corrupt cache rebuilt."""
from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch

from kvx.errors import ModelError
from kvx.models import cache_info, load_model, resolve_model
from kvx.models.cache import content_key, entry_for
from modelkit import PagedRunner, write_tiny_gguf


def tiny_llama():
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   tie_word_embeddings=False, initializer_range=0.1)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).float().eval()


def assert_one_line_error(spec, names):
    with pytest.raises(ModelError) as info:
        load_model(str(spec))
    msg = str(info.value)
    assert str(names) in msg and "\n" not in msg, msg
    return msg


def test_bad_paths_give_one_line_errors(tmp_path):
    assert "no such file" in assert_one_line_error(tmp_path / "nope.gguf", tmp_path / "nope.gguf")
    (tmp_path / "empty").mkdir()
    assert "config.json" in assert_one_line_error(tmp_path / "empty", tmp_path / "empty")
    (tmp_path / "model.bin").write_bytes(b"x" * 100)
    assert ".gguf" in assert_one_line_error(tmp_path / "model.bin", tmp_path / "model.bin")
    (tmp_path / "fake.gguf").write_text("not a gguf at all")
    assert "not a GGUF" in assert_one_line_error(tmp_path / "fake.gguf", tmp_path / "fake.gguf")
    assert resolve_model("smollm2-135m").kind == "gguf"


def test_unsupported_architecture(tmp_path):
    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert "'mamba' is not supported" in assert_one_line_error(path, path)


@pytest.mark.parametrize("keep", [0.5, 0.02])
def test_truncated_gguf(tmp_path, keep):
    whole = tmp_path / "whole.gguf"
    write_tiny_gguf(whole, tiny_llama())
    data = whole.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep)])
    assert "truncated" in assert_one_line_error(cut, cut)


def gguf_vs_transformers(tmp_path, quant):
    from transformers import AutoModelForCausalLM

    path = tmp_path / f"tiny-{quant}.gguf"
    write_tiny_gguf(path, tiny_llama(), quant=quant)
    ours = load_model(str(path), dtype="float32")
    ref = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.randint(0, 128, (37,), generator=torch.Generator().manual_seed(3)).tolist()
    got = PagedRunner(ours.model, ours.config).step({0: ids}, all_logits=True)[0]
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0]
    return ours, (got - want).abs().max().item()


@pytest.mark.parametrize("quant", ["F16", "Q8_0", "Q4_1"])
def test_gguf_round_trip_matches_transformers(tmp_path, quant):
    """Same file, both loaders: catches wrong dequantization, tensor mapping or q/k un-permutation."""
    _, diff = gguf_vs_transformers(tmp_path, quant)
    assert diff <= 1e-4, diff


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    ours, diff = gguf_vs_transformers(tmp_path, "Q8_0")
    entry = entry_for(content_key(tmp_path / "tiny-Q8_0.gguf"))
    assert entry.is_valid() and any(e["key"] == entry.folder.name for e in cache_info()["entries"])
    good = entry.weights_path.read_bytes()
    ids = torch.arange(20).tolist()
    want = PagedRunner(ours.model, ours.config).step({0: ids})[0]
    for corrupt in (lambda: entry.weights_path.write_bytes(good[: len(good) // 2]),
                    lambda: (entry.folder / "model.json").write_text("{not json"),
                    lambda: entry.weights_path.write_bytes(b"\xff" * len(good))):
        corrupt()
        assert not entry.is_valid()
        again = load_model(str(tmp_path / "tiny-Q8_0.gguf"), dtype="float32")
        assert entry.is_valid() and entry.weights_path.read_bytes() == good
        assert json.loads((entry.folder / "model.json").read_text())["num_layers"] == 2
        torch.testing.assert_close(PagedRunner(again.model, again.config).step({0: ids})[0], want)
