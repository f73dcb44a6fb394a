"""`kvx models`: which model a name resolves to, where it lives, and how big it is."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from kvx.models.resolve import DEFAULT_MODEL


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def models(
    model: str = typer.Argument(DEFAULT_MODEL, help="Model name, GGUF file or HF folder."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Show the model a name resolves to: kind, path, size, and the kvx cache location."""
    from kvx.models import resolve_model
    from kvx.models import cache_info

    source = resolve_model(model)
    cache = cache_info()
    info = {
        "model": source.spec,
        "kind": source.kind,
        "path": str(source.path),
        "size_bytes": _size(source.path),
        "cache": cache["path"],
        "cache_bytes": cache["total_bytes"],
        "cache_entries": len(cache["entries"]),
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    width = max(map(len, info))
    for key, value in info.items():
        shown = f"{value} ({_human(value)})" if key.endswith("_bytes") else value
        typer.echo(f"{key:<{width}}  {shown}")
