"""frozen_heap: loaded objects leave the collector's passes for the scope, new garbage is still
collected inside it, and everything frozen is back (collectable) once the last scope ends."""
import gc
import threading
import weakref

from kvx.heap import frozen_heap


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


def test_scope_freezes_then_unfreezes():
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        with frozen_heap():  # nested: the inner scope neither refreezes nor unfreezes
            inner = gc.get_freeze_count()
        assert gc.get_freeze_count() == inner > 0
    assert gc.get_freeze_count() == 0


def test_garbage_made_inside_is_collected_inside():
    with frozen_heap():
        ref = weakref.ref(Node())
        assert ref() is not None  # held by its own cycle
        gc.collect()
        assert ref() is None


def test_frozen_object_that_dies_is_collected_after_the_scope():
    loaded = Node()
    ref = weakref.ref(loaded)
    with frozen_heap():
        del loaded
        gc.collect()
        assert ref() is not None  # frozen: the passes skip it
    gc.collect()
    assert ref() is None


def test_overlapping_scopes_on_two_threads_keep_the_freeze_until_the_last_leaves():
    entered, leave = threading.Event(), threading.Event()

    def engine_thread():
        with frozen_heap():
            entered.set()
            leave.wait(5)

    t = threading.Thread(target=engine_thread)
    with frozen_heap():
        t.start()
        entered.wait(5)
    assert gc.get_freeze_count() > 0  # the thread's scope is still open
    leave.set()
    t.join(5)
    assert gc.get_freeze_count() == 0
