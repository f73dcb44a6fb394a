"""The offline engine: paged KV pool, radix prefix cache, continuous-batching scheduler, sampling.
Its names load on first use, so kvx.engine.api (options, the request contract) imports without torch."""
from kvx.lazy import lazy_names

_HOME = {"Engine": "kvx.engine.engine", "EngineConfig": "kvx.engine.api", "Request": "kvx.engine.api",
         "Result": "kvx.engine.api", "SamplingParams": "kvx.engine.api", "Usage": "kvx.engine.api"}
__all__ = sorted(_HOME)
__getattr__ = lazy_names(__name__, _HOME)
