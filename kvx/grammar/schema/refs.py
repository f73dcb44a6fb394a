"""One schema document: subschemas by JSON pointer, local $ref resolution ($id resources, $anchor),
the dialect the document is written in, and schemas the compiler synthesises (negations).

A synthesised schema lives under its own pointer "!n" (n = its index); messages name the place of
the schema it was made from (`display`).
"""
from __future__ import annotations

from functools import cached_property, lru_cache
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema
from jsonschema.validators import validator_for

from kvx.grammar.automata import deadline
from kvx.grammar.errors import UnsupportedSchema

# keywords whose value is a schema, a list of schemas, or a name -> schema map
SCHEMA_VALUED = {"items", "additionalProperties", "not", "if", "then", "else", "contains",
                 "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems", "items"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
DIALECTS = {jsonschema.Draft202012Validator: "2020-12", jsonschema.Draft201909Validator: "2019-09",
            jsonschema.Draft7Validator: "draft7", jsonschema.Draft6Validator: "draft6",
            jsonschema.Draft4Validator: "draft4"}  # jsonschema's validator -> dialect
DRAFT_URIS = ("http://json-schema.org/draft/2020-12/", "http://json-schema.org/draft/2019-09/",
              "http://json-schema.org/draft-07/", "http://json-schema.org/draft-06/", "http://json-schema.org/draft-04/",
              "http://json-schema.org/schema")  # the drafts' meta-schemas (http or https)
LEGACY = ("draft4", "draft6", "draft7")  # $ref replaces its siblings; items may be an array
SYNTHESISED_DIALECT = "2020-12"  # the words negate.py writes
META = {"$schema", "$id", "id", "$anchor", "$defs", "definitions", "$comment", "title", "description",
        "examples", "default", "deprecated", "readOnly", "writeOnly", "$vocabulary", "contentMediaType",
        "contentEncoding", "contentSchema", "$dynamicAnchor", "$recursiveAnchor", "discriminator",
        "example", "externalDocs", "xml"}  # annotations and identifiers: they assert nothing
VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # JSON values, not schemas: a "$ref" there is data
FILE_PREFIX = "kvx:file:"  # $defs name of a schema file bundled in (kvx/job/schema_files.py) + its path
META_PREFIX = "kvx:meta:"  # $defs name of a draft's meta-schema embedded (meta_schemas.py) + its URI


class DanglingRef(UnsupportedSchema):
    """A local $ref to nothing: validators only fail when they reach it, so the compiler lets no
    value go there (and says so) instead of refusing the whole schema."""


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def dialect_of(root) -> str:
    """The dialect the record check reads the schema in (jsonschema's `validator_for`): the draft
    its $schema names, 2020-12 when it names none or another meta-schema (draft 3 is refused
    before this is asked)."""
    cls = validator_for(root, default=None) if isinstance(root, dict) else None
    return DIALECTS.get(cls, "2020-12")


def own_dialect(node, inherited: str) -> str:
    """The dialect a subschema is read in: its own `$schema`'s, as jsonschema switches validators at
    every subschema that names one (2020-12 when it names one jsonschema does not know), else the
    enclosing schema's; "draft3" for draft 3 (refused by the compiler)."""
    if not isinstance(node, dict) or not isinstance(node.get("$schema"), str):
        return inherited
    cls = validator_for(node, default=None)
    return "draft3" if cls is jsonschema.Draft3Validator else DIALECTS.get(cls, "2020-12")


def id_keyword(dialect: str) -> str:
    return "id" if dialect == "draft4" else "$id"


def validator_of(dialect: str):
    """jsonschema's validator class for `dialect`."""
    return next(cls for cls, name in DIALECTS.items() if name == dialect)


def read_apart(node, dialects: set[str]) -> str | None:
    """The first keyword of `node` that the drafts in `dialects` read differently (one has it, another
    does not; an items array, which 2020-12 does not take; draft 4's boolean exclusive bounds), None
    where they read it alike."""
    if "draft3" in dialects:
        return "$schema"
    if not isinstance(node, dict):
        return None
    foreign = [foreign_keywords(d) | ({"$dynamicRef"} if d != "2020-12" else set())
               | ({"$recursiveRef"} if d != "2019-09" else set()) for d in dialects]
    for kw, value in node.items():
        if (any(kw in f for f in foreign) and not all(kw in f for f in foreign)
                or kw == "items" and isinstance(value, list) and "2020-12" in dialects
                or kw.startswith("exclusiveM") and isinstance(value, bool) and "draft4" in dialects):
            return kw
    return None


def join_uri(base: str, ref: str) -> str:
    """`ref` resolved against `base`: urljoin, but a fragment alone always lands on the base (urljoin
    leaves "#/$defs/x" as it is under a scheme it does not know as hierarchical, a `urn:` $id's)."""
    return urldefrag(base)[0] + ref if ref.startswith("#") else urljoin(base, ref)


@lru_cache(maxsize=None)
def foreign_keywords(dialect: str) -> frozenset[str]:
    """Keywords of other drafts that the record check does not read in `dialect` (draft 4's `const`,
    draft 6's `if`, draft 7's `dependentRequired`, 2020-12's `dependencies`): jsonschema's validator
    for the dialect has no rule for them. Not the dynamic references (refused on their own terms), nor
    draft 4's exclusiveMinimum/Maximum (booleans its minimum/maximum read)."""
    cls = validator_of(dialect)
    others = set().union(*(c.VALIDATORS for c in DIALECTS)) - set(cls.VALIDATORS)
    kept = {"$dynamicRef", "$recursiveRef"} | ({"exclusiveMinimum", "exclusiveMaximum"} if dialect == "draft4" else set())
    return frozenset(others - kept)


def names_a_draft(uri: str) -> bool:
    """Whether a $schema URI is a draft 4-2020-12 meta-schema's, spelt with http or https (else it
    is a custom meta-schema, read as 2020-12 as jsonschema reads it)."""
    return uri.replace("https://", "http://", 1).startswith(DRAFT_URIS)


def subschemas(node: dict):
    """(keyword, place, subschema) for every direct subschema of `node`: place None for a
    schema-valued keyword, else the index in its list or the name in its map."""
    for key, value in node.items():
        if key in SCHEMA_VALUED and isinstance(value, (dict, bool)):
            yield key, None, value
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield key, i, sub
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, (dict, bool)):
                    yield key, name, sub


def _child_pointer(pointer: str, key: str, place) -> str:
    return f"{pointer}/{escape(key)}" + ("" if place is None else f"/{escape(str(place))}")


def child_pointers(node: dict, pointer: str):
    """(pointer, subschema) for every direct subschema of `node`."""
    for key, place, sub in subschemas(node):
        yield _child_pointer(pointer, key, place), sub


def with_children(node: dict, pointer: str, change) -> dict:
    """A shallow copy of `node` (at `pointer`) whose direct subschemas are `change(subschema, its
    pointer)`."""
    out = dict(node)
    for key, place, sub in subschemas(node):
        changed = change(sub, _child_pointer(pointer, key, place))
        if place is None:
            out[key] = changed
            continue
        if out[key] is node[key]:  # copy the list or map before the first change
            out[key] = list(node[key]) if isinstance(node[key], list) else dict(node[key])
        out[key][place] = changed
    return out


class Document:
    """Finds subschemas by pointer and resolves local references."""

    def __init__(self, root, dialect: str | None = None, base: str = ""):
        """`dialect`: the one `root` is read in (default: its own $schema's); `base`: the URI it is
        embedded under (a file bundled into another document)."""
        self.root = root
        self.dialect = dialect or dialect_of(root)
        self.base_of: dict[str, str] = {}  # pointer -> base URI in effect there
        self.dialects: dict[str, str] = {}  # pointer -> dialect read there (a subschema's own $schema switches it)
        self.resources: dict[str, str] = {}  # absolute URI (no fragment) -> pointer
        self.anchors: dict[str, str] = {}  # absolute URI#anchor -> pointer
        self.synthesised: list[tuple[object, str]] = []  # (schema, pointer it was made from)
        self._at: dict[str, tuple] = {}
        self._index(root, "", base, self.dialect)

    def _index(self, node, pointer: str, base: str, dialect: str) -> None:
        if len(self.base_of) % 1024 == 0:  # a 2 MB schema takes 0.2 s to index
            deadline.check()
        if pointer:
            dialect = own_dialect(node, dialect)
        self.dialects[pointer] = dialect
        if not isinstance(node, dict):
            self.base_of[pointer] = base
            return
        ident = node.get(id_keyword(dialect))
        if isinstance(ident, str) and not ident.startswith("#"):
            base = urldefrag(join_uri(base, ident))[0]
            self.resources.setdefault(base, pointer)
        elif isinstance(ident, str) and len(ident) > 1:  # draft <= 7: "#name" is a location name
            self.anchors.setdefault(f"{base}{ident}", pointer)
        if pointer == "":
            self.resources.setdefault(base, "")
        for kw in ("$anchor", "$dynamicAnchor"):  # a plain $ref to a $dynamicAnchor acts as to an $anchor
            if isinstance(node.get(kw), str):
                self.anchors.setdefault(f"{base}#{node[kw]}", pointer)
        self.base_of[pointer] = base
        walked = set()
        for key, place, sub in subschemas(node):
            walked.add(key)
            self._index(sub, _child_pointer(pointer, key, place), base, dialect)
        for key, value in node.items():  # keys no keyword walks, after the subschemas
            if key not in walked and key not in VALUE_KEYWORDS:
                self._index_unwalked(value, f"{pointer}/{escape(key)}", base, dialect)

    def _index_unwalked(self, node, pointer: str, base: str, dialect: str) -> None:
        """Objects under a key no keyword walks (meltano's `$defs/plugins/{generic, extractors}`, a
        group of definitions inside a definition, which a `$ref` reaches by pointer): they take the
        enclosing schema's base, as the JSON pointer into the document does; no `$id` or anchor of
        theirs counts (a validator does not crawl them for resources either)."""
        if isinstance(node, dict):
            self.base_of[pointer] = base
            self.dialects[pointer] = dialect = own_dialect(node, dialect)
            items = [(k, v) for k, v in node.items() if k not in VALUE_KEYWORDS]
        elif isinstance(node, list):
            items = [(str(i), v) for i, v in enumerate(node)]
        else:
            return
        for key, sub in items:
            self._index_unwalked(sub, f"{pointer}/{escape(key)}", base, dialect)

    def dialect_at(self, pointer: str) -> str:
        """The dialect the schema at `pointer` is read in (a synthesised one: the words negate.py
        writes). UnsupportedSchema where the record check reads it in two (`readings`)."""
        routes = self._routes
        if routes is None:  # one draft throughout: the common case, asked per piece and per verdict
            return SYNTHESISED_DIALECT if pointer.startswith("!") else self.dialect
        read = self.readings(pointer)
        if len(read) == 1:
            return next(iter(read))
        apart = read_apart(self.at(pointer), read)
        if apart is not None:
            where = self.where(pointer)
            raise UnsupportedSchema(f"unsupported keyword '{apart}' at {where} (references from schemas of different "
                                    f"drafts reach it, and the record check reads it in the draft of the one it "
                                    f"came from: {' and '.join(sorted(read))}, which read it differently)", apart, where)
        written = self.written_in(pointer)
        return written if written in read else min(read)  # they read it alike

    def readings(self, pointer: str) -> set[str]:
        """The dialects the record check reads the schema at `pointer` in. jsonschema's validator
        switches at a subschema naming its own $schema; elsewhere a schema is read in the draft of the
        validator that reaches it, so a `$ref` from a draft-7 schema reads its target in draft 7 even
        inside a draft-4 file, unless the target names its own $schema (`_routes`)."""
        if pointer.startswith("!"):
            return {SYNTHESISED_DIALECT}
        routes = self._routes
        if routes is not None and pointer in routes:
            node = self.at(pointer)  # switched by its own $schema, else the reaching validator's
            return {own_dialect(node, came) for came in routes[pointer]}
        return {self.written_in(pointer)}

    def written_in(self, pointer: str) -> str:
        """The dialect of the resource the schema at `pointer` lies in (its own $schema's, or the
        nearest above): what `referencing` reads identifiers and anchors by, whatever route the
        validator takes."""
        hit = self.dialects.get(pointer)
        while hit is None and pointer:  # a place the index did not reach: its nearest indexed parent's
            pointer = pointer.rpartition("/")[0]
            hit = self.dialects.get(pointer)
        return self.dialect if hit is None else hit

    def ref_replaces_siblings(self, pointer: str) -> bool:
        """Whether a `$ref` at `pointer` replaces its siblings (drafts 4-7), as the record check reads
        it: jsonschema applies the rule of the validator that descends into a schema (the enclosing
        schema's, or the referring one's), not the schema's own draft. UnsupportedSchema where routes
        in from drafts on either side of the rule reach a `$ref` with other keywords beside it."""
        if pointer.startswith("!"):
            return False
        routes = self._routes
        if routes is None:
            return self.dialect in LEGACY
        if pointer not in routes:
            return (self.dialect_at(pointer.rpartition("/")[0]) if pointer else self.dialect) in LEGACY
        rules = {came in LEGACY for came in routes[pointer]}
        node = self.at(pointer)
        if len(rules) > 1 and isinstance(node, dict) and any(k != "$ref" and k not in META for k in node):
            where = self.where(pointer)
            raise UnsupportedSchema(f"unsupported keyword '$ref' at {where} (other keywords beside it, which the "
                                    f"record check reads or ignores by the draft of the schema it came from: "
                                    f"{' and '.join(sorted(routes[pointer]))})", "$ref", where)
        return rules.pop()

    @cached_property
    def _routes(self) -> dict[str, set[str]] | None:
        """For a document that mixes drafts (a subschema's own $schema names another): per pointer the
        check reaches, the drafts of the validators that reach it (from the enclosing schema or a
        reference). None where one draft reads all of it."""
        if all(d == self.dialect for d in self.dialects.values()):
            return None
        came: dict[str, set[str]] = {}
        todo = [("", self.dialect)]
        while todo:
            if len(todo) % 1024 == 0:
                deadline.check()
            ptr, by = todo.pop()
            if by in came.get(ptr, ()):
                continue
            came.setdefault(ptr, set()).add(by)
            node = self.at(ptr)
            dialect = own_dialect(node, by)
            if not isinstance(node, dict):
                continue
            for kw in ("$ref", "kvx:ref"):
                if isinstance(node.get(kw), str):
                    target = node[kw] if kw == "kvx:ref" else self.target_or_none(node[kw], ptr)
                    if target is not None:
                        todo.append((target, dialect))
            if not ("$ref" in node and by in LEGACY):  # else the siblings are not read
                todo.extend((sub, dialect) for sub, _ in child_pointers(node, ptr)  # $defs: only references reach them
                            if sub[len(ptr) + 1:].split("/", 1)[0] not in ("$defs", "definitions"))
        return came

    def target_or_none(self, ref: str, pointer: str) -> str | None:
        """resolve(), None for a reference it refuses (remote, dangling)."""
        try:
            return self.resolve(ref, pointer)
        except UnsupportedSchema:
            return None

    def references(self):
        """(pointer, base URI there, the reference) of every `$ref` in the document."""
        for ptr, base in self.base_of.items():
            node = self.at(ptr)
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                yield ptr, base, node["$ref"]

    def synthesise(self, schema, made_from: str) -> str:
        """A pointer to `schema`, a schema the compiler built in place of the one at `made_from`."""
        self.synthesised.append((schema, self.origin(made_from)))
        return f"!{len(self.synthesised) - 1}"

    def origin(self, pointer: str) -> str:
        """The document pointer `pointer` stands for (a synthesised schema's: the one it was made from)."""
        if pointer.startswith("!"):
            return self.synthesised[int(pointer[1:].split("/", 1)[0])][1]
        return pointer

    def display(self, pointer: str) -> str:
        """`pointer` as a message names it: its origin, in a bundled file that file's name and pointer."""
        pointer = self.origin(pointer)
        for defs in ("/$defs/", "/definitions/"):
            for prefix in (FILE_PREFIX, META_PREFIX):
                if pointer.startswith(defs + prefix):
                    name, _, rest = pointer[len(defs) + len(prefix):].partition("/")
                    return f"{name.replace('~1', '/').replace('~0', '~')}#" + (f"/{rest}" if rest else "")
        return pointer

    def where(self, pointer: str) -> str:
        """`display(pointer)` as a message shows it ("/" for the root)."""
        return self.display(pointer) or "/"

    def at(self, pointer: str):
        hit = self._at.get(pointer)
        if hit is None:
            hit = self._at[pointer] = (self._lookup(pointer),)
        return hit[0]

    def _lookup(self, pointer: str):
        """From the nearest ancestor looked up before (the walk asks parents first: most lookups are
        one step), else from the root or the synthesised schema the pointer starts at."""
        below, at = [], pointer  # `at` itself was asked and missed
        while True:
            at, sep, raw = at.rpartition("/")
            if not sep:  # `raw` is the pointer's first token: "" (the root) or "!n"
                node = self.synthesised[int(raw[1:])][0] if raw.startswith("!") else self.root
                break
            below.append(raw)
            hit = self._at.get(at)
            if hit is not None:
                node = hit[0]
                break
        for raw in reversed(below):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            elif isinstance(node, dict) and token in node:
                node = node[token]
            else:
                raise KeyError(pointer)
        return node

    def resolve(self, ref: str, pointer: str) -> str:
        """Pointer of the subschema `ref` (found at `pointer`) names; UnsupportedSchema if remote."""
        pointer = self.origin(pointer)
        where = self.display(f"{pointer}/$ref")
        base = self.base_of.get(pointer, "")
        if ref.startswith("#") and "#" not in base:  # a fragment: join_uri and urldefrag's answer, without urllib
            uri, fragment = base, ref[1:]
        else:
            uri, fragment = urldefrag(join_uri(base, ref))
        fragment = unquote(fragment)
        if uri not in self.resources:
            raise UnsupportedSchema(f"unsupported keyword '$ref' (remote reference {ref!r}) at {where or '/'}; "
                                    "nothing is fetched: save that schema and name its folder with {option}",
                                    "$ref", where, option="schema_dir")
        base_ptr = self.resources[uri]
        if fragment == "" or fragment.startswith("/"):
            ptr = base_ptr + fragment
            try:
                self.at(ptr)
            except KeyError:
                raise DanglingRef(f"invalid schema: $ref {ref!r} points nowhere at {where}", "$ref", where) from None
        else:
            ptr = self.anchors.get(f"{uri}#{fragment}")
            if ptr is None:
                raise DanglingRef(f"invalid schema: $ref {ref!r} names no $anchor at {where}", "$ref", where)
        return ptr
