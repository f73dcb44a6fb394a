"""Model tests write converted models to a private cache, never ~/.cache/kvx."""
import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path_factory.getbasetemp() / "kvx-cache"))
