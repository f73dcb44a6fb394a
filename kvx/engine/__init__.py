"""The offline engine: paged KV pool, radix prefix cache, continuous-batching scheduler, sampling."""
from kvx.engine.api import EngineConfig, Request, Result, SamplingParams, Usage
from kvx.engine.engine import Engine

__all__ = ["Engine", "EngineConfig", "Request", "Result", "SamplingParams", "Usage"]
