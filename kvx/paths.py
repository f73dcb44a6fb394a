"""Where kvx keeps what it builds once and reuses: $KVX_CACHE, default ~/.cache/kvx
(models/ converted weights, grammar/ compiled DFAs, numba/ the compiled CPU kernel)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("KVX_CACHE") or "~/.cache/kvx").expanduser()
