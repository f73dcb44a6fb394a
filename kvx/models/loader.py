"""load_model / load_tokenizer: resolve the spec, read (or convert and cache) the weights, build the model."""
from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path

import torch

from kvx.kernels import get_backend
from kvx.errors import ConfigError, ModelError
from kvx.models import gguf_loader, hf_loader
from kvx.models.base import LoadedModel, ModelConfig, ModelSource
from kvx.models.cache import CacheEntry, content_key, entry_for, write_entry
from kvx.models.llama import LlamaModel
from kvx.models.resolve import resolve_model
from kvx.models.tokenizer import Tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@functools.cache
def cpu_has_bf16_matmul() -> bool:
    """avx512_bf16 or AMX: oneDNN's bfloat16 matmuls then run several times faster than float32's."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def auto_dtype() -> torch.dtype:
    # Measured on this project's 2-core avx512_bf16 CPU (README): bfloat16 weights with float32
    # activations beat float32 weights ~1.5x on the engine benchmark; without bf16 units float32 wins.
    if torch.cuda.is_available() or cpu_has_bf16_matmul():
        return torch.bfloat16
    return torch.float32


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return auto_dtype()
    if dtype not in DTYPES:
        raise ConfigError(f"{{option}} {dtype!r} is not supported (expected auto, {' or '.join(DTYPES)})",
                          option="dtype")
    return DTYPES[dtype]


def _tokenizer(hf, config: ModelConfig) -> Tokenizer:
    return Tokenizer.for_model(hf, config.vocab_size, config.eos_token_ids, config.bos_token_id,
                               config.max_position_embeddings)


def _from_entry(entry: CacheEntry, with_weights: bool):
    config = entry.config()
    weights = entry.weights() if with_weights else {}
    return config, weights, _tokenizer(Tokenizer.hf_from_dir(entry.tokenizer_dir), config)


def _convert_gguf(path: Path, entry: CacheEntry | None):
    """Parse + dequantize the GGUF; write the cache entry when we can (a read-only cache is not an error)."""
    reader = gguf_loader.open_gguf(path)
    config = gguf_loader.read_config(reader, path)
    weights = gguf_loader.read_weights(reader, config, path)
    del reader
    write_tok = lambda d: gguf_loader.build_tokenizer_files(path, d)  # noqa: E731
    if entry is not None:
        try:
            entry = write_entry(entry.folder, path, config, weights, write_tok)
            return config, weights, _from_entry(entry, with_weights=False)[2]
        except OSError:
            pass
    with tempfile.TemporaryDirectory() as d:
        write_tok(Path(d))
        tok = _tokenizer(Tokenizer.hf_from_dir(Path(d)), config)
    return config, weights, tok


def _load_gguf(path: Path, with_weights: bool = True):
    entry = entry_for(content_key(path))
    if entry.is_valid():
        try:
            return _from_entry(entry, with_weights)
        except Exception:  # noqa: BLE001 - anything wrong with a cache entry means: rebuild it
            pass
    return _convert_gguf(path, entry)


def _load_source(source: ModelSource, with_weights: bool = True):
    if source.kind == "gguf":
        return _load_gguf(source.path, with_weights)
    config = hf_loader.read_config(source.path)
    weights = hf_loader.read_weights(source.path, config) if with_weights else {}
    return config, weights, _tokenizer(hf_loader.load_hf_tokenizer(source.path), config)


def load_model(spec: str | None = None, dtype: str | torch.dtype = "auto", attention: str = "torch") -> LoadedModel:
    """Resolve, load (GGUF through the converted cache) and build the forward; ModelError on bad input."""
    start = time.perf_counter()
    torch_dtype = resolve_dtype(dtype)
    source = resolve_model(spec)
    config, weights, tok = _load_source(source)
    try:
        backend = get_backend(attention)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if torch.cuda.is_available():  # the forward runs where its weights are; the engine follows them
        weights = {name: t.to("cuda") for name, t in weights.items()}
    model = LlamaModel(config, weights, torch_dtype, backend)
    return LoadedModel(config=config, model=model, tokenizer=tok, source=source, dtype=torch_dtype,
                       load_seconds=time.perf_counter() - start)


def load_tokenizer(spec: str | None = None) -> Tokenizer:
    return _load_source(resolve_model(spec), with_weights=False)[2]


__all__ = ["load_model", "load_tokenizer", "resolve_dtype", "ModelError"]
