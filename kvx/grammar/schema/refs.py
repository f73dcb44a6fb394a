"""Local $ref resolution: JSON pointers, $anchor and embedded $id resources of one document."""
from __future__ import annotations

from urllib.parse import unquote, urldefrag, urljoin

from kvx.grammar.errors import UnsupportedSchema

# keywords whose value is a schema, a list of schemas, or a name -> schema map
SCHEMA_VALUED = {"items", "additionalProperties", "not", "if", "then", "else", "contains",
                 "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def child_pointers(node: dict, pointer: str):
    """(pointer, subschema) for every direct subschema of `node`."""
    for key, value in node.items():
        if key in SCHEMA_VALUED and isinstance(value, (dict, bool)):
            yield f"{pointer}/{escape(key)}", value
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield f"{pointer}/{key}/{i}", sub
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield f"{pointer}/{escape(key)}/{escape(name)}", sub


class Document:
    """One schema document: finds subschemas by pointer and resolves local references."""

    def __init__(self, root):
        self.root = root
        self.base_of: dict[str, str] = {}  # pointer -> base URI in effect there
        self.resources: dict[str, str] = {}  # absolute URI (no fragment) -> pointer
        self.anchors: dict[str, str] = {}  # absolute URI#anchor -> pointer
        self._index(root, "", "")

    def _index(self, node, pointer: str, base: str) -> None:
        if not isinstance(node, dict):
            self.base_of[pointer] = base
            return
        if isinstance(node.get("$id"), str):
            base = urldefrag(urljoin(base, node["$id"]))[0]
            self.resources.setdefault(base, pointer)
        if pointer == "":
            self.resources.setdefault(base, "")
        if isinstance(node.get("$anchor"), str):
            self.anchors[f"{base}#{node['$anchor']}"] = pointer
        self.base_of[pointer] = base
        for ptr, sub in child_pointers(node, pointer):
            self._index(sub, ptr, base)

    def at(self, pointer: str):
        node = self.root
        for raw in pointer.split("/")[1:]:
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
        where = f"{pointer}/$ref"
        target = urljoin(self.base_of.get(pointer, ""), ref)
        uri, fragment = urldefrag(target)
        fragment = unquote(fragment)
        if uri not in self.resources:
            raise UnsupportedSchema(f"unsupported keyword '$ref' (remote reference {ref!r}) at {where or '/'}",
                                    "$ref", where)
        base_ptr = self.resources[uri]
        if fragment == "" or fragment.startswith("/"):
            ptr = base_ptr + fragment
            try:
                self.at(ptr)
            except KeyError:
                raise UnsupportedSchema(f"invalid schema: $ref {ref!r} points nowhere at {where}",
                                        "$ref", where) from None
            return ptr
        key = f"{uri}#{fragment}"
        if key not in self.anchors:
            raise UnsupportedSchema(f"invalid schema: $ref {ref!r} names no $anchor at {where}", "$ref", where)
        return self.anchors[key]
