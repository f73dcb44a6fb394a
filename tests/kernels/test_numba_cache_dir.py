"""numba checks a cached function against its own source file only, so the cache folder is keyed by
all the kernel sources together: a change to a callee's file alone (subset_kernel.py, called from
network_kernel.py) must not leave the caller's stale machine code in use."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

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


def test_other_versions_folders_are_pruned_past_the_few_used_last(tmp_path):
    """Every kernel-source version leaves a folder of a few MB: the cache keeps the current one, the
    KEEP_OTHER_FOLDERS used last, and any used within IN_USE_FOR_S (another install's running job)."""
    root = tmp_path / "numba"
    now = time.time()
    ages_h = {"r1": 0.1, "r2": 0.2, "r3": 0.3, "busy": 0.9, "v1": 2, "v2": 40}  # hours since last use
    for name, hours in ages_h.items():
        (root / name / "sub").mkdir(parents=True)
        (root / name / "sub" / "k.nbi").write_bytes(b"x")
        os.utime(root / name, (now - hours * 3600, now - hours * 3600))
    (root / "notes.txt").write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"KVX_CACHE": str(tmp_path)}
    code = "from kvx.kernels import numba_env as e; e.import_numba(); print(e.kernel_sources_digest())"
    digest = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            check=True).stdout.strip()
    kept = sorted(p.name for p in root.iterdir())
    # the three used last stay, and busy, fourth but used within the hour; v1 and v2 are gone
    assert kept == sorted([digest, "r1", "r2", "r3", "busy", "notes.txt"])
    assert (root / "r3" / "sub" / "k.nbi").exists()
    assert time.time() - (root / digest).stat().st_mtime < 600  # the current one is marked used


def test_a_folder_the_user_names_is_left_as_it_is(tmp_path):
    (tmp_path / "numba" / "old").mkdir(parents=True)
    os.utime(tmp_path / "numba" / "old", (1, 1))
    for i in range(5):
        (tmp_path / "numba" / f"other{i}").mkdir()
    env = os.environ | {"KVX_CACHE": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "mine")}
    subprocess.run([sys.executable, "-c", "from kvx.kernels import numba_env as e; e.import_numba()"], env=env,
                   check=True)
    assert (tmp_path / "numba" / "old").exists()
