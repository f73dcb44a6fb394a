"""The drafts' meta-schemas for a schema that refers to one (a field holding a JSON Schema:
`"$ref": "http://json-schema.org/draft-07/schema#"`).

jsonschema ships them (`jsonschema_specifications`) and the record check resolves them without the
network. The compiler embeds the same documents under `$defs` (`definitions` before 2019-09), each
with its own `$id` and `$schema` (JSON Schema's bundling, 2020-12 section 9.3), so the grammar and
the check read one text. Only the URIs jsonschema resolves offline are embedded (`https://` for
draft 7 is not among them: the compiler refuses it as remote, as before); draft 3 stays refused.
"""
from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urldefrag

from kvx.grammar.schema.refs import LEGACY, META_PREFIX, Document, join_uri

MAX_EMBEDDED = 16  # the drafts' documents together (2020-12: the schema and its 8 vocabularies)
# what may reach a meta-schema, in json.dumps' spelling: a $ref to one, or a path reference (not a
# fragment, no scheme) under a $id of theirs (a meta-schema compiled itself: 2020-12's "meta/core")
_ABSOLUTE = re.compile(r'"\$ref": "https?://json-schema\.org/')
_THEIR_ID = re.compile(r'"\$?id": "https?://json-schema\.org/')
_PATH_REF = re.compile(r'"\$ref": "(?![#"]|[a-zA-Z][a-zA-Z0-9+.-]*:)')


def _registry():
    from jsonschema_specifications import REGISTRY

    return REGISTRY


def with_meta_schemas(schema: Any, dialect: str) -> Any:
    """`schema` (read in `dialect`) with every draft meta-schema its references reach embedded (a
    copy); the schema itself when it reaches none."""
    if not isinstance(schema, dict) or not _may_reach(json.dumps(schema, default=str)):
        return schema  # the common case, found without indexing the document
    registry = _registry()
    embedded: dict[str, Any] = {}
    out = schema
    while True:
        index = Document(out, dialect)
        wanted = {uri for uri in _targets(index) if uri not in index.resources and uri in registry
                  and "draft-03" not in uri and uri not in embedded}
        if not wanted:
            return out
        if len(embedded) + len(wanted) > MAX_EMBEDDED:
            return out  # not reached by the drafts' own documents; the compiler refuses what is left as remote
        embedded.update((uri, registry.contents(uri)) for uri in sorted(wanted))
        defs_kw = "definitions" if dialect in LEGACY else "$defs"
        out = {**schema, defs_kw: {**(schema.get(defs_kw) or {}),
                                   **{META_PREFIX + uri: doc for uri, doc in embedded.items()}}}


def _may_reach(text: str) -> bool:
    return bool(_ABSOLUTE.search(text) or (_THEIR_ID.search(text) and _PATH_REF.search(text)))


def _targets(index: Document):
    """The URIs (no fragment) the document's $refs name."""
    for _, base, ref in index.references():
        yield urldefrag(join_uri(base, ref))[0]
