"""Model loading (GGUF, HF folders) and the Llama-family forward over the paged KV cache."""
from kvx.models.base import LoadedModel, ModelConfig, ModelSource
from kvx.models.cache import cache_info
from kvx.models.loader import load_model, load_tokenizer, resolve_dtype
from kvx.models.resolve import DEFAULT_MODEL, resolve_model
from kvx.models.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_MODEL", "LoadedModel", "ModelConfig", "ModelSource", "Tokenizer",
    "cache_info", "load_model", "load_tokenizer", "resolve_dtype", "resolve_model",
]
