"""Where a reference to a `$dynamicAnchor` lands, over every route the record check can take to it.

jsonschema (its `referencing` resolver) keeps a dynamic scope: the base URIs it followed references
from, each pushed when a reference is followed (the empty base of a root without `$id` never is;
nor is the current base when the reference stays in it and something was pushed already). A
fragment naming a `$dynamicAnchor` (by `$dynamicRef`, or by `$ref`: both are the same lookup there)
lands on the anchor of that name in the outermost resource of the scope that carries one, else on
the anchor it names. Only the outermost carrier of each name matters, so the states are (base,
outermost carrier per name, whether anything was pushed), walked from the root along every
reference of a resource and into the resources nested in it: a superset of the routes, so a
reference whose landings over all of them are one lands there on every route.
"""
from __future__ import annotations

from urllib.parse import unquote, urldefrag

from kvx.grammar.automata import deadline
from kvx.grammar.schema.refs import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUED, Document, join_uri

MAX_SCOPES = 4096  # states walked; past this the references stay dynamic (refused)
ROUTE_DEPENDENT = "route-dependent"  # a landing that depends on the route, or on a resolver quirk


class DynamicScopes:
    def __init__(self, doc: Document):
        self.doc = doc
        self.carriers: dict[str, dict[str, str]] = {}  # anchor name -> {resource URI: the anchor's pointer}
        self.sites: dict[str, list[tuple[str, str]]] = {}  # resource URI -> [(pointer, reference)] in it
        self.nested: dict[str, set[str]] = {}  # resource URI -> the resources nested in it
        for ptr, base in doc.base_of.items():
            node = doc.at(ptr)
            if not isinstance(node, dict):
                continue
            # an anchor is dynamic by the draft it is written in; a $dynamicRef is read where a
            # 2020-12 validator reaches it
            if doc.written_in(ptr) == "2020-12" and isinstance(node.get("$dynamicAnchor"), str):
                self.carriers.setdefault(node["$dynamicAnchor"], {}).setdefault(base, ptr)
            for kw in ("$ref", "$dynamicRef") if "2020-12" in doc.readings(ptr) else ("$ref",):
                if isinstance(node.get(kw), str):
                    self.sites.setdefault(base, []).append((ptr, node[kw]))
        self.names = sorted(self.carriers)
        # where evaluation starts in a resource: its root, or where a reference lands
        entries = set(doc.resources.values()) | {ptr for named in self.carriers.values() for ptr in named.values()}
        entries |= {doc.target_or_none(ref, ptr) for refs in self.sites.values() for ptr, ref in refs} - {None}
        for uri, ptr in doc.resources.items():
            around = self._resource_around(ptr)
            if around is not None and any(_applied_from(ptr[len(e):]) for e in _schemas_above(ptr, entries)):
                self.nested.setdefault(around, set()).add(uri)

    def _resource_around(self, ptr: str) -> str | None:
        """The resource whose schema encloses the resource at `ptr` (None for the root)."""
        while ptr:
            ptr = ptr.rpartition("/")[0]
            if ptr in self.doc.base_of and self.doc.resources.get(self.doc.base_of[ptr]) is not None:
                return self.doc.base_of[ptr]
        return None

    def landings(self) -> dict[tuple[str, str], set[str]] | None:
        """(pointer, reference) of each reference to a dynamic anchor reached from the root -> the
        pointers it lands on (ROUTE_DEPENDENT among them where a landing cannot be said); None where
        the routes are too many to walk."""
        start = (self.doc.base_of.get("", ""), (None,) * len(self.names), False)
        seen, todo = {start}, [start]
        out: dict[str, set[str]] = {}
        while todo:
            if len(seen) > MAX_SCOPES:
                return None
            deadline.check()
            base, outermost, pushed = todo.pop()
            nexts = [(uri, outermost, pushed) for uri in self.nested.get(base, ())]
            for ptr, ref in self.sites.get(base, ()):
                target_uri, fragment = urldefrag(join_uri(base, ref))
                if base and (not pushed or target_uri != base):  # the resolver pushes the base it leaves
                    scope = (tuple(o if o is not None or base not in self.carriers[n] else base
                                   for o, n in zip(outermost, self.names)), True)
                else:
                    scope = (outermost, pushed)
                landing = self._landing(ref, ptr, target_uri, unquote(fragment), scope[0])
                if landing is None:
                    continue  # remote or dangling: refused, or allowing nothing, where it is compiled
                if landing[1] is not None:
                    out.setdefault((ptr, ref), set()).add(landing[0])
                if landing[0] != ROUTE_DEPENDENT:
                    nexts.append((self.doc.base_of.get(landing[0], target_uri), *scope))
            for state in nexts:
                if state not in seen:
                    seen.add(state)
                    todo.append(state)
        return out

    def _landing(self, ref: str, ptr: str, target_uri: str, fragment: str, outermost: tuple):
        """(the pointer a reference lands on, the dynamic anchor's name or None), None if it lands
        nowhere in the document."""
        target = self.doc.target_or_none(ref, ptr)
        if target is None:
            return None
        name = fragment if fragment and not fragment.startswith("/") else None
        if name is None or self.carriers.get(name, {}).get(target_uri) != target:
            return target, None  # a pointer, or a plain $anchor: where the reference names
        outer = outermost[self.names.index(name)]
        if outer is None or outer == target_uri:
            return target, name
        landing = self.carriers[name][outer]
        node = self.doc.at(landing)
        if not (isinstance(node, dict) and isinstance(node.get("$id"), str)) and _refers(node):
            # the resolver goes on with the base of the reference's own target there: the references
            # inside would resolve elsewhere than they read
            return ROUTE_DEPENDENT, name
        return landing, name


def _schemas_above(ptr: str, among: set[str]):
    """The pointers of `among` that lie above `ptr` (the root's "" included)."""
    while ptr:
        ptr = ptr.rpartition("/")[0]
        if ptr in among:
            yield ptr


def _applied_from(path: str) -> bool:
    """Whether the validator descends along `path` (from a schema to a subschema of it): not into
    `$defs`, whose schemas only references reach."""
    segments = path.split("/")[1:]
    i = 0
    while i < len(segments):
        keyword = segments[i]
        if keyword in ("$defs", "definitions") or keyword not in SCHEMA_VALUED | SCHEMA_LISTS | SCHEMA_MAPS:
            return False
        i += 1 if keyword in SCHEMA_VALUED and not (keyword == "items" and i + 1 < len(segments)
                                                      and segments[i + 1].isdigit()) else 2
    return True


def _refers(node) -> bool:
    """Whether a reference or an identifier lies anywhere in `node`."""
    if isinstance(node, dict):
        return any(k in ("$ref", "$dynamicRef", "$id", "id") or _refers(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_refers(v) for v in node)
    return False
