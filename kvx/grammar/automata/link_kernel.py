"""pda.link in one compiled call: the rule bodies' call spellings read back as edges, equal rules
merged, unproductive calls cut, the rules the document reaches kept and concatenated into one table.

As Python and numpy calls over each of a median schema's ~28 rule bodies (a body read, its content
compared, its rows spread: a few numpy calls each) `link` was 1.6 ms of a 14 ms compile; in one
call it is ~0.55 ms, most of it reading and writing the tables' cells (~140,000 of them). The steps
and their results are pda.py's (the numpy route, without numba), state for state and edge for edge:
tests/grammar/test_graph_kernels.py holds the two side by side.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.kernel_deadline import deadline_passed
from kvx.grammar.automata.table_kernels import column_classes, csr, keep_rows, members_hash, reach, spread

CALL_SPELLING_BASE = 255  # a call's id is spelled in base 255 (pda.call_symbol)
EDGE_KEY = 1 << 16  # above every rule id (pda.MAX_RULES = 255 * 255): (state, callee) as one sort key


@_jit
def _call_edges(table, cob, call):  # pragma: no cover - compiled
    """pda._body's reading of call spellings (0xFF, hi, lo): the edges (state, rule, return state) in
    the order of states, then classes, then bytes; and the states that only spell them."""
    n, k = table.shape
    starts = np.zeros(k + 1, np.int64)  # the bytes of each class, ascending
    for b in range(256):
        starts[cob[b] + 1] += 1
    for c in range(k):
        starts[c + 1] += starts[c]
    fill = starts[:-1].copy()
    members = np.empty(256, np.int64)
    for b in range(256):
        members[fill[cob[b]]] = b
        fill[cob[b]] += 1
    spelling = np.zeros(n, np.bool_)
    edges = [(np.int64(0), np.int64(0), np.int64(0))]
    edges.clear()
    for s in range(n):
        m1 = table[s, call]
        if m1 < 0:
            continue
        spelling[m1] = True
        for k1 in range(k):
            m2 = table[m1, k1]
            if m2 < 0:
                continue
            spelling[m2] = True
            for k2 in range(k):
                ret = table[m2, k2]
                if ret < 0:
                    continue
                for i in range(starts[k1], starts[k1 + 1]):
                    for j in range(starts[k2], starts[k2 + 1]):
                        edges.append((np.int64(s), members[i] * CALL_SPELLING_BASE + members[j], np.int64(ret)))
    out = np.empty((len(edges), 3), np.int64)
    for i in range(len(edges)):
        out[i, 0], out[i, 1], out[i, 2] = edges[i]
    return out, spelling


@_jit
def read_body(trans, cob, call, accepting, start):  # pragma: no cover - compiled
    """pda._body: a composed rule body's call edges (_call_edges), its call column cleared and the
    states that only spelled calls dropped. Returns (table, final, start, edges) over the states kept."""
    table = trans.astype(np.int32)
    edges, spelled = _call_edges(table, cob, call)
    n, k = table.shape
    if not spelled.any():
        return table, accepting.copy(), np.int64(start), edges
    keep = ~spelled
    keep[start] = True
    for e in range(len(edges)):
        keep[edges[e, 2]] = True
    for s in range(n):
        table[s, call] = -1
    for s in range(n):
        if not spelled[s]:
            for c in range(k):
                if table[s, c] >= 0:
                    keep[table[s, c]] = True
    out, final, remap = keep_rows(table, accepting, keep)
    m = 0
    for e in range(len(edges)):
        m += keep[edges[e, 0]] and keep[edges[e, 2]]
    out_edges = np.empty((m, 3), np.int64)
    m = 0
    for e in range(len(edges)):
        if keep[edges[e, 0]] and keep[edges[e, 2]]:
            out_edges[m, 0], out_edges[m, 1], out_edges[m, 2] = remap[edges[e, 0]], edges[e, 1], remap[edges[e, 2]]
            m += 1
    return out, final, np.int64(remap[start]), out_edges


@_jit
def _partition(ptr, flat):  # pragma: no cover - compiled
    """Classes of the rows flat[ptr[i]:ptr[i + 1]]: equal rows (length and values) one class. Returns
    (class of each row, number of classes); classes are numbered in no particular order."""
    n = len(ptr) - 1
    hashes = np.empty(n, np.int64)
    for i in range(n):  # seeded by the row's length
        hashes[i] = members_hash(flat[ptr[i]:ptr[i + 1]], ptr[i + 1] - ptr[i])
    order = np.argsort(hashes)
    cls = np.full(n, -1, np.int64)
    count = 0
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and hashes[order[hi]] == hashes[order[lo]]:
            hi += 1
        for a in range(lo, hi):  # a run of equal hashes: each row not placed yet starts a class
            r = order[a]
            if cls[r] >= 0:
                continue
            cls[r] = count
            for b in range(a + 1, hi):
                q = order[b]
                if cls[q] >= 0 or ptr[q + 1] - ptr[q] != ptr[r + 1] - ptr[r]:
                    continue
                same = True
                for j in range(ptr[r + 1] - ptr[r]):
                    if flat[ptr[r] + j] != flat[ptr[q] + j]:
                        same = False
                        break
                if same:
                    cls[q] = count
            count += 1
        lo = hi
    return cls, count


@_jit
def _row_ptr(lengths):  # pragma: no cover - compiled
    """Where each of the rows of these lengths starts, laid end to end, and where the last ends."""
    ptr = np.zeros(len(lengths) + 1, np.int64)
    ptr[1:] = np.cumsum(lengths)
    return ptr


@_jit
def _rows_where(edges, mask):  # pragma: no cover - compiled
    """edges[mask] for an [m, 3] edge table, in order."""
    out = np.empty((mask.sum(), 3), np.int64)
    i = 0
    for e in range(len(edges)):
        if mask[e]:
            out[i] = edges[e]
            i += 1
    return out


@_jit
def _content_classes(tabs, fins, cob, compared):  # pragma: no cover - compiled
    """pda._content's classes of the bodies marked `compared` (their table over the classes of its
    columns, those classes, their finals: alike, the same class); every other body a class alone."""
    n = len(tabs)
    reduced = [np.zeros((0, 0), np.int32)]  # typed by their first items, taken out again
    reduced.clear()
    maps = [np.zeros(0, np.int64)]
    maps.clear()
    lengths = np.ones(n, np.int64)
    for d in range(n):
        if compared[d]:
            reps, of_class = column_classes(tabs[d])
            reduced.append(np.ascontiguousarray(tabs[d][:, reps]))
            maps.append(of_class[cob[d]])
            lengths[d] = 2 + reduced[d].size + 256 + len(fins[d])
        else:
            reduced.append(np.zeros((0, 0), np.int32))
            maps.append(np.zeros(0, np.int64))
    ptr = _row_ptr(lengths)
    flat = np.empty(ptr[-1], np.int64)
    for d in range(n):
        at = ptr[d]
        if not compared[d]:
            flat[at] = -1 - d
            continue
        flat[at], flat[at + 1] = reduced[d].shape[0], reduced[d].shape[1]
        at += 2
        for v in reduced[d].ravel():
            flat[at] = v
            at += 1
        for v in maps[d]:
            flat[at] = v
            at += 1
        for v in fins[d]:
            flat[at] = v
            at += 1
    return _partition(ptr, flat)[0]


@_jit
def _moves(table, edges, ok):  # pragma: no cover - compiled
    """A body's graph for `reach`: (sources, targets) of its byte moves, then of the call edges whose
    callee is ok (a call goes from its state to its return state); pda._Body.reach's arrays."""
    n, k = table.shape
    m = 0
    for s in range(n):
        for c in range(k):
            m += table[s, c] >= 0
    for e in range(len(edges)):
        m += ok[edges[e, 1]]
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    i = 0
    for s in range(n):
        for c in range(k):
            if table[s, c] >= 0:
                src[i], dst[i] = s, table[s, c]
                i += 1
    for e in range(len(edges)):
        if ok[edges[e, 1]]:
            src[i], dst[i] = edges[e, 0], edges[e, 2]
            i += 1
    return src, dst


@_jit
def _cut(table, final, start, edges, ok):  # pragma: no cover - compiled
    """pda._cut: the calls of unproductive rules dropped, with the states that can then no longer
    complete or be reached. Returns (table, final, start, edges)."""
    n = len(final)
    usable = np.zeros(len(edges), np.bool_)
    for e in range(len(edges)):
        usable[e] = ok[edges[e, 1]]
    kept_edges = _rows_where(edges, usable)
    src, dst = _moves(table, kept_edges, ok)
    live = reach(n, dst, src, np.flatnonzero(final))
    cut = table.copy()
    for s in range(n):
        for c in range(cut.shape[1]):
            if cut[s, c] >= 0 and not live[cut[s, c]]:
                cut[s, c] = -1
    on_live = np.zeros(len(kept_edges), np.bool_)
    for e in range(len(kept_edges)):
        on_live[e] = live[kept_edges[e, 0]] and live[kept_edges[e, 2]]
    kept_edges = _rows_where(kept_edges, on_live)
    src, dst = _moves(cut, kept_edges, ok)
    keep = reach(n, src, dst, np.array([start], np.int64)) & live
    out, out_final, remap = keep_rows(cut, final, keep)
    inside = np.zeros(len(kept_edges), np.bool_)
    for e in range(len(kept_edges)):
        inside[e] = keep[kept_edges[e, 0]] and keep[kept_edges[e, 2]]
    out_edges = _rows_where(kept_edges, inside)
    for e in range(len(out_edges)):
        out_edges[e, 0], out_edges[e, 2] = remap[out_edges[e, 0]], remap[out_edges[e, 2]]
    return out, out_final, np.int64(remap[start]), out_edges


@_jit
def _reaches_final(table, final, start, edges, ok):  # pragma: no cover - compiled
    """The body's start reaches a final state over its bytes and the calls of ok rules."""
    src, dst = _moves(table, edges, ok)
    seen = reach(len(final), src, dst, np.array([start], np.int64))
    for s in range(len(final)):
        if seen[s] and final[s]:
            return True
    return False


@_jit
def _callees_first(callee_ptr, callees, present):  # pragma: no cover - compiled
    """pda._callees_first over the rules with a body: each after the rules it calls (depth-first
    post-order, a cycle cut where it closes)."""
    n = len(present)
    done = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    placed = 0
    stack = np.empty(n, np.int64)
    at = np.empty(n, np.int64)
    for root in range(n):
        if done[root]:
            continue
        done[root] = True
        stack[0], at[0] = root, callee_ptr[root]
        depth = 1
        while depth:
            r = stack[depth - 1]
            nxt = -1
            while at[depth - 1] < callee_ptr[r + 1]:
                c = callees[at[depth - 1]]
                at[depth - 1] += 1
                if not done[c]:
                    nxt = c
                    break
            if nxt < 0:
                depth -= 1
                if present[r]:
                    order[placed] = r
                    placed += 1
            else:
                done[nxt] = True
                stack[depth], at[depth] = nxt, callee_ptr[nxt]
                depth += 1
    return order[:placed]


@_jit
def link_program(trans_flat, shapes, acc_flat, cob, starts, rule_body, call_byte, max_states,
                 look_every):  # pragma: no cover - compiled
    """pda.link over the composed bodies: distinct automaton d has shapes[d] = (states, classes), its
    table flat in trans_flat and its acceptance in acc_flat after those of the automata before it,
    the classes of its bytes cob[d], its start starts[d]; rule r's body is automaton rule_body[r]
    (-1: none). Returns (status, table, final, rule_of, rule_start, call_ptr, call_rule, call_ret,
    classes): pda.Program's arrays. Status 0; 1: the document cannot complete; -1: more than
    `max_states` states in the rules the document reaches; -2: the deadline passed."""
    n_rules = len(rule_body)
    n_bodies = len(shapes)
    empty = (np.zeros((0, 0), np.int32), np.zeros(0, np.bool_), np.zeros(0, np.int32), np.zeros(0, np.int32),
             np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(256, np.int64))
    # ---- each distinct body read once: its call spellings as edges (callees past the rules dropped:
    # a class's other bytes spelled beside a call's)
    tabs = [np.zeros((0, 0), np.int32)]  # typed by their first items, taken out again
    fins = [np.zeros(0, np.bool_)]
    edgs = [np.zeros((0, 3), np.int64)]
    tabs.clear()
    fins.clear()
    edgs.clear()
    body_start = np.empty(n_bodies, np.int64)
    work, next_look = 0, look_every
    row0, cell0 = 0, 0
    for d in range(n_bodies):
        n, k = shapes[d, 0], shapes[d, 1]
        trans = trans_flat[cell0:cell0 + n * k].reshape((n, k))
        table, final, start, edges = read_body(trans, cob[d], cob[d, call_byte], acc_flat[row0:row0 + n], starts[d])
        row0, cell0 = row0 + n, cell0 + n * k
        inside = np.zeros(len(edges), np.bool_)
        for e in range(len(edges)):
            inside[e] = edges[e, 1] < n_rules
        tabs.append(table)
        fins.append(final)
        edgs.append(_rows_where(edges, inside))
        body_start[d] = start
        work += n * k
        if work >= next_look:
            next_look = work + look_every
            if deadline_passed():
                return (np.int64(-2),) + empty
    # ---- equal rules merged (pda._merge_equal_rules): first by (states, start, calls, finals) and,
    # where two bodies meet there, their content; then refined by their call edges (state, callee's
    # class, return) until the classes stay as they are
    key_len = np.empty(n_rules, np.int64)
    for r in range(n_rules):
        key_len[r] = 4 if r > 0 and rule_body[r] >= 0 else 1
    ptr = _row_ptr(key_len)
    flat = np.empty(ptr[-1], np.int64)
    for r in range(n_rules):
        d = rule_body[r]
        if key_len[r] == 4:
            at = ptr[r]
            flat[at], flat[at + 1], flat[at + 2], flat[at + 3] = len(fins[d]), body_start[d], len(edgs[d]), fins[d].sum()
        else:  # the document, and rules without a body, each alone (a negative value no other row holds)
            flat[ptr[r]] = -1 - r
    by_size, sizes_count = _partition(ptr, flat)
    met = np.full(sizes_count, -1, np.int64)  # the first body of each size class
    compared = np.zeros(n_bodies, np.bool_)
    for r in range(n_rules):
        d = rule_body[r]
        if d < 0:
            continue
        if met[by_size[r]] < 0:
            met[by_size[r]] = d
        elif met[by_size[r]] != d:
            compared[d] = compared[met[by_size[r]]] = True
    content = _content_classes(tabs, fins, cob, compared)
    ptr = _row_ptr(np.full(n_rules, 2, np.int64))
    flat = np.empty(ptr[-1], np.int64)
    for r in range(n_rules):
        flat[2 * r], flat[2 * r + 1] = by_size[r], content[rule_body[r]] if r > 0 and rule_body[r] >= 0 else 0
    cls, count = _partition(ptr, flat)
    for r in range(n_rules):
        d = rule_body[r]
        key_len[r] = 1 + (3 * len(edgs[d]) if d >= 0 else 0)
    ptr = _row_ptr(key_len)
    flat = np.empty(ptr[-1], np.int64)
    while True:
        for r in range(n_rules):
            flat[ptr[r]] = cls[r]
            d = rule_body[r]
            if d < 0 or len(edgs[d]) == 0:
                continue
            edges = edgs[d]
            state, ret = edges[:, 0].copy(), edges[:, 2].copy()
            callee = np.empty(len(edges), np.int64)
            for e in range(len(edges)):
                callee[e] = cls[edges[e, 1]]
            # (state, callee's class, return) ascending: sorted by the last key first, stably
            order = np.argsort(ret, kind="mergesort")
            order = order[np.argsort(callee[order], kind="mergesort")]
            order = order[np.argsort(state[order], kind="mergesort")]
            at = ptr[r] + 1
            for e in order:
                flat[at], flat[at + 1], flat[at + 2] = state[e], callee[e], ret[e]
                at += 3
        refined, refined_count = _partition(ptr, flat)
        cls = refined
        if refined_count == count:
            break
        count = refined_count
        work += len(flat)
        if work >= next_look:
            next_look = work + look_every
            if deadline_passed():
                return (np.int64(-2),) + empty
    first = np.full(count, -1, np.int64)
    for r in range(n_rules):
        if first[cls[r]] < 0:
            first[cls[r]] = r
    alias = first[cls]
    # each rule kept: its body's automaton, and its own edges (callees renamed to their class's rule)
    body_of = np.full(n_rules, -1, np.int64)
    rule_start = np.empty(n_rules, np.int64)
    rule_edges = [np.zeros((0, 3), np.int64)]
    rule_edges.clear()
    for r in range(n_rules):
        d = rule_body[r]
        edges = np.zeros((0, 3), np.int64)  # a rule merged away, or without a body, calls nothing
        if d >= 0 and alias[r] == r:
            body_of[r], rule_start[r] = d, body_start[d]
            edges = edgs[d].copy()
            for e in range(len(edges)):
                edges[e, 1] = alias[edges[e, 1]]
        rule_edges.append(edges)
    # ---- productive rules (pda._productive_rules): least fixpoint, callees first, a rule looked at
    # again when one of its callees is found to complete
    present = body_of >= 0
    callee_len = np.zeros(n_rules, np.int64)
    callee_lists = [np.zeros(0, np.int64)]
    callee_lists.clear()
    for r in range(n_rules):
        callee_lists.append(np.unique(rule_edges[r][:, 1]) if present[r] else np.zeros(0, np.int64))
        callee_len[r] = len(callee_lists[r])
    callee_ptr = _row_ptr(callee_len)
    callees = np.empty(callee_ptr[-1], np.int64)
    caller_src = np.empty(callee_ptr[-1], np.int64)
    for r in range(n_rules):
        callees[callee_ptr[r]:callee_ptr[r + 1]] = callee_lists[r]
        caller_src[callee_ptr[r]:callee_ptr[r + 1]] = r
    caller_ptr, callers = csr(n_rules, callees, caller_src)
    ok = np.zeros(n_rules, np.bool_)
    queue = _callees_first(callee_ptr, callees, present)
    ring = np.empty(n_rules + 1, np.int64)
    queued = np.zeros(n_rules, np.bool_)
    head, size = 0, len(queue)
    ring[:size] = queue
    for r in queue:
        queued[r] = True
    while size:
        r = ring[head]
        head = (head + 1) % len(ring)
        size -= 1
        queued[r] = False
        if ok[r]:
            continue
        done = True
        for j in range(callee_ptr[r], callee_ptr[r + 1]):
            done &= ok[callees[j]]
        d = body_of[r]
        if done or _reaches_final(tabs[d], fins[d], rule_start[r], rule_edges[r], ok):
            ok[r] = True
            for j in range(caller_ptr[r], caller_ptr[r + 1]):
                c = callers[j]
                if not ok[c] and not queued[c]:
                    queued[c] = True
                    ring[(head + size) % len(ring)] = c
                    size += 1
    if not ok[0]:
        return (np.int64(1),) + empty
    # calls of rules that cannot complete cut, with what only they kept alive (pda._cut)
    for r in range(n_rules):
        if not (present[r] and ok[r]):
            continue
        cut = False
        for j in range(callee_ptr[r], callee_ptr[r + 1]):
            cut |= not ok[callees[j]]
        if cut:
            d = body_of[r]
            table, final, start, edges = _cut(tabs[d], fins[d], rule_start[r], rule_edges[r], ok)
            body_of[r] = len(tabs)
            tabs.append(table)
            fins.append(final)
            rule_start[r] = start
            rule_edges[r] = edges
    # ---- the rules the document reaches (pda._called_from_root), under the cap
    used = np.zeros(n_rules, np.bool_)
    used[0] = True
    stack = np.empty(n_rules, np.int64)
    stack[0] = 0
    depth = 1
    while depth:
        depth -= 1
        edges = rule_edges[stack[depth]]
        for e in range(len(edges)):
            c = edges[e, 1]
            if ok[c] and not used[c]:
                used[c] = True
                stack[depth] = c
                depth += 1
    sizes = np.zeros(n_rules, np.int64)
    for r in range(n_rules):
        if used[r]:
            sizes[r] = len(fins[body_of[r]])
    if sizes.sum() > max_states:
        return (np.int64(-1),) + empty
    # ---- one table (pda._concatenate): states renumbered by offset, columns over a joint partition
    offsets = _row_ptr(sizes)
    total = offsets[-1]
    kept = np.flatnonzero(used)
    stacked = np.empty((len(kept), 256), np.int64)
    for i in range(len(kept)):
        stacked[i] = cob[rule_body[kept[i]]]  # a cut body keeps its automaton's classes
    reps, joint = column_classes(stacked)
    table = np.empty((total, len(reps)), np.int32)
    final = np.empty(total, np.bool_)
    rule_of = np.empty(total, np.int32)
    start_of = np.full(n_rules, -1, np.int32)
    n_edges = 0
    for i in range(len(kept)):
        r = kept[i]
        off = offsets[r]
        spread(tabs[body_of[r]], stacked[i][reps], off, table[off:off + sizes[r]])
        final[off:off + sizes[r]] = fins[body_of[r]]
        rule_of[off:off + sizes[r]] = r
        start_of[r] = off + rule_start[r]
        n_edges += len(rule_edges[r])
    edges = np.empty((n_edges, 3), np.int64)
    at = 0
    for r in kept:
        for e in range(len(rule_edges[r])):
            edges[at, 0] = rule_edges[r][e, 0] + offsets[r]
            edges[at, 1] = rule_edges[r][e, 1]
            edges[at, 2] = rule_edges[r][e, 2] + offsets[r]
            at += 1
    order = np.argsort(edges[:, 0] * EDGE_KEY + edges[:, 1], kind="mergesort")
    call_ptr = np.zeros(total + 1, np.int64)
    for e in range(n_edges):
        call_ptr[edges[e, 0] + 1] += 1
    for s in range(total):
        call_ptr[s + 1] += call_ptr[s]
    call_rule = np.empty(n_edges, np.int32)
    call_ret = np.empty(n_edges, np.int32)
    for i in range(n_edges):
        call_rule[i], call_ret[i] = edges[order[i], 1], edges[order[i], 2]
    return np.int64(0), table, final, rule_of, start_of, call_ptr, call_rule, call_ret, joint
