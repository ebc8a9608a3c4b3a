"""Fixtures of the tests of Graphcore's op modules: a counter of device executions."""
import pytest

from ipu_keras._src.runtime import session as session_module


@pytest.fixture
def executions(monkeypatch):
    """A list that gets one entry per device execution (Session.run) while the test runs:
    the proof that a computation ran on the simulated IPU, not on the CPU."""
    calls = []
    original = session_module.Session.run

    def counted(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(session_module.Session, "run", counted)
    return calls
