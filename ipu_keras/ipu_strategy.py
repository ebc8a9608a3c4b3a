"""`IPUStrategy`: run functions on the simulated IPU, and make Keras models IPU models.

The strategy is what user code touches of a `tf.distribute.Strategy` (`scope`, `run`,
`experimental_run_v2`, `reduce`, `num_replicas_in_sync`, `extended`,
`experimental_distribute_dataset`); it is not a `tf.distribute.Strategy` subclass.
`scope()` makes Keras models created inside it IPU models (`keras/extension.py`);
`run` compiles and runs a function (`_executor`) and returns `tf.Tensor`s.
"""
import contextlib

import tensorflow as tf

from ipu_keras._src.driver import executor as _executor
from ipu_keras._src import compat


class _Extended:
    """The few `strategy.extended` attributes scripts read."""

    def __init__(self, strategy):
        self._strategy = strategy

    @property
    def parameter_devices(self):
        return (self._strategy.ipu_device,)

    @property
    def worker_devices(self):
        return (self._strategy.ipu_device,)

    def non_slot_devices(self, var_list):
        del var_list
        return self._strategy.ipu_device

    def experimental_should_init(self):
        return True

    should_checkpoint = True
    should_save_summary = True


class IPUStrategy:
    """Runs functions compiled for the simulated IPU.

    `scope()` is where models, optimizers, iterators and queues are made (as with the
    IPU port of TensorFlow): a Keras model created there trains and runs on the simulated
    IPU and has the IPU methods (`set_asynchronous_callbacks`, ...). `run(fn, args,
    kwargs)` traces `fn` once per signature, compiles it into one executable and runs it
    on the device. Tensor arguments are device inputs; every other argument (iterators,
    queues, Python numbers) is part of the compiled program.

    Args:
        ipu_device: The TensorFlow device string of the IPU.
        cpu_device: The TensorFlow device string of the host.
        enable_dataset_iterators: Accepted as in IPU TensorFlow; iterators always work here.
        enable_keras_extensions: With True (default), Keras models created in `scope()`
            become IPU models.
    """

    def __init__(self, ipu_device="/device:IPU:0", cpu_device="/device:CPU:0",
                 enable_dataset_iterators=True, enable_keras_extensions=True):
        self.ipu_device = ipu_device
        self.cpu_device = cpu_device
        self._enable_dataset_iterators = enable_dataset_iterators
        self._enable_keras_extensions = enable_keras_extensions
        self._extended = _Extended(self)

    @property
    def num_replicas_in_sync(self):
        """1: each IPUStrategy program is one replica (replication is an IPUConfig option)."""
        return 1

    @property
    def extended(self):
        return self._extended

    @contextlib.contextmanager
    def scope(self):
        """Makes this the current strategy: Keras models created inside become IPU models."""
        from ipu_keras._src.keras import extension

        extension.enter_scope(self)
        try:
            yield self
        finally:
            extension.exit_scope(self)

    def _patch_keras_extension(self, instance):
        if self._enable_keras_extensions:
            from ipu_keras._src.keras import extension

            extension.patch(instance, self)

    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs `fn(*args, **kwargs)` on the simulated IPU.

        Args:
            fn: A Python function or `tf.function`; compiled once per signature.
            args: Positional arguments of `fn`.
            kwargs: Keyword arguments of `fn`.
            options: Accepted as by `tf.distribute.Strategy.run`; unused.

        Returns:
            The outputs of `fn` as `tf.Tensor`s, in the structure `fn` returned them.
        """
        del options
        result = _executor.run(fn, tuple(args or ()), dict(kwargs or {}))
        return tf.nest.map_structure(_executor.host_tensor, result)

    @compat.deprecated_method("ipu.ipu_strategy.IPUStrategy.experimental_run_v2",
                              "IPUStrategy.run", since="2.1", until="2.2")
    def experimental_run_v2(self, fn, args=(), kwargs=None, options=None):
        """Deprecated alias of `run` (the name of TensorFlow 2.1)."""
        return self.run(fn, args, kwargs, options)

    def reduce(self, reduce_op, value, axis=None):
        """Reduces `value` across replicas; with one replica, over `axis` only.

        Args:
            reduce_op: `tf.distribute.ReduceOp.SUM` or `MEAN` (or "SUM"/"MEAN").
            value: A tensor or nested structure of tensors (e.g. the result of `run`).
            axis: With None, the value of the single replica is returned; else the
                dimension to reduce (as `tf.distribute.Strategy.reduce`).

        Returns:
            A tensor or nested structure of tensors.
        """
        names = {op.value: op for op in tf.distribute.ReduceOp}
        op = names.get(reduce_op.upper()) if isinstance(reduce_op, str) else reduce_op
        if not isinstance(op, tf.distribute.ReduceOp):
            raise ValueError(
                "reduce expected a tf.distribute.ReduceOp (SUM or MEAN). Received: "
                f"reduce_op={reduce_op!r}"
            )
        if axis is None:
            return tf.nest.map_structure(_executor.host_tensor, value)
        reducer = tf.reduce_sum if op is tf.distribute.ReduceOp.SUM else tf.reduce_mean
        return tf.nest.map_structure(lambda v: reducer(v, axis=axis), value)

    def experimental_distribute_dataset(self, dataset, options=None):
        """Returns `dataset` unchanged: one replica reads the whole dataset."""
        del options
        return dataset

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        """Calls `dataset_fn` with a one-replica `tf.distribute.InputContext`."""
        del options
        return dataset_fn(tf.distribute.InputContext())


@compat.deprecated_class("ipu.ipu_strategy.IPUStrategyV1", "ipu.ipu_strategy.IPUStrategy",
                        since="2.1", until=None)
class IPUStrategyV1(IPUStrategy):
    """The class behind `IPUStrategy` in IPU TensorFlow 2 (SDK 2.x-3.x); use `IPUStrategy`."""
