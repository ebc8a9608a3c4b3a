"""Fixtures of the compatibility tests: a counter of device executions."""
import pytest

from ipu_keras import compat
from ipu_keras._src.runtime import session as session_module


@pytest.fixture
def executions(monkeypatch):
    """A list that gets one entry per device execution (Session.run) while the test runs."""
    calls = []
    original = session_module.Session.run

    def counted(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(session_module.Session, "run", counted)
    return calls


@pytest.fixture
def fresh_warnings():
    """Deprecated names warn once per process: forget earlier warnings around the test."""
    compat.reset_warnings()
    yield
    compat.reset_warnings()
