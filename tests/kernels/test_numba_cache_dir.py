"""numba checks a cached function against its own source file only, so the cache folder is keyed by
all the kernel sources together: a change to a callee's file alone (subset_kernel.py, called from
network_kernel.py) must not leave the caller's stale machine code in use."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from kvx.kernels import numba_env


def _tree_copy(tmp_path):
    for rel in numba_env.KERNEL_SOURCES:
        src = numba_env.PACKAGE / rel
        dst = tmp_path / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return tmp_path


def _digest(monkeypatch, package):
    monkeypatch.setattr(numba_env, "PACKAGE", package)
    numba_env.kernel_sources_digest.cache_clear()
    try:
        return numba_env.kernel_sources_digest()
    finally:
        numba_env.kernel_sources_digest.cache_clear()


def test_a_change_to_any_kernel_source_moves_the_cache_folder(tmp_path, monkeypatch):
    tree = _tree_copy(tmp_path)
    base = _digest(monkeypatch, tree)
    assert base == _digest(monkeypatch, numba_env.PACKAGE)  # the copy is the same sources
    for rel in ("grammar/automata/subset_kernel.py", "grammar/tokens/token_walk.py", "kernels/numba_rows.py"):
        f = tree / rel
        text = f.read_text()
        f.write_text(text + "\n# changed\n")
        assert _digest(monkeypatch, tree) != base, rel
        f.write_text(text)
        assert _digest(monkeypatch, tree) == base
    (tree / "grammar/automata/new_kernel.py").write_text("x = 1\n")  # a new file in a kernel folder
    assert _digest(monkeypatch, tree) != base


def test_the_cache_folder_is_named_by_the_digest(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"KVX_CACHE": str(tmp_path)}
    code = ("import os; from kvx.kernels import numba_env as e; e.import_numba(); "
            "print(os.environ['NUMBA_CACHE_DIR']); print(e.kernel_sources_digest())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    folder, digest = out.stdout.split()
    assert folder == str(tmp_path / "numba" / digest)
