"""`ipu_tensorflow_addons.v1.layers`: the TensorFlow 1 recurrent layers, time-major.

TensorFlow 1 code makes them in a graph and calls `layer(inputs, initial_state=None,
training=True)` with inputs [time, batch, input], getting `(outputs, state)`: outputs
[time, batch, units]; for `PopnnLSTM` the state is an `LSTMStateTuple(c, h)`, for
`PopnnGRU` a [batch, units] tensor. Each wraps the Keras layer of
`ipu_keras_addons.keras.layers` (the same fused IPU op), made time-major.

Weights: the Keras layout (`kernel` [input, gates * units], `recurrent_kernel`
[units, gates * units], `biases`) in Keras' gate order, where the original kept one
kernel [input + units, gates * units] and biases [gates, units]: a checkpoint of the
original does not load as it is, and the default Glorot initialiser draws the input and
recurrent kernels separately. The dynamic (sequence-length) layers and the AUGRU are
refused with a message.
"""
import collections

import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError, AddonsUnsupportedArgumentError
from ipu_keras_addons.keras import layers as keras_layers

LSTMStateTuple = collections.namedtuple("LSTMStateTuple", ("c", "h"))
"""The LSTM state, as `tf.compat.v1.nn.rnn_cell.LSTMStateTuple` (gone with Keras 3)."""


class _PopnnRNN:
    """Checks the TensorFlow 1 arguments and makes the Keras layer (built on first call)."""

    KERAS = None

    def __init__(self, num_units, dtype=tf.float32, partials_dtype=tf.float32, seed=None,
                 weights_initializer=None, bias_initializer=None, activation="tanh",
                 recurrent_activation="sigmoid", name=None,
                 available_memory_proportion_fwd=None, available_memory_proportion_bwd=None,
                 options=None, options_bwd=None, **keras_arguments):
        dtype = tf.as_dtype(dtype)
        if dtype not in (tf.float16, tf.float32):
            raise AddonsArgumentError(f"Only support float16, float32. Received: dtype={dtype!r}")
        weights = weights_initializer or tf.compat.v1.glorot_uniform_initializer(seed)
        options = dict(options or {})
        if available_memory_proportion_fwd is not None:
            options["availableMemoryProportion"] = str(available_memory_proportion_fwd)
        backward = dict(options_bwd or options)
        if available_memory_proportion_bwd is not None:
            backward["availableMemoryProportion"] = str(available_memory_proportion_bwd)
        self.num_units = num_units
        self.layer = self.KERAS(
            num_units, activation=activation, recurrent_activation=recurrent_activation,
            kernel_initializer=weights, recurrent_initializer=weights,
            bias_initializer=bias_initializer or "zeros", return_sequences=True,
            return_state=True, time_major=True, partials_dtype=partials_dtype,
            options=options, options_bwd=backward, dtype=dtype.name, name=name,
            **keras_arguments)

    # The weights as TensorFlow variables (what TensorFlow 1 optimizers take).
    @property
    def kernel(self):
        return self.layer.kernel.value

    @property
    def recurrent_kernel(self):
        return self.layer.recurrent_kernel.value

    @property
    def biases(self):
        return self.layer.biases.value

    @property
    def trainable_variables(self):
        return [v.value for v in self.layer.trainable_variables]

    def _inputs(self, inputs):
        inputs = tf.convert_to_tensor(inputs, self.layer.dtype)
        if inputs.shape.rank != 3:
            raise AddonsArgumentError(
                f"Expecting input_shape with 3 dims [time, batch, input]. Received: "
                f"inputs.shape={inputs.shape}")
        return inputs


class PopnnLSTM(_PopnnRNN):
    """A time-major LSTM fused on the IPU: `(outputs, LSTMStateTuple(c, h))`.

    Args are the original's; biases start at zero (no forget-gate bias).
    """

    KERAS = keras_layers.PopnnLSTM

    def __init__(self, num_units, **kwargs):
        super().__init__(num_units, unit_forget_bias=False, **kwargs)

    def __call__(self, inputs, initial_state=None, training=True):
        inputs = self._inputs(inputs)
        states = None
        if initial_state is not None:
            if len(initial_state) != 2:
                raise AddonsArgumentError(
                    "Invalid initial_state: expecting an LSTMStateTuple (c, h). Received: "
                    f"initial_state={initial_state!r}")
            c, h = initial_state
            states = [h, c]
        outputs, h, c = self.layer(inputs, training=training, initial_state=states)
        return outputs, LSTMStateTuple(c, h)


class PopnnGRU(_PopnnRNN):
    """A time-major GRU fused on the IPU: `(outputs, state)` (outputs alone when
    `return_state=False`). `reset_after` is False by default, as in the original."""

    KERAS = keras_layers.PopnnGRU

    def __init__(self, num_units, return_state=True, reset_after=False, **kwargs):
        super().__init__(num_units, reset_after=reset_after, **kwargs)
        self.return_state = return_state

    def __call__(self, inputs, initial_state=None, training=True):
        outputs, state = self.layer(self._inputs(inputs), training=training,
                                    initial_state=initial_state)
        return (outputs, state) if self.return_state else outputs


def _refused(name, instead):
    def refuse(*args, **kwargs):
        del args, kwargs
        raise AddonsUnsupportedArgumentError(
            f"{name} is not simulated by ipu_keras_addons.v1.layers. Received: a {name} "
            f"layer. Use {instead} instead.")

    refuse.__name__ = name
    return refuse


PopnnDynamicLSTM = _refused("PopnnDynamicLSTM", "PopnnLSTM (mask the padded steps)")
PopnnDynamicGRU = _refused("PopnnDynamicGRU", "PopnnGRU (mask the padded steps)")
PopnnAUGRU = _refused("PopnnAUGRU", "PopnnGRU")

__all__ = ["LSTMStateTuple", "PopnnAUGRU", "PopnnDynamicGRU", "PopnnDynamicLSTM", "PopnnGRU",
           "PopnnLSTM"]
