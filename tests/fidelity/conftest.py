"""What every fidelity case shares: each runs on an IPU configuration of its own."""
import pytest


@pytest.fixture(autouse=True)
def _reset_configuration():
    yield
    from ipu_keras import config

    config.reset_ipu_configuration()
