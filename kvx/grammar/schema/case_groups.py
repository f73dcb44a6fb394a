"""The code points Python's `re` matches with each other under IGNORECASE (`(?i)`): one simple case
mapping apart (`k`, `K` and the Kelvin sign; `s`, `S` and the long s). Found by a pass over every
code point below CASED_BELOW (~150 ms), so they are kept on disk per Python and Unicode version, as
the format automata are."""
from __future__ import annotations

import hashlib
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvx.npz_cache import read_entry, write_entry
from kvx.paths import cache_root

CASED_BELOW = 0x20000  # every cased letter is below (Latin ... Adlam, 0x1E900)


@lru_cache(maxsize=1)
def case_groups() -> tuple[tuple[int, ...], ...]:
    """Every group of two or more code points that match each other case-insensitively."""
    path = _cache_path()
    groups = read_entry(path, _read)
    if groups is None:
        groups = _found()
        write_entry(path, members=np.array([cp for g in groups for cp in g], dtype=np.int32),
                    ends=np.cumsum([len(g) for g in groups]).astype(np.int64))
    return groups


def _found() -> tuple[tuple[int, ...], ...]:
    groups: dict[str, list[int]] = {}
    for cp in range(CASED_BELOW):
        c = chr(cp)
        up = c.upper() if len(c.upper()) == 1 else c
        low = up.lower()
        # str.lower is the full mapping: the one letter it makes two, U+0130 (I with a dot), is `i`
        # by the simple one, which `re` uses
        key = low if len(low) == 1 else low[0] if cp == 0x130 else c
        groups.setdefault(key, []).append(cp)
    return tuple(tuple(g) for g in groups.values() if len(g) > 1)


def _read(data) -> tuple[tuple[int, ...], ...]:
    members, ends = data["members"].tolist(), data["ends"].tolist()
    if not ends or ends[-1] != len(members):
        raise ValueError("foreign entry")
    return tuple(tuple(members[a:b]) for a, b in zip([0, *ends[:-1]], ends))


def _cache_path() -> Path:
    """Keyed by the Python version (its str methods' case tables), the Unicode version and this file."""
    h = hashlib.sha256(f"{sys.version_info[:2]} {unicodedata.unidata_version}".encode())
    h.update(Path(__file__).read_bytes())
    return cache_root() / "grammar" / f"case-groups-{h.hexdigest()[:16]}.npz"
