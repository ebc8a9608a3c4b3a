"""Test-wide setup. Runs before any test module, so before anything imports TensorFlow."""
import contextlib
import os

import pytest

# Silence TensorFlow's C++ start-up logging; must be set before TensorFlow is imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def interrupt_on_call(monkeypatch, cls, name, call):
    """Patches `cls.name` to raise KeyboardInterrupt on its `call`-th call (1-based), as
    Ctrl-C would there; `monkeypatch.undo()` restores it."""
    calls = []
    original = getattr(cls, name)

    def patched(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, patched)


def configured_ipus(num_ipus, tiles_per_ipu=0, **options):
    """A generator for fixtures: configures a device of `num_ipus` IPUs (of `tiles_per_ipu`
    tiles, 0 for the target's own count; `options` set other `IPUConfig` attributes, such
    as `allow_recompute`), yields, and resets the configuration."""
    from ipu_keras import config  # imported here: this module must not import TensorFlow

    cfg = config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.ipu_model.tiles_per_ipu = tiles_per_ipu
    for name, value in options.items():
        setattr(cfg, name, value)
    cfg.configure_ipu_system()
    try:
        yield
    finally:
        config.reset_ipu_configuration()


configured = contextlib.contextmanager(configured_ipus)
"""`configured_ipus` as a context manager, for a configuration inside a test or fixture."""


@pytest.fixture
def executions(monkeypatch):
    """A list that gets one entry per device execution (`Session.run`) while the test runs:
    the proof that a computation ran on the simulated IPU, not on the CPU."""
    from ipu_keras._src.runtime import session  # here: this module must not import TensorFlow

    calls = []
    original = session.Session.run

    def counted(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(session.Session, "run", counted)
    return calls


@pytest.fixture
def compiled(monkeypatch):
    """The names of the functions compiled for the simulator while the test runs (one per
    `CompiledFunction`: an eager op, a TF1 cluster per input signature)."""
    from ipu_keras._src.driver import executor  # here: this module must not import TensorFlow

    names = []
    original = executor.CompiledFunction.__init__

    def counting(self, fn, *args, **kwargs):
        names.append(fn.__name__)
        original(self, fn, *args, **kwargs)

    monkeypatch.setattr(executor.CompiledFunction, "__init__", counting)
    return names
