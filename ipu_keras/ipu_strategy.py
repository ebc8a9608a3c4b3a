"""`IPUStrategy`: run functions on the simulated IPU."""
import contextlib

from ipu_keras import _executor


class IPUStrategy:
    """Runs functions compiled for the simulated IPU.

    `scope()` is where models, optimizers, iterators and queues are made (as with the
    IPU port of TensorFlow); `run(fn, args, kwargs)` traces `fn` once per signature,
    compiles it into one executable and runs it on the device. Tensor arguments are
    device inputs; every other argument (iterators, queues, Python numbers) is part of
    the compiled program.
    """

    def __init__(self, ipu_device="/device:IPU:0", cpu_device="/device:CPU:0", **_):
        self.ipu_device = ipu_device
        self.cpu_device = cpu_device

    @property
    def num_replicas_in_sync(self):
        return 1

    @contextlib.contextmanager
    def scope(self):
        yield self

    def run(self, fn, args=(), kwargs=None):
        """Runs `fn(*args, **kwargs)` on the simulated IPU and returns its outputs (numpy)."""
        return _executor.run(fn, tuple(args or ()), dict(kwargs or {}))
