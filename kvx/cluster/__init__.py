"""Scale-out: a prefix-affinity plan for N replicas (pure Python) and its execution on Ray.

planner.py cuts a batch into per-replica runs of the prompt trie; work_queues.py hands them out
and lets an idle replica steal; fleet.py (driver) and replica.py (actor body) run them on Ray.
"""
