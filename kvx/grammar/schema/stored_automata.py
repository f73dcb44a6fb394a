"""Automata that take a long time to build and are the same for every schema (the big formats, wide
character classes), kept on disk under $KVX_CACHE/grammar/<kind> so a process loads them in
milliseconds instead of building them on its first compile, where the build counts against that
compile's deadline (a fresh process compiling a schema with `\\p{L}` in a pattern spent 178 ms of
its 0.55 s on that class alone)."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from kvx.grammar.automata.cdfa import CDFA
from kvx.npz_cache import read_entry, write_entry
from kvx.paths import cache_root


@lru_cache(maxsize=1)
def _sources_hash() -> bytes:
    """The sources that can build a stored automaton: the schema layer (the pattern reader and the
    modules it uses) and the automata layer (an automaton built by older composing code is
    equivalent but may be larger: a cached uri automaton of 12,484 states, where today's code
    builds 3,611). A list of file names missed new modules."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for src in sorted(here.glob("*.py")) + sorted((here.parent / "automata").glob("*.py")):
        h.update(src.read_bytes())
    return h.digest()


def _path(kind: str, name: str, key: str) -> Path:
    """Where the automaton `name` (in a file name) built from `key` is kept."""
    digest = hashlib.sha256(_sources_hash() + key.encode()).hexdigest()[:16]
    return cache_root() / "grammar" / kind / f"{name}-{digest}.npz"


def stored(kind: str, name: str, key: str, build: Callable[[], CDFA]) -> CDFA:
    """The automaton kept for (kind, key), else build() (and keep it; a read-only or full cache only
    costs the build)."""
    path = _path(kind, name, key)
    found = read_entry(path, _entry)
    if found is not None:
        return found
    c = build()
    write_entry(path, trans=c.trans, accepting=c.accepting, start=np.int64(c.start), cob=c.cob)
    return c


def _entry(data) -> CDFA:
    c = CDFA(data["trans"].astype(np.int32), data["accepting"].astype(bool), int(data["start"]),
             data["cob"].astype(np.int64))
    if c.cob.shape != (256,) or c.trans.max() >= c.num_states or c.cob.max() >= c.trans.shape[1]:
        raise ValueError("foreign entry")
    return c
