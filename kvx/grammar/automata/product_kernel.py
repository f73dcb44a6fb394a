"""dfa_ops.product's walk as a compiled loop, numbering the pairs exactly as the numpy walk does.

The numpy walk takes a frontier of state pairs per breadth-first level: a dozen numpy calls and a
dict pass per level, and a string's length counter times its pattern has a level per character (a
`maxLength: 1024` with a pattern: a thousand levels, most of a big schema's compile).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.kernel_deadline import deadline_passed

LOOK_EVERY = 4096  # pair rows worked out between two looks at the compile's deadline


@_jit
def product_rows(ta, tb, nb, start_key, minus, max_states, look_every):  # pragma: no cover - compiled
    """dfa_ops.product's walk: ta [na, K] (-1 dead), tb [nb + 1, K] (b's dead state is row nb).
    A pair (a, b) is the key a * (nb + 1) + b; new pairs are numbered level by level, in key order
    within a level. Returns (status, trans [n, K] int32, keys [n]); status -1: more than
    `max_states` pairs, -2: the deadline passed."""
    k = ta.shape[1]
    width = nb + 1
    index = dict()
    index[np.int64(start_key)] = np.int64(0)
    keys = np.empty(64, np.int64)
    keys[0] = start_key
    n_keys = 1
    out = np.empty((64, k), np.int32)
    n_rows = 0
    frontier = keys[:1].copy()
    next_look = look_every
    while len(frontier):
        if n_rows >= next_look:
            next_look += look_every
            if deadline_passed():
                return -2, out[:0], keys[:0]
        m = len(frontier)
        nxt = np.empty((m, k), np.int64)
        vals = np.empty(m * k, np.int64)
        n_vals = 0
        for i in range(m):
            a, b = frontier[i] // width, frontier[i] % width
            for c in range(k):
                na, nb_ = ta[a, c], tb[b, c]
                if na >= 0 and (minus or nb_ < nb):
                    nxt[i, c] = na * width + nb_
                    vals[n_vals] = nxt[i, c]
                    n_vals += 1
                else:
                    nxt[i, c] = -1
        uniq = np.unique(vals[:n_vals])
        fresh = np.empty(len(uniq), np.int64)
        n_fresh = 0
        for key in uniq:
            if key not in index:
                index[key] = np.int64(n_keys)
                if n_keys == len(keys):
                    grown = np.empty(2 * n_keys, np.int64)
                    grown[:n_keys] = keys
                    keys = grown
                keys[n_keys] = key
                n_keys += 1
                fresh[n_fresh] = key
                n_fresh += 1
        if n_keys > max_states:
            return -1, out[:0], keys[:0]
        if n_rows + m > len(out):
            grown_out = np.empty((max(2 * len(out), n_rows + m), k), np.int32)
            grown_out[:n_rows] = out[:n_rows]
            out = grown_out
        for i in range(m):
            for c in range(k):
                out[n_rows + i, c] = index[nxt[i, c]] if nxt[i, c] >= 0 else -1
        n_rows += m
        frontier = fresh[:n_fresh].copy()
    return 0, out[:n_rows].copy(), keys[:n_keys].copy()
