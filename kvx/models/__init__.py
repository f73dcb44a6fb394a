"""Model loading (GGUF, HF folders) and the Llama-family forward over the paged KV cache.
Its names load on first use, so kvx.models.resolve (DEFAULT_MODEL) imports without torch."""
from kvx.lazy import lazy_names

_HOME = {"LoadedModel": "kvx.models.base", "ModelConfig": "kvx.models.base", "ModelSource": "kvx.models.base",
         "cache_info": "kvx.models.cache", "load_model": "kvx.models.loader", "load_tokenizer": "kvx.models.loader",
         "resolve_dtype": "kvx.models.loader", "DEFAULT_MODEL": "kvx.models.resolve",
         "resolve_model": "kvx.models.resolve", "Tokenizer": "kvx.models.tokenizer"}
__all__ = sorted(_HOME)
__getattr__ = lazy_names(__name__, _HOME)
