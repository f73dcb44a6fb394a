"""What `--replicas N` asks of the cluster (declared here, light to import: the CLI reads it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterOptions:
    replicas: int
    ray_address: str | None = None
    replica_cpus: float | None = None  # None: the cluster's CPUs shared out
    replica_gpus: float = 0.0
