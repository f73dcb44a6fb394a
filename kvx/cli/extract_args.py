"""The options of `kvx extract` as the command line received them: kvx/cli/extract.py declares
them (flags, defaults, help), kvx/cli/run.py checks them and builds the typed settings."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Optional


@dataclass
class ExtractArgs:
    input: str
    schema: str
    schema_dir: Optional[list[str]]
    output: Optional[str]
    model: str
    field: str
    id_field: str
    template: Optional[str]
    system: Optional[str]
    examples: Optional[str]
    raw: bool
    no_schema_prompt: bool
    schema_style: str
    choices: str
    mentions: bool
    truncate: str
    copy_guard: bool
    ungrounded: str
    no_repeat_ngram: int
    cut_text: str
    copy_codes: bool
    copy_digits: bool
    ordered: bool
    resume: bool
    force: bool
    retries: int
    seed: int
    max_failures: int
    max_tokens: int
    quiet: bool
    stats: Optional[str]
    lenient: bool
    whitespace: str
    extra_keys: str
    compile_deadline: float
    kv_memory: Optional[str]
    batch_tokens: int
    max_seqs: int
    speculate: int
    dtype: str
    attention: str
    kv_dtype: str
    replicas: int
    ray_address: Optional[str]
    replica_cpus: Optional[float]
    replica_gpus: float
    threads: Optional[int]

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ExtractArgs:
        """Each field taken by name from the command's parameters (e.g. its locals()): other names
        are ignored, a missing one is a KeyError."""
        return cls(**{f.name: options[f.name] for f in dataclasses.fields(cls)})
