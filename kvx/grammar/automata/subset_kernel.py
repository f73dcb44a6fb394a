"""The composer's subset construction as a compiled loop (compose.Composer._subsets_compiled).

A closure state (accepting in its copy, continuing into the copies that leave its target node)
stands for its closure, so its row becomes that subset's; the part of the row its node's entry
copies give is worked out once per node. Other subset states are keyed by their sorted members in
a hash table (linear probing). Members are read by their live cells (a CSR of the copies' rows),
bucketed by class; a class whose targets are the last union's takes its state without building the
union again, and where a closure state's own copy stops, its node's entries lead the same way for
every closure state of that node (worked out once). Over the big networks of the deadline band
(cirrus, swadl, eslintrc, as-code) that halves the loop's time; the states and their numbers are
those it gave before. The loop looks at the compile's deadline (kernel_deadline.py)
each time it has done `look_every` more units of work (a member or a class read): a count of
states would not do, a state of a big network reads thousands of members per class (1,024 of
megalinter's took 0.3 s, past the deadline unseen).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.kernel_deadline import deadline_passed
from kvx.grammar.automata.table_kernels import live_cells, members_hash, sort_prefix


@_jit
def _closure_of(q, node_of, entry_ptr, entry_states, is_closure, buf, at):  # pragma: no cover - compiled
    """Write closure(q) (q, and the entries of its target node if q is a closure state) at buf[at:]."""
    buf[at] = q
    at += 1
    if is_closure[q]:
        u = node_of[q]
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            buf[at] = entry_states[i]
            at += 1
    return at


@_jit
def _closure_with(members, acc, fin, is_closure, node_of, entry_ptr, entry_states):  # pragma: no cover - compiled
    """The first closure state among the sorted `members` whose closure they are (with its acceptance), or -1."""
    for q in members:
        if not is_closure[q] or fin[q] != acc:
            continue
        u = node_of[q]
        size = entry_ptr[u + 1] - entry_ptr[u]
        if len(members) < size or len(members) > size + 1:
            continue
        # closure(q) = {q} | entries(u) (entries sorted, q possibly among them) must equal members
        pos = 0
        ok = True
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            while pos < len(members) and members[pos] < entry_states[i]:
                if members[pos] != q:
                    ok = False
                    break
                pos += 1
            if not ok or pos == len(members) or members[pos] != entry_states[i]:
                ok = False
                break
            pos += 1
        while ok and pos < len(members):
            ok = members[pos] == q
            pos += 1
        if ok:
            return q
    return -1


LOOK_EVERY = 1 << 20  # units of work between looks at the deadline: ~1 ms here, a look costs a few us


@_jit
def subsets(trans, copy_acc, node_of, entry_ptr, entry_states, node_fin, start_members, start_final,
            cap, look_every, reach_cap=0):  # pragma: no cover - compiled
    """The subset construction of compose.Composer.network over its copies' states (see there):
    returns (status, trans, accepting, start); status -1: `cap` states or more, or (`reach_cap` > 0)
    more than `reach_cap` states reachable from the start already, -2: the deadline.

    `reach_cap` is for a caller that keeps every reachable state (its copies all live): once the new
    subset states pass reach_cap / 2, and each time they grow by a quarter more, the states reached
    from the start through the rows worked out so far are counted, a lower bound of what the trim
    keeps. A pattern that blows up (`{1,256}` of a class in a searched pattern) is then refused near
    its cap instead of at 8 times it (as-code's URL pattern: 2.1 -> 0.8 s).

    A closure state (accepting in its copy, continuing into the copies that leave its target node)
    stands for its closure, so its row becomes that subset's; the part of the row its node's entry
    copies give is worked out once per node. Other subset states are keyed by their sorted members."""
    total, k = trans.shape
    num_nodes = len(node_fin)
    fin = np.zeros(total, np.bool_)
    is_closure = np.zeros(total, np.bool_)
    for q in range(total):
        if copy_acc[q]:
            u = node_of[q]
            fin[q] = node_fin[u]
            is_closure[q] = entry_ptr[u + 1] > entry_ptr[u]
    # each copy state's moves (class, target), row by row: most rows move on a class or two of
    # the network's dozens (a key's letters), so members are read by their moves, not by classes
    cell_ptr, cell_class, cell_target = live_cells(trans)
    # per node and class: how many entry copies move (0, 1, 2 = several) and where, if one does
    node_live = np.zeros((num_nodes, k), np.int8)
    node_row = np.full((num_nodes, k), -1, np.int32)
    work = 0
    next_look = look_every
    for u in range(num_nodes):
        if work >= next_look:  # a big network's nodes hold ~1M entries
            next_look = work + look_every
            if deadline_passed():
                return -2, trans, fin, np.int64(-1)
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            q = entry_states[i]
            work += 1 + cell_ptr[q + 1] - cell_ptr[q]
            for e in range(cell_ptr[q], cell_ptr[q + 1]):
                c = cell_class[e]
                if node_live[u, c] < 2:
                    node_live[u, c] += 1
                    node_row[u, c] = cell_target[e]
    start_acc = start_final
    for q in start_members:
        start_acc |= fin[q]
    table = dict()  # hash of (members, acceptance), probed linearly -> slot
    table[np.int64(-1)] = np.int64(-1)
    slot_id = [np.int64(0)]
    slot_acc = [False]
    mem_ptr = [np.int64(0)]
    mem = [np.int64(0)]
    slot_id.clear()
    slot_acc.clear()
    mem.clear()
    out = trans.copy()
    extra_rows = [np.full(k, -1, np.int32)]  # the new subset states' rows and acceptance, in id order
    extra_acc = [False]
    extra_rows.clear()
    extra_acc.clear()
    todo = [np.int64(0)]  # (state id, first member in mem or -1 for a closure state, member count)
    todo.clear()
    buf = np.empty(total + 16, np.int64)
    cur = np.empty(total + 1, np.int64)  # the members of the state being worked out
    targets = np.empty(total + 1, np.int64)
    seen_target = np.full(total, -1, np.int64)  # per (state, class) visit: target already counted
    seen_member = np.full(total, -1, np.int64)
    visit = 0
    row = np.empty(k, np.int32)
    # per node and class, where the entries alone lead (a closure state whose own copy stops there):
    # every value's end in an object reaches the same keys, worked out once
    node_sub = np.full((num_nodes, k), -1, np.int64)
    class_ptr = np.zeros(k + 1, np.int64)  # the members' moves of the state being worked out, by class
    fill = np.zeros(k, np.int64)
    bucket = np.empty(total + 16, np.int64)
    # the last union's targets and state: neighbouring classes often lead the same members to the same
    # targets (letters a key splits apart, read alike by every string member): 70% of unions in
    # cirrus's and as-code's big networks
    last_targets = np.empty(total + 1, np.int64)
    done = np.zeros(total, np.bool_)  # closure states whose rows are worked out
    progress = np.array([0, reach_cap // 2, -1], np.int64)  # extra states worked out, next count at, start

    def reached(limit):  # states reached from the start through worked-out rows, counted past `limit`
        n = total + len(extra_acc)
        seen = np.zeros(n, np.bool_)
        queue = np.empty(n, np.int64)
        seen[progress[2]] = True
        queue[0] = progress[2]
        head, tail = 0, 1
        while head < tail and tail <= limit:
            s = queue[head]
            head += 1
            if s < total:
                if is_closure[s] and not done[s]:
                    continue
                r = out[s]
            elif s - total < progress[0]:
                r = extra_rows[s - total]
            else:
                continue
            for c in range(k):
                t = r[c]
                if t >= 0 and not seen[t]:
                    seen[t] = True
                    queue[tail] = t
                    tail += 1
        return tail

    def lookup(members, acc):  # (slot of (members, acc) or -1, the free hash to put it at)
        h = members_hash(members, acc)
        while h in table:
            s = table[h]
            if s >= 0 and slot_acc[s] == acc and mem_ptr[s + 1] - mem_ptr[s] == len(members):
                same = True
                for i in range(len(members)):
                    if mem[mem_ptr[s] + i] != members[i]:
                        same = False
                        break
                if same:
                    return s, h
            h += 1
        return -1, h

    def add(members, acc, ident, h):
        table[h] = np.int64(len(slot_id))
        slot_id.append(ident)
        slot_acc.append(acc)
        for q in members:
            mem.append(q)
        mem_ptr.append(np.int64(len(mem)))

    def id_of(members, acc):  # the state of these sorted members (made and queued if new); -1: past cap
        if len(members) == 1 and not is_closure[members[0]] and fin[members[0]] == acc:
            return np.int64(members[0])
        s, h = lookup(members, acc)
        if s >= 0:
            return slot_id[s]
        q = _closure_with(members, acc, fin, is_closure, node_of, entry_ptr, entry_states)
        if q >= 0:  # the members of a closure state: that state itself
            add(members, acc, np.int64(q), h)
            return np.int64(q)
        ident = np.int64(total + len(extra_acc))
        if ident >= cap:
            return np.int64(-1)
        if 0 < progress[1] <= len(extra_acc) and progress[2] >= 0:
            progress[1] += progress[1] // 4 + 1
            if reached(reach_cap) > reach_cap:
                return np.int64(-1)
        add(members, acc, ident, h)
        extra_rows.append(np.full(k, -1, np.int32))
        extra_acc.append(acc)
        todo.append(ident)
        todo.append(mem_ptr[-2])
        todo.append(np.int64(len(members)))
        return ident

    for q in range(total):  # a closure state's members are read from its node when needed
        if is_closure[q]:
            todo.append(np.int64(q))
            todo.append(np.int64(-1))
            todo.append(np.int64(0))
    start = id_of(start_members, start_acc)
    progress[2] = start
    head = 0
    while head < len(todo):
        if work >= next_look:
            next_look = work + look_every
            if deadline_passed():
                return -2, out, fin, start
        j, at, count = todo[head], todo[head + 1], todo[head + 2]
        head += 3
        work += k
        last_nt, last_state = -1, np.int64(-1)
        n_cur = -1  # its members in `cur`, their moves in `bucket` by class (for the first class that needs them)
        for c in range(k):
            if at < 0:  # a closure state: the copy's own move and its node's entries'
                u, own = node_of[j], trans[j, c]
                if node_live[u, c] == 0 or (own < 0 and node_live[u, c] == 1):
                    row[c] = own if node_live[u, c] == 0 else node_row[u, c]
                    continue
                if own < 0 and node_sub[u, c] >= 0:
                    row[c] = node_sub[u, c]
                    continue
            if n_cur < 0:
                if at < 0:
                    n_cur = _closure_of(j, node_of, entry_ptr, entry_states, is_closure, cur, 0)
                else:
                    for i in range(count):
                        cur[i] = mem[at + i]
                    n_cur = count
                class_ptr[:] = 0
                for i in range(n_cur):
                    for e in range(cell_ptr[cur[i]], cell_ptr[cur[i] + 1]):
                        class_ptr[cell_class[e] + 1] += 1
                for x in range(k):
                    class_ptr[x + 1] += class_ptr[x]
                    fill[x] = class_ptr[x]
                work += n_cur + class_ptr[k]
                if class_ptr[k] > len(bucket):
                    bucket = np.empty(2 * class_ptr[k], np.int64)
                for i in range(n_cur):  # member order within a class, as the targets were met before
                    for e in range(cell_ptr[cur[i]], cell_ptr[cur[i] + 1]):
                        bucket[fill[cell_class[e]]] = cell_target[e]
                        fill[cell_class[e]] += 1
            visit += 1
            nt = 0
            for x in range(class_ptr[c], class_ptr[c + 1]):
                t = bucket[x]
                if seen_target[t] != visit:
                    seen_target[t] = visit
                    targets[nt] = t
                    nt += 1
            if nt <= 1:  # one target: its own state (a closure state's row is its subset's)
                row[c] = targets[0] if nt else -1
                if at < 0 and trans[j, c] < 0:
                    node_sub[node_of[j], c] = row[c]
                continue
            same = nt == last_nt
            x = 0
            while same and x < nt:
                same = last_targets[x] == targets[x]
                x += 1
            if same:
                row[c] = last_state
                if at < 0 and trans[j, c] < 0:
                    node_sub[node_of[j], c] = row[c]
                continue
            end = 0
            acc = False
            for x in range(nt):
                t = targets[x]
                need = end + 1 + (entry_ptr[node_of[t] + 1] - entry_ptr[node_of[t]] if is_closure[t] else 0)
                if need > len(buf):
                    grown_buf = np.empty(2 * need, np.int64)
                    grown_buf[:end] = buf[:end]
                    buf = grown_buf
                before = end
                end = _closure_of(t, node_of, entry_ptr, entry_states, is_closure, buf, end)
                kept = before
                for y in range(before, end):  # drop members already in the union
                    if seen_member[buf[y]] != visit:
                        seen_member[buf[y]] = visit
                        buf[kept] = buf[y]
                        kept += 1
                end = kept
                acc |= fin[t]
            work += end
            sort_prefix(buf, end)
            row[c] = id_of(buf[:end], acc)
            if row[c] < 0:
                return -1, out, fin, start
            last_nt, last_state = nt, row[c]
            last_targets[:nt] = targets[:nt]
            if at < 0 and trans[j, c] < 0:
                node_sub[node_of[j], c] = row[c]
        if j < total:
            out[j] = row
            done[j] = True
        else:
            extra_rows[j - total][:] = row
            progress[0] += 1
    extra = np.full((len(extra_rows), k), -1, np.int32)
    for i in range(len(extra_rows)):
        extra[i] = extra_rows[i]
    accepting = np.zeros(total + len(extra_acc), np.bool_)
    accepting[:total] = fin
    for i in range(len(extra_acc)):
        accepting[total + i] = extra_acc[i]
    return 0, np.concatenate((out, extra)), accepting, start
