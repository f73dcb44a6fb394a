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
from kvx.grammar.automata.table_kernels import column_classes, csr, keep_rows, reach, sort_prefix, trim_keep


@_jit
def _joint_classes(dfa_cob, text_bytes):  # pragma: no cover - compiled
    """The byte partition refining every automaton's classes and every literal's (each of its bytes a
    class, the rest one): the literals' bytes as one more row, each byte its own value there."""
    if len(text_bytes) == 0:
        return column_classes(dfa_cob)
    cob = np.empty((len(dfa_cob) + 1, 256), np.int64)
    cob[: len(dfa_cob)] = dfa_cob
    cob[len(dfa_cob)] = 0
    for i in range(len(text_bytes)):
        cob[len(dfa_cob), text_bytes[i]] = np.int64(text_bytes[i]) + 1
    return column_classes(cob)


@_jit
def _copy_rows(d, dfa_rows, text_ptr):  # pragma: no cover - compiled
    """The states of a copy of distinct automaton d, or (d < 0) of literal -1 - d's chain (a state per
    byte and the end)."""
    return dfa_rows[d] if d >= 0 else text_ptr[-d] - text_ptr[-1 - d] + 1


@_jit
def finish_network(dfa_trans, dfa_shape, dfa_acc, dfa_cob, text_bytes, text_ptr, copy_dfa, copy_node, entry_ptr,
                   entry_states, node_fin, start_members, start_final, all_live, max_states, minimise_up_to,
                   look_every):  # pragma: no cover - compiled
    """The composed DFA of a network's copies: (status, trans [n, K] int32, accepting, start, byte
    class of each byte). Status 0; 1: the language is empty; -1: over `max_states` states (or 8 times
    that while determinising); -2: the deadline passed.

    Copy i is distinct automaton d = copy_dfa[i]: dfa_shape[d] = (its states, its classes), its
    table flat in dfa_trans and its acceptance in dfa_acc after those of the automata before it,
    the classes of its bytes dfa_cob[d]; or, where copy_dfa[i] = -1 - t, the chain spelling literal
    t, text_bytes[text_ptr[t]:text_ptr[t + 1]] (compose._literal_chain's automaton, numbered alike).
    Its accepting states continue into target node copy_node[i], whose entry states are
    entry_states[entry_ptr[u]:entry_ptr[u + 1]] (see subset_kernel.subsets)."""
    reps, joint = _joint_classes(dfa_cob, text_bytes)
    k = len(reps)
    dfa_rows, dfa_k = dfa_shape[:, 0], dfa_shape[:, 1]
    dfa_row0 = np.zeros(len(dfa_rows) + 1, np.int64)
    dfa_cell0 = np.zeros(len(dfa_rows) + 1, np.int64)
    for d in range(len(dfa_rows)):
        dfa_row0[d + 1] = dfa_row0[d] + dfa_rows[d]
        dfa_cell0[d + 1] = dfa_cell0[d] + dfa_rows[d] * dfa_k[d]
    total = 0
    for i in range(len(copy_dfa)):
        total += _copy_rows(copy_dfa[i], dfa_rows, text_ptr)
    trans = np.empty((total, k), np.int32)
    copy_acc = np.zeros(total, np.bool_)
    node_of = np.full(total, -1, np.int64)
    cols = np.empty(k, np.int64)
    off = 0
    work = 0
    next_look = look_every
    for i in range(len(copy_dfa)):
        d = copy_dfa[i]
        if d < 0:  # a literal: byte j leads from its state j to j + 1, the last state accepts
            a, n = text_ptr[-1 - d], text_ptr[-d] - text_ptr[-1 - d]
            work += (n + 1) * k
            for s in range(n + 1):
                for c in range(k):
                    trans[off + s, c] = -1
            for s in range(n):
                trans[off + s, joint[text_bytes[a + s]]] = off + s + 1
            copy_acc[off + n] = True
            node_of[off + n] = copy_node[i]
            off += n + 1
            continue
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


@_jit
def network_from_edges(dfa_trans, dfa_shape, dfa_acc, dfa_cob, dfa_start, text_bytes, text_ptr, copy_dfa, copy_src,
                       copy_dst, eps_src, eps_dst, num_nodes, finals, max_states, minimise_up_to,
                       look_every):  # pragma: no cover - compiled
    """compose.Composer.network after its expansion, for a small network: the closures of its nodes
    (X(v): the nodes v reaches by epsilon edges and by copies that accept the empty word; the
    entries of v: the start states of the copies leaving X(v), ascending; v ends if X(v) holds a
    final node), whether every copy leads to a node that can end, then finish_network. Copy k is
    distinct automaton copy_dfa[k] (its start dfa_start[d]), or a literal (copy_dfa[k] < 0, as in
    finish_network), from node copy_src[k] to copy_dst[k].
    Status 3: the language is the empty word alone (nothing leaves the start's closure, which ends);
    else finish_network's."""
    m = len(copy_dfa)
    dfa_row0 = np.zeros(len(dfa_shape) + 1, np.int64)
    for d in range(len(dfa_shape)):
        dfa_row0[d + 1] = dfa_row0[d] + dfa_shape[d, 0]
    starts = np.empty(m, np.int64)
    empty_ok = np.zeros(m, np.bool_)
    dfa_rows = dfa_shape[:, 0]
    off = 0
    for k in range(m):
        d = copy_dfa[k]
        starts[k] = off  # a literal starts at its first state and spells at least a byte
        if d >= 0:
            starts[k] += dfa_start[d]
            empty_ok[k] = dfa_acc[dfa_row0[d] + dfa_start[d]]
        off += _copy_rows(d, dfa_rows, text_ptr)
    # forward: epsilon successors (epsilon edges, empty-accepting copies); the copies leaving each node
    succ_ptr, succ = csr(num_nodes, np.concatenate((eps_src, copy_src[empty_ok])),
                         np.concatenate((eps_dst, copy_dst[empty_ok])))
    out_ptr, outs = csr(num_nodes, copy_src, np.arange(m))
    is_final = np.zeros(num_nodes, np.bool_)
    is_final[finals] = True
    stamp = np.full(num_nodes, -1, np.int64)
    stack = np.empty(num_nodes, np.int64)
    found = np.empty(m, np.int64)

    def closure(root, tag):  # (the entries of the copies leaving X(root), ascending; whether X(root) ends)
        stamp[root] = tag
        stack[0] = root
        depth, count, fin = 1, 0, False
        while depth:
            depth -= 1
            u = stack[depth]
            fin |= is_final[u]
            for j in range(out_ptr[u], out_ptr[u + 1]):
                found[count] = outs[j]
                count += 1
            for j in range(succ_ptr[u], succ_ptr[u + 1]):
                w = succ[j]
                if stamp[w] != tag:
                    stamp[w] = tag
                    stack[depth] = w
                    depth += 1
        sort_prefix(found, count)
        return starts[found[:count]], fin

    entry0, final0 = closure(0, 0)
    if len(entry0) == 0:
        return (3 if final0 else 1), np.empty((0, 0), np.int32), np.zeros(0, np.bool_), np.int64(0), \
            np.zeros(256, np.int64)
    # the copies' target nodes, ascending, each with its closure's entries
    is_target = np.zeros(num_nodes, np.bool_)
    is_target[copy_dst] = True
    rank = np.cumsum(is_target.astype(np.int64))
    node_index = np.where(is_target, rank - 1, -1)
    targets = np.flatnonzero(is_target)
    entry_ptr = np.zeros(len(targets) + 1, np.int64)
    node_fin = np.zeros(len(targets), np.bool_)
    entries = [np.int64(0)]  # typed by its first item, taken out again
    entries.clear()
    for i in range(len(targets)):
        members, fin = closure(targets[i], i + 1)
        for q in members:
            entries.append(q)
        entry_ptr[i + 1] = entry_ptr[i] + len(members)
        node_fin[i] = fin
    # every copy leads to a node that can end (backwards from the final nodes): the trim need not look
    live = reach(num_nodes, np.concatenate((eps_dst, copy_dst)), np.concatenate((eps_src, copy_src)), finals)
    all_live = True
    copy_node = np.empty(m, np.int64)
    for k in range(m):
        all_live &= live[copy_dst[k]]
        copy_node[k] = node_index[copy_dst[k]]
    entry_states = np.array(entries, np.int64) if len(entries) else np.zeros(0, np.int64)
    return finish_network(dfa_trans, dfa_shape, dfa_acc, dfa_cob, text_bytes, text_ptr, copy_dfa, copy_node, entry_ptr,
                          entry_states, node_fin, entry0, final0, all_live, max_states, minimise_up_to, look_every)
