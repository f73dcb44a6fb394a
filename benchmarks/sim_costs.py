"""The step cost model both simulators use (cluster_sim.py, disagg_sim.py).

benchmarks/calibrate_costs.py on the 2-core AMX host, default model, bf16 (see docs/cluster.md):
a step costs T0 + prefill tokens x T_PREFILL + decode rows x T_DECODE (seconds). Measured:
batch-1 decode step 12.7 ms, batch-128 decode step 104.1 ms, 8192 prefill tokens 4.38 s.
"""
CALIBRATION = {"t0": 0.01199, "t_prefill": 0.000533, "t_decode": 0.000719}
BATCH_ROWS, BATCH_TOKENS = 128, 8192  # a full step: decode rows / prefill tokens sharing T0
