"""Fixtures of the compatibility tests (the counter of device executions, `executions`,
is in tests/conftest.py)."""
import pytest

from ipu_keras import compat


@pytest.fixture
def fresh_warnings():
    """Deprecated names warn once per process: forget earlier warnings around the test."""
    compat.reset_warnings()
    yield
    compat.reset_warnings()
