"""The composer's network after its closures, in one compiled call (compose.Composer._finish_compiled).

The copies' rows are gathered over one byte partition refining all their classes and renumbered by
copy; then come the subset construction (subset_kernel.subsets), the trim, and the minimisation
of a small result. As a dozen numpy calls (stacking the classes, the masked add, np.unique over
the copies' ends, the trim's remap) a network cost 0.3-0.5 ms whatever its size, and a median
schema composes about fifteen of them, most under a hundred states.

The result is the table those steps give one by one (the same states, the same numbers).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.kernel_deadline import deadline_passed
from kvx.grammar.automata.minimise_kernel import minimal_rows
from kvx.grammar.automata.subset_kernel import subsets
from kvx.grammar.automata.table_kernels import column_classes, keep_rows, trim_keep


@_jit
def finish_network(dfa_trans, dfa_shape, dfa_acc, dfa_cob, copy_dfa, copy_node, entry_ptr, entry_states,
                   node_fin, start_members, start_final, all_live, max_states, minimise_up_to,
                   look_every):  # pragma: no cover - compiled
    """The composed DFA of a network's copies: (status, trans [n, K] int32, accepting, start, byte
    class of each byte). Status 0; 1: the language is empty; -1: over `max_states` states (or 8 times
    that while determinising); -2: the deadline passed.

    Copy i is distinct automaton d = copy_dfa[i]: dfa_shape[d] = (its states, its classes), its
    table flat in dfa_trans and its acceptance in dfa_acc after those of the automata before it,
    the classes of its bytes dfa_cob[d]. Its accepting states continue into target node
    copy_node[i], whose entry states are entry_states[entry_ptr[u]:entry_ptr[u + 1]]
    (see subset_kernel.subsets)."""
    reps, joint = column_classes(dfa_cob)
    k = len(reps)
    dfa_rows, dfa_k = dfa_shape[:, 0], dfa_shape[:, 1]
    dfa_row0 = np.zeros(len(dfa_rows) + 1, np.int64)
    dfa_cell0 = np.zeros(len(dfa_rows) + 1, np.int64)
    for d in range(len(dfa_rows)):
        dfa_row0[d + 1] = dfa_row0[d] + dfa_rows[d]
        dfa_cell0[d + 1] = dfa_cell0[d] + dfa_rows[d] * dfa_k[d]
    total = 0
    for i in range(len(copy_dfa)):
        total += dfa_rows[copy_dfa[i]]
    trans = np.empty((total, k), np.int32)
    copy_acc = np.zeros(total, np.bool_)
    node_of = np.full(total, -1, np.int64)
    cols = np.empty(k, np.int64)
    off = 0
    work = 0
    next_look = look_every
    for i in range(len(copy_dfa)):
        d = copy_dfa[i]
        n, width, cell0, row0 = dfa_rows[d], dfa_k[d], dfa_cell0[d], dfa_row0[d]
        work += n * k
        if work >= next_look:  # megalinter's network: millions of cells
            next_look = work + look_every
            if deadline_passed():
                return -2, trans, copy_acc, np.int64(-1), joint
        for c in range(k):
            cols[c] = dfa_cob[d, reps[c]]
        for s in range(n):
            at = cell0 + s * width
            for c in range(k):
                t = dfa_trans[at + cols[c]]
                trans[off + s, c] = t + off if t >= 0 else -1
            if dfa_acc[row0 + s]:
                copy_acc[off + s] = True
                node_of[off + s] = copy_node[i]
        off += n
    status, table, accepting, start = subsets(trans, copy_acc, node_of, entry_ptr, entry_states, node_fin,
                                              start_members, start_final, 8 * max_states, look_every,
                                              max_states if all_live else 0)
    if status < 0:
        return status, table, accepting, np.int64(start), joint
    seen = trim_keep(table, accepting, start, all_live)
    if not seen[start]:
        return 1, table, accepting, np.int64(start), joint
    kept = 0
    for s in range(len(seen)):
        kept += seen[s]
    if kept > max_states:
        return -1, table, accepting, np.int64(start), joint
    out, out_acc, remap = keep_rows(table, accepting, seen)
    if kept <= minimise_up_to:
        out, out_acc = minimal_rows(out, out_acc, remap[start])
        return 0, out, out_acc, np.int64(0), joint
    return 0, out, out_acc, np.int64(remap[start]), joint
