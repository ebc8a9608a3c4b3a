"""Gradient accumulation: reduction methods and the accumulation window on the device.

`GradientAccumulationReductionMethod` is Graphcore's enum (SUM, MEAN, RUNNING_MEAN).
`Accumulator` owns what one window needs on the device: an accumulation buffer per
trained variable, a micro-batch counter and the window's total weight, all
`tf.Variable`s, so the tracer makes them device variables of the executable. Each micro-batch adds its gradients to the
buffers; a conditional in the program (`tf.cond`, an IR `if`) runs the wrapped
optimizer's update once per window and empties the buffers. The update therefore runs
once per weight update, and so do the wrapped optimizer's `iterations` and learning-rate
schedule. `repeat_loop(count)` is the scope `loops.repeat` opens while its body is
traced; the optimizers (`ipu_keras.optimizers`) read it to check the original's rules.
The Keras trainer (`keras/accumulation.py`) uses the same `Accumulator`.
"""
import contextlib
import enum

import tensorflow as tf


class GradientAccumulationReductionMethod(enum.Enum):
    """How the gradients of the micro-batches of one window are combined.

    * SUM: the sum of the gradients.
    * MEAN: the sum scaled by `1/num_mini_batches`.
    * RUNNING_MEAN: a running mean, updated every micro-batch (the same value as MEAN in
      exact arithmetic, with smaller intermediate values).
    """

    SUM = 0
    MEAN = 1
    RUNNING_MEAN = 2

    @classmethod
    def parse(cls, reduction_method):
        """The member named by `reduction_method` (a member or a case-insensitive name)."""
        if isinstance(reduction_method, cls):
            return reduction_method
        if isinstance(reduction_method, str) and reduction_method.upper() in cls.__members__:
            return cls[reduction_method.upper()]
        raise ValueError(
            f"Cannot parse {reduction_method} as one of GradientAccumulationReductionMethod. "
            f"Valid values are: {', '.join(cls.__members__)}. "
            f"Received: reduction_method={reduction_method!r}."
        )


class _RepeatLoop:
    """The `loops.repeat` whose body is being traced: its count and its weight updates."""

    def __init__(self, count):
        self.count = count
        self.updates = []


_loops = []


@contextlib.contextmanager
def repeat_loop(count):
    """Marks the code inside as the body of a device loop of `count` iterations."""
    static = tf.get_static_value(count) if tf.is_tensor(count) else count
    _loops.append(_RepeatLoop(None if static is None else int(static)))
    try:
        yield
    finally:
        _loops.pop()


def current_repeat_loop():
    """The innermost `loops.repeat` being traced, or None."""
    return _loops[-1] if _loops else None


class Accumulator:
    """The accumulation buffers, micro-batch counter and conditional update of one window.

    Args:
        num_mini_batches: Micro-batches per window (per weight update).
        reduction_method: A `GradientAccumulationReductionMethod` or its name.
        dtype: The buffers' dtype: None (each variable's own), a DType, or a callable
            taking the variable and returning a DType.
        name: Prefix of the buffer variables' names.
    """

    def __init__(self, num_mini_batches, reduction_method="sum", dtype=None,
                 name="GradientAccumulation"):
        self.num_mini_batches = num_mini_batches
        self.reduction_method = GradientAccumulationReductionMethod.parse(reduction_method)
        self.dtype = dtype
        self.name = name
        self._buffers = {}
        self._count = None
        self._total = None

    def _buffer(self, variable):
        key = id(variable)
        if key not in self._buffers:
            dtype = self.dtype(variable) if callable(self.dtype) else self.dtype
            dtype = tf.as_dtype(dtype or variable.dtype)
            with tf.init_scope():
                self._buffers[key] = (variable, tf.Variable(
                    tf.zeros(variable.shape, dtype), trainable=False,
                    name=f"{self.name}/{_short_name(variable)}/accumulator"))
        return self._buffers[key][1]

    @property
    def count(self):
        """The int32 variable counting the micro-batches of the current window."""
        return self._scalar("_count", 0, tf.int32, "count")

    @property
    def total(self):
        """The float32 variable summing the weights of the current window's micro-batches."""
        return self._scalar("_total", 0.0, tf.float32, "total_weight")

    def _scalar(self, attr, zero, dtype, suffix):
        if getattr(self, attr) is None:
            with tf.init_scope():
                setattr(self, attr, tf.Variable(zero, dtype=dtype, trainable=False,
                                                name=f"{self.name}/{suffix}"))
        return getattr(self, attr)

    def accumulate(self, grads_and_vars, apply_fn, window_end=None, weight=None):
        """Adds one micro-batch's gradients; applies the window when it ends.

        Args:
            grads_and_vars: (gradient, variable) pairs; None gradients are left out.
            apply_fn: Called with the window's reduced (gradient, variable) pairs inside
                the conditional update.
            window_end: A boolean scalar tensor ending the window after this micro-batch,
                or None to end it when `num_mini_batches` micro-batches have been added.
            weight: The micro-batch's weight in MEAN and RUNNING_MEAN (a float scalar; the
                Keras trainer passes its number of samples, so that a partial micro-batch
                counts for what it holds), or None for 1.
        """
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        buffers = [self._buffer(v) for _, v in pairs]
        weight = tf.constant(1.0) if weight is None else tf.cast(weight, tf.float32)
        before = self.total.read_value()
        after = self.total.assign_add(weight)
        for (grad, _), buffer in zip(pairs, buffers):
            grad = tf.cast(tf.convert_to_tensor(grad), buffer.dtype)
            if self.reduction_method is GradientAccumulationReductionMethod.RUNNING_MEAN:
                keep, add = (tf.cast(x, buffer.dtype) for x in (before / after, weight / after))
                buffer.assign(buffer * keep + grad * add)
            elif self.reduction_method is GradientAccumulationReductionMethod.MEAN:
                buffer.assign_add(grad * tf.cast(weight, buffer.dtype))
            else:
                buffer.assign_add(grad)
        count = self.count.assign_add(1)
        if window_end is None:
            window_end = count >= self.num_mini_batches
        variables = [v for _, v in pairs]

        def update():
            apply_fn(list(zip(self._reduced(buffers, after), variables)))
            for buffer in buffers:
                buffer.assign(tf.zeros_like(buffer))
            self.count.assign(0)
            self.total.assign(0.0)
            return tf.constant(True)

        return tf.cond(window_end, update, lambda: tf.constant(False))

    def _reduced(self, buffers, total):
        if self.reduction_method is GradientAccumulationReductionMethod.MEAN:
            return [b.read_value() / tf.cast(total, b.dtype) for b in buffers]
        return [b.read_value() for b in buffers]


def _short_name(variable):
    name = getattr(variable, "path", None) or getattr(variable, "name", "variable")
    return name.split(":")[0].replace("/", "_")
