"""The converted-model cache: dequantized weights + config + tokenizer per GGUF, keyed by content hash.

Layout: $KVX_CACHE/models/<sha256>/{weights.safetensors, model.json, tokenizer/, manifest.json}.
An entry is written in a temporary folder and renamed into place, so a reader sees all of it or
nothing; manifest.json (written last) records every file's size. Anything that does not check out
(missing file, wrong size, bad JSON, safetensors header not matching the file) is deleted and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch

from kvx.models.base import ModelConfig
from kvx.paths import cache_root

FORMAT = 1  # bump when the converted layout changes: old entries are then ignored (new key)
FULL_HASH_LIMIT = 1 << 30  # files above 1 GiB are hashed by samples (hashing 98 MB in full takes 0.25 s)
SAMPLE = 4 << 20


def content_key(path: Path) -> str:
    """sha256 of the whole file (or of its size + 16 evenly spaced 4 MiB samples when it is huge)."""
    h = hashlib.sha256(f"kvx-cache-{FORMAT}".encode())
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size <= FULL_HASH_LIMIT:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        else:
            h.update(str(size).encode())
            for i in range(16):
                f.seek((size - SAMPLE) * i // 15)
                h.update(f.read(SAMPLE))
    return h.hexdigest()


class CacheEntry:
    """One converted model on disk."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.weights_path = folder / "weights.safetensors"
        self.tokenizer_dir = folder / "tokenizer"

    def is_valid(self) -> bool:
        try:
            manifest = json.loads((self.folder / "manifest.json").read_text())
            if manifest.get("format") != FORMAT:
                return False
            for rel, size in manifest["sizes"].items():
                if (self.folder / rel).stat().st_size != size:
                    return False
            self.config()
            return _safetensors_complete(self.weights_path)
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def config(self) -> ModelConfig:
        return ModelConfig(**json.loads((self.folder / "model.json").read_text()))

    def weights(self) -> dict[str, torch.Tensor]:
        from safetensors.torch import load_file

        return load_file(str(self.weights_path))

    def source(self) -> str:
        try:
            return json.loads((self.folder / "manifest.json").read_text()).get("source", "?")
        except (OSError, ValueError):
            return "?"


def _safetensors_complete(path: Path) -> bool:
    """The header parses and its last tensor ends exactly at the end of the file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            return False
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            return False
        header = json.loads(f.read(n))
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    return 8 + n + end == size


def write_entry(folder: Path, source: Path, config: ModelConfig, weights: dict[str, torch.Tensor],
                write_tokenizer: Callable[[Path], None]) -> CacheEntry:
    """Build the entry in a temp folder next to `folder`, then rename it into place."""
    from safetensors.torch import save_file

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / "weights.safetensors"))
        (tmp / "model.json").write_text(json.dumps(asdict(config)))
        write_tokenizer(tmp / "tokenizer")
        sizes = {str(p.relative_to(tmp)): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {"format": FORMAT, "source": str(source), "sizes": sizes}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        if folder.exists():  # a corrupt entry we decided not to trust (or a racing writer's)
            shutil.rmtree(folder, ignore_errors=True)
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CacheEntry(folder)


def entry_for(key: str) -> CacheEntry:
    return CacheEntry(cache_root() / "models" / key)


def cache_info() -> dict:
    """For `kvx models`: where the cache is, what it holds, how big it is."""
    root = cache_root()
    entries = []
    models = root / "models"
    if models.is_dir():
        for folder in sorted(p for p in models.iterdir() if p.is_dir() and not p.name.startswith(".")):
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            entries.append({"key": folder.name, "source": CacheEntry(folder).source(), "bytes": size})
    return {"path": str(root), "entries": entries, "total_bytes": sum(e["bytes"] for e in entries)}
