"""kvx: batch structured extraction from a local LLM."""

__version__ = "0.1.0"
