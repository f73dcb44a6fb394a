"""A schema split over local files, bundled into the one document kvx compiles, checks and prompts with.

`"$ref": "common.json#/$defs/address"` names another file, found relative to the referring one (or,
under an http(s) `$id`, at the same relative place from the root schema's folder, as a published set
of schemas mirrors its folder). Each file reached, and each file those name in turn, is embedded once
under `$defs` (`definitions` before 2019-09) with the URI the references use as its `$id`: JSON
Schema's own bundling (2020-12, section 9.3), so the grammar, `jsonschema` and the prompt all read one
self-contained document. Without a root `$id` those URIs stay relative (`common/person.json`): the
bundle, and the output fingerprint made from it, do not depend on where the folder lies. Nothing is
fetched from the network: a reference to an http(s) URI outside that folder is looked up in the
folders given as `schema_dirs` (`--schema-dir`: schemas saved once, by the `$id` they declare or at
`host/path` as a mirror keeps them) and otherwise stays what it was (the compiler refuses it, naming
its pointer). A file found that way is named by its URI in the bundle, not by where it lies.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from kvx.errors import ConfigError
from kvx.grammar.schema.refs import FILE_PREFIX, LEGACY, Document, dialect_of, id_keyword, join_uri, own_dialect

MAX_FILES = 256  # files one schema may pull in
MAX_SCANNED = 4096  # *.json files read per saved-schemas folder when looking for a $id


def bundle_files(schema: dict, path: Path, schema_dirs: tuple[Path, ...] = ()) -> dict:
    """`schema` (read from `path`) with every local file its $refs reach embedded; the same object
    when it names none. ConfigError (one line) for a file that is missing or not a schema.
    `schema_dirs`: folders that hold the schemas its http(s) references name (SavedSchemas)."""
    dialect = dialect_of(schema)  # the root's, and every file's that names no $schema of its own
    id_kw = id_keyword(dialect)
    saved = SavedSchemas(schema_dirs, dialect)
    folder = path.resolve().parent
    own_id = schema.get(id_kw)
    base = urldefrag(own_id)[0] if isinstance(own_id, str) else ""  # "": URIs stay relative, no path in them
    known: set[str] = {base}
    todo = [(schema, "", path.resolve(), "", dialect)]  # (document, base where it sits, its file, its name ("" for
    # the root), the dialect it is read in)
    files: dict[str, tuple[str, dict, Path]] = {}  # URI -> ($defs name, the file's schema, the file)
    missing: dict[str, ConfigError] = {}  # URI -> the error if no file read later declares it
    while todo:
        doc, doc_base, doc_path, doc_name, doc_dialect = todo.pop()
        for ref, uri, where in _refs(doc, doc_base, doc_dialect, known, doc_name):
            if uri in known:
                continue
            local = _local_path(ref, uri, doc_path, base, folder)
            if local is None and saved.dirs and urlparse(uri).scheme:
                local, problem = saved.find(uri)
                if local is None:  # unless a file read later declares it
                    missing.setdefault(uri, ConfigError(f"{path}: $ref {ref!r} at {where}: {problem}", option="schema_dir"))
                    continue
            if local is None:
                continue  # a remote reference: the compiler refuses it, naming its pointer
            if local == path.resolve() and not base:  # the root by its file name: that name is its $id
                base = uri
                known.add(uri)
                continue
            if uri in files:
                if files[uri][2] != local:
                    raise ConfigError(f"{path}: $ref {ref!r} at {where}: {local} and {files[uri][2]} would "
                                      f"both be {uri!r}; refer to them by paths inside the schema's folder")
                continue
            if not local.is_file():
                missing.setdefault(uri, ConfigError(f"{path}: $ref {ref!r} at {where}: no such schema file {local} "
                                                    "(referenced schemas are read from local files only)"))
                continue
            if len(files) >= MAX_FILES:
                raise ConfigError(f"{path}: $ref {ref!r} at {where}: more than {MAX_FILES} schema files")
            sub = _read(local, ref, where, path)
            sub_dialect = own_dialect(sub, dialect)  # as jsonschema reads it where it is embedded
            sub = {**sub, id_keyword(sub_dialect): uri}  # its URI as the references spell it
            file_name = _name(local, folder, uri)
            files[uri] = (FILE_PREFIX + file_name, sub, local)
            todo.append((sub, base, local, file_name, sub_dialect))  # its $id is read where it is embedded
    for uri, error in missing.items():
        if uri not in known and uri not in files:
            raise error
    if base and base != own_id:
        schema = {**schema, id_kw: base}
    if not files:
        return schema
    defs_kw = "definitions" if dialect in LEGACY else "$defs"
    return {**schema, defs_kw: {**(schema.get(defs_kw) or {}), **{name: sub for name, sub, _ in files.values()}}}


def bundled_files(schema: dict) -> list[str]:
    """The files bundle_files embedded in `schema`, by their path from the root's folder."""
    defs = [schema.get(kw) for kw in ("$defs", "definitions")]
    return sorted(name[len(FILE_PREFIX):] for d in defs if isinstance(d, dict) for name in d if name.startswith(FILE_PREFIX))


def _refs(doc: dict, base: str, dialect: str, known: set, name: str):
    """(ref, target URI without fragment, where: its pointer, after the file's name outside the root)
    for every $ref in `doc` (embedded under `base`), its URIs resolved as the grammar's Document
    resolves them; adds the URIs its $ids declare to `known`."""
    index = Document(doc, dialect, base)
    known.update(index.resources)
    for ptr, node_base, ref in index.references():
        yield ref, urldefrag(join_uri(node_base, ref))[0], f"{name}#{ptr}" if name else ptr or "/"


def _local_path(ref: str, uri: str, doc_path: Path, base: str, folder: Path) -> Path | None:
    """The file a reference names: a relative one from the referring file's folder, a file: URI
    itself, a URI under the root's own http(s) $id from the root's folder; None for any other."""
    parts = urlparse(uri)
    ref_parts = urlparse(urldefrag(ref)[0])
    if not ref_parts.scheme and not ref_parts.netloc and ref_parts.path:
        return (doc_path.parent / unquote(ref_parts.path)).resolve()
    if parts.scheme == "file":
        return Path(unquote(parts.path)).resolve()
    root_dir = base.rsplit("/", 1)[0] + "/"
    if parts.scheme in ("http", "https") and "/" in base and uri.startswith(root_dir):
        return (folder / unquote(uri[len(root_dir):])).resolve()
    return None


class SavedSchemas:
    """The schemas in the `schema_dirs` folders (`--schema-dir`), for the http(s) references no
    relative path reaches: first the mirror place (`DIR/host/path`, never outside DIR), then the
    file whose own $id is the URI (every *.json under the folders read once, on the first such
    reference)."""

    def __init__(self, dirs: tuple[Path, ...], dialect: str):
        """`dialect`: the root schema's, in which a saved schema naming no $schema of its own is read."""
        for d in dirs:
            if not d.is_dir():
                raise ConfigError(f"{{option}} {d}: no such folder", option="schema_dir")
        self.dirs, self.dialect = dirs, dialect
        self._by_id: dict[str, list[Path]] | None = None

    def find(self, uri: str) -> tuple[Path | None, str]:
        """(the file that holds the schema at `uri`, "") or (None, why there is none)."""
        parts = urlparse(uri)
        for d in self.dirs if parts.scheme in ("http", "https") else ():
            mirrored = (d / parts.netloc / unquote(parts.path).lstrip("/")).resolve()
            if parts.path.strip("/") and mirrored.is_relative_to(d.resolve()) and mirrored.is_file():
                return mirrored, ""
        found = self._index().get(uri, [])
        if len(found) > 1:
            return None, f"{found[0]} and {found[1]} both declare the $id {uri!r}"
        if not found:
            shown = ", ".join(str(d) for d in self.dirs)
            return None, (f"no schema in {{option}} {shown} declares the $id {uri!r} or lies at "
                          f"{parts.netloc}{parts.path} there (nothing is fetched from the network)")
        return found[0], ""

    def _index(self) -> dict[str, list[Path]]:
        if self._by_id is None:
            self._by_id = {}
            for d in self.dirs:
                for file in sorted(d.rglob("*.json"))[:MAX_SCANNED]:
                    declared = _declared_id(file, self.dialect)
                    if declared:
                        self._by_id.setdefault(declared, []).append(file.resolve())
        return self._by_id


def _declared_id(file: Path, dialect: str) -> str | None:
    """The absolute URI a saved schema declares as its $id (`id` in draft 4: its own $schema's, else
    `dialect`), without fragment; None if none or unreadable."""
    try:
        doc = json.loads(file.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    declared = doc.get(id_keyword(own_dialect(doc, dialect))) if isinstance(doc, dict) else None
    if not isinstance(declared, str) or not urlparse(declared).scheme:
        return None
    return urldefrag(declared)[0]


def _name(local: Path, folder: Path, uri: str) -> str:
    """A bundled file's name: its path from the root's folder; outside it, the absolute URI the
    references use (a --schema-dir schema), else its absolute path (`../common.json`)."""
    try:
        return local.relative_to(folder).as_posix()
    except ValueError:
        return uri if urlparse(uri).scheme else local.as_posix()


def _read(local: Path, ref: str, where: str, root: Path) -> dict:
    try:
        sub = json.loads(local.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        reason = f"{e.msg} at line {e.lineno}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise ConfigError(f"{root}: $ref {ref!r} at {where}: cannot read {local} ({reason})") from None
    if not isinstance(sub, dict):
        raise ConfigError(f"{root}: $ref {ref!r} at {where}: {local} is not a JSON Schema (not an object)")
    return sub
