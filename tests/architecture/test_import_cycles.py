"""No import cycles: kvx's modules, read from their source (ast), form a DAG.

Every import counts: module level, under `if TYPE_CHECKING:` (a type-only import still ties two
modules together) and inside functions (a deferred import hides a cycle, it does not remove it).
kvx.grammar is held to more: its layers never import upward (automata <- schema, tokens <- compile.py).
"""
from __future__ import annotations

import ast
from pathlib import Path

KVX = Path(__file__).resolve().parents[2] / "kvx"
GRAMMAR_LAYERS = {  # a layer may import only from layers of lower rank
    "kvx.grammar.errors": 0,
    "kvx.grammar.options": 0,
    "kvx.grammar.automata": 1,
    "kvx.grammar.schema": 2,
    "kvx.grammar.tokens": 2,
    "kvx.grammar.compile": 3,
    "kvx.grammar.cache": 3,
    "kvx.grammar.check": 4,
    "kvx.grammar": 5,  # the package face
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(KVX.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, deferred: bool, modules: set[str]) -> set[str]:
    """kvx modules imported by `path` (deferred: also imports inside functions). `from pkg import
    sub` imports the submodule `sub`; the package counts only for names it defines itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if deferred else _module_level(tree.body)
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs
            if len(subs) < len(node.names):
                out.add(node.module)
    return {m for m in out if m.split(".")[0] == "kvx"}


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at import (or read by a type checker): the body, and inside module-level
    `if` (TYPE_CHECKING among them) and `try` blocks; not function or class bodies."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):
            out += _module_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            out += _module_level(node.body + node.orelse + node.finalbody
                                 + [s for h in node.handlers for s in h.body])
    return out


def _graph(deferred_under: str) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in KVX.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = _imports(path, name.startswith(deferred_under), set(modules))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if node not in colour:
            found = visit(node)
            if found:
                return found
    return None


def _layer(module: str) -> int | None:
    best = None
    for prefix, rank in GRAMMAR_LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return None if best is None else best[1]


def test_no_import_cycles_in_kvx():
    graph = _graph(deferred_under="kvx")
    assert len(graph) > 50  # the walk found the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_grammar_layers_never_import_upward():
    graph = _graph(deferred_under="kvx")
    upward = []
    for module, deps in graph.items():
        if _layer(module) is None or module == "kvx.grammar":
            continue
        for dep in deps:
            if _layer(dep) is not None and _layer(dep) > _layer(module):
                upward.append(f"{module} -> {dep}")
    assert not upward, upward


def test_type_checking_imports_count(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kvx.a\n"
                      "def f():\n    import kvx.b\n")
    assert _imports(source, deferred=False, modules=set()) == {"kvx.a"}
    assert _imports(source, deferred=True, modules=set()) == {"kvx.a", "kvx.b"}


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_only_the_command_line_imports_the_command_line():
    """kvx/cli parses, reports and exits; the pipeline (kvx/job) and everything below never reach up."""
    graph = _graph(deferred_under="kvx")
    upward = [f"{m} -> {d}" for m, deps in graph.items() if not m.startswith("kvx.cli")
              for d in deps if d.startswith("kvx.cli")]
    assert not upward, upward
