"""Start the replicas of `kvx extract --replicas N` on Ray and wrap them as the job's Runtime.

Everything that can be wrong is checked before work, as on one machine (exit 2, one line): Ray
missing (the install line), a cluster that cannot be joined or is too small, a schema the grammar
cannot enforce (compiled here against the tokenizer), a replica that cannot load the model.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from kvx.job.runtime import EngineOptions, Runtime, build_runtime
from kvx.cluster.fleet import FleetEngine, FleetSettings, kill_actors
from kvx.cluster.options import ClusterOptions
from kvx.cluster.replica import ReplicaWorker
from kvx.errors import ConfigError

INSTALL = "pip install 'kvx[ray]'"


def build_fleet_runtime(schema: dict, opts: EngineOptions, cluster: ClusterOptions) -> Runtime:
    ray = _import_ray(cluster.replicas)
    opts = _portable(opts)
    tokenizer, grammar = _driver_side(schema, opts)
    started_here = not ray.is_initialized()
    if started_here:
        _init(ray, cluster.ray_address)
    cpus = cluster.replica_cpus or max(1.0, float(int(ray.cluster_resources().get("CPU", 1) // cluster.replicas)))
    _check_room(ray, cluster, cpus)
    factory = os.environ.get("KVX_RUNTIME_FACTORY")
    remote = ray.remote(ReplicaWorker).options(num_cpus=cpus, num_gpus=cluster.replica_gpus)
    actors = [remote.remote(i, schema, opts, factory, int(cpus)) for i in range(cluster.replicas)]
    try:
        infos = ray.get([a.ready.remote() for a in actors])
    except ray.exceptions.RayError as e:
        kill_actors(ray, actors)
        raise ConfigError(f"a replica failed to start: {_last_line(e)}") from None
    failed = next((i for i in infos if i.get("error")), None)
    if failed is not None:
        kill_actors(ray, actors)
        raise ConfigError(failed["error"], option=failed.get("option"))
    engine = FleetEngine(actors, FleetSettings(lookahead=2 * opts.max_seqs, steal_below=opts.max_seqs), ray)
    return Runtime(tokenizer, engine, infos[0]["max_model_len"], infos[0]["model_name"], grammar, close=engine.close)


def _import_ray(replicas: int):
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--replicas {replicas} runs on Ray, which is not installed: {INSTALL}") from None
    return ray


def _portable(opts: EngineOptions) -> EngineOptions:
    """A model path given relative to here means the same file to a replica started elsewhere."""
    path = Path(opts.model).expanduser()
    return replace(opts, model=str(path.resolve())) if path.exists() else opts


def _driver_side(schema: dict, opts: EngineOptions):
    """Tokenizer (prompts are built here) and grammar (a bad schema exits 2 before any replica)."""
    if os.environ.get("KVX_RUNTIME_FACTORY"):
        local = build_runtime(schema, opts)
        return local.tokenizer, local.grammar
    from kvx.grammar import compile_schema
    from kvx.models.loader import load_tokenizer

    tokenizer = load_tokenizer(opts.model)
    return tokenizer, compile_schema(schema, tokenizer, opts.grammar)


def _init(ray, address: str | None) -> None:
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 configure_logging=True)
    except Exception as e:  # noqa: BLE001 - Ray raises several types for an unreachable cluster
        where = f"--ray-address {address}" if address else "a local Ray cluster"
        raise ConfigError(f"{where}: cannot start or join it ({_last_line(e)})") from None


def _check_room(ray, cluster: ClusterOptions, cpus: float) -> None:
    have = ray.cluster_resources()
    for name, each in (("CPU", cpus), ("GPU", cluster.replica_gpus)):
        need = each * cluster.replicas
        if need > have.get(name, 0) + 1e-9:
            raise ConfigError(f"--replicas {cluster.replicas} x {each:g} {name} needs {need:g} {name}s; "
                              f"the Ray cluster has {have.get(name, 0):g} (lower --replica-{name.lower()}s or --replicas)")


def _last_line(e: BaseException) -> str:
    """A Ray error's message: its last non-empty line (Ray puts the remote traceback before it)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[-1] if lines else type(e).__name__
