"""What produced an output: the schema, the model and the prompt settings, kept with the rows.

`--resume` appends to an output only if the job that wrote it is the same job: rows of two schemas in
one file (or one Parquet column) are garbage. Parquet keeps the fingerprint in its metadata, JSONL
in a sidecar file `OUT.kvx.json` (the JSONL itself stays one row per line). A mismatch is exit 2
naming both sides; `--force` appends anyway (the fingerprint becomes this run's).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kvx.errors import ConfigError

SHOWN_HASH = 16  # hex digits of a hash a message shows


def sha256_of(value: Any) -> str:
    """sha256 of a JSON value's canonical text (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    schema: str  # sha256 of the schema
    model: str  # --model as given
    prompt: str  # sha256 of the prompt settings: field, id field, template, system, examples, raw, schema prompt

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Fingerprint | None":
        try:
            data = json.loads(text)
            return cls(**{f.name: str(data[f.name]) for f in fields(cls)})
        except (ValueError, KeyError, TypeError):
            return None

    def differences(self, other: "Fingerprint") -> list[str]:
        """'schema 1a2b... there, 3c4d... now' for each part that differs (other = what is there)."""
        out = []
        for name, label in (("schema", "schema"), ("model", "model"), ("prompt", "prompt settings")):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                short = (lambda h: h[:SHOWN_HASH]) if name != "model" else (lambda m: m)
                out.append(f"{label} {short(theirs)} there, {short(mine)} now")
        return out


def job_fingerprint(schema: dict, model: str, prompt_settings: dict) -> Fingerprint:
    return Fingerprint(sha256_of(schema), model, sha256_of(prompt_settings))


def check_resume(found: list[Fingerprint | None], current: Fingerprint, output: str, force: bool) -> None:
    """ConfigError unless every fingerprint found in the output (and its parts) is this job's."""
    if force:
        return
    if any(f is None for f in found):
        raise ConfigError(f"--resume: {output} has no kvx fingerprint (written by another tool or an older kvx), "
                          f"so this run cannot tell it is the same job; add --force to append to it anyway")
    for f in found:
        if f != current:
            raise ConfigError(f"--resume: {output} was written by another job ({'; '.join(current.differences(f))}); "
                              f"rerun without --resume to replace it, or add --force to append anyway")


def sidecar_path(output: Path) -> Path:
    """Where a JSONL output keeps its fingerprint."""
    return output.with_name(output.name + ".kvx.json")


def read_sidecar(output: Path) -> Fingerprint | None:
    try:
        return Fingerprint.from_json(sidecar_path(output).read_bytes())
    except OSError:
        return None


def write_sidecar(output: Path, fingerprint: Fingerprint) -> None:
    """Atomically (temp + rename), before any row is written."""
    final = sidecar_path(output)
    tmp = final.with_name(final.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(fingerprint.to_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
