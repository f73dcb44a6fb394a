import pytest
from kvx_cli_helpers import FAKE, HERE, REPO


@pytest.fixture
def fake_engine(monkeypatch):
    """Route `kvx extract` to the fake engine (in-process and in subprocesses started by the test)."""
    import os

    monkeypatch.setenv("KVX_RUNTIME_FACTORY", FAKE)
    monkeypatch.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{HERE}")
