"""PopnnLSTM and PopnnGRU: the IPU's fused recurrent layers, in Keras' weight layout.

Weights are Keras' (`kernel` [in, g*u], `recurrent_kernel` [u, g*u], `biases`) with Keras'
gate order (LSTM i, f, c, o; GRU z, r, h), so weights copy across from
`keras.layers.LSTM` / `keras.layers.GRU` and give the same numbers. The whole recurrence
is one IPU op, forward and backward (`ipu_keras/_src/ops/rnn.py`): a call marked
"PopnnLSTMLayer" / "PopnnGRULayer" whose body, which TensorFlow runs on the CPU, is the
input projection of all timesteps as one matmul and a loop over time. Dropout applies
to the inputs only, with one mask shared by every timestep.
"""
import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError
from ipu_keras.ops import rand_ops
from ipu_keras._src.tracer.marked import marked_with_gradient
from ipu_keras_addons.keras.layers.dropout import seed_tensor
from ipu_keras_addons.keras.layers.ipu_layer import IPULayer, serializable

ACTIVATIONS = ("tanh", "relu", "softmax", "sigmoid", "hard_sigmoid")
RECURRENT_ACTIVATIONS = ("tanh", "softmax", "sigmoid", "hard_sigmoid")


def _refuse(kind, name, value):
    raise AddonsArgumentError(
        f"IPU custom {kind} layer does not support {name}={value!r}: expected the default. "
        f"Received: {name}={value!r}")


NOT_SUPPORTED = ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                 "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                 "bias_constraint")


def check_unsupported(kind, arguments):
    """Raises for the Keras RNN options the IPU's fused layers do not have; `arguments`
    are the layer's constructor arguments by name."""
    if not arguments["use_bias"]:
        _refuse(kind, "use_bias", arguments["use_bias"])
    for name in NOT_SUPPORTED:
        if arguments[name] is not None:
            _refuse(kind, name, arguments[name])
    for name in ("recurrent_dropout", "go_backwards", "unroll"):
        if arguments[name]:
            _refuse(kind, name, arguments[name])
    if arguments["implementation"] not in (1, 2):
        _refuse(kind, "implementation", arguments["implementation"])


class _PopnnRNN(IPULayer):
    """The parts PopnnLSTM and PopnnGRU share: checks, weights, dropout, the time loop."""

    KIND = ""
    GATES = 0
    STATES = 1

    def __init__(self, units, activation, recurrent_activation, kernel_initializer,
                 recurrent_initializer, bias_initializer, dropout, dropout_seed,
                 return_sequences, return_state, stateful, partials_dtype, seed, time_major,
                 options, options_bwd, **kwargs):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise AddonsArgumentError(
                f"IPU custom RNN layer expected activation in {ACTIVATIONS}. "
                f"Received: activation={activation!r}")
        if recurrent_activation not in RECURRENT_ACTIVATIONS:
            raise AddonsArgumentError(
                f"IPU custom RNN layer expected recurrent_activation in "
                f"{RECURRENT_ACTIVATIONS}. Received: recurrent_activation="
                f"{recurrent_activation!r}")
        if self.dtype not in ("float16", "float32"):
            raise AddonsArgumentError("IPU custom RNN layer expected dtype float16 or "
                                      f"float32. Received: dtype={self.dtype!r}")
        self.units = units
        self.activation = activation
        self.recurrent_activation = recurrent_activation
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout = float(dropout)
        self.dropout_seed = dropout_seed
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.stateful = stateful
        self.partials_dtype = tf.as_dtype(partials_dtype).name
        self.seed = seed
        self.time_major = time_major
        self.options = options or {}
        self.options_bwd = options_bwd or self.options
        self._seed_generator = keras.random.SeedGenerator(seed) if dropout else None

    def _bias_shape(self):
        return (self.GATES * self.units,)

    def _bias_init(self, shape, dtype=None):
        return self.bias_initializer(shape, dtype=dtype)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise AddonsArgumentError(f"IPU custom {self.KIND} layer expected inputs of rank "
                                      f"3. Received: input_shape={input_shape}")
        if input_shape[-1] is None:
            raise AddonsArgumentError(f"IPU custom {self.KIND} layer expected the last "
                                      f"input dimension to be known. Received: "
                                      f"input_shape={input_shape}")
        width = self.GATES * self.units
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], width),
                                      initializer=self.kernel_initializer)
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel",
                                                shape=(self.units, width),
                                                initializer=self.recurrent_initializer)
        self.biases = self.add_weight(name="biases", shape=self._bias_shape(),
                                      initializer=self._bias_init)
        self.states = []
        if self.stateful:
            batch = input_shape[1 if self.time_major else 0]
            if batch is None:
                raise AddonsArgumentError(f"A stateful {self.KIND} layer expected a known "
                                          f"batch size. Received: input_shape={input_shape}")
            self.states = [self.add_weight(name=f"state_{i}", shape=(batch, self.units),
                                           initializer="zeros", trainable=False)
                           for i in range(self.STATES)]

    def _initial_states(self, initial_state, batch, dtype):
        if initial_state is not None:
            states = tf.nest.flatten(initial_state)
        elif self.stateful:
            states = list(self.states)
        else:
            shape = [batch, self.units] if isinstance(batch, int) else tf.stack([batch,
                                                                                  self.units])
            states = [tf.zeros(shape, dtype)] * self.STATES
        return [tf.cast(s, dtype) for s in states]

    def call(self, inputs, training=None, initial_state=None, mask=None):
        self._check_unsupported(mask, "mask", "call")
        inputs = tf.convert_to_tensor(inputs, self.compute_dtype)
        if len(inputs.shape) != 3:
            raise AddonsArgumentError(f"IPU custom {self.KIND} layer expected a 3D inputs "
                                      f"tensor. Received: inputs.shape={inputs.shape}")
        xs = inputs if self.time_major else tf.transpose(inputs, [1, 0, 2])
        # A `training` that is not a Python bool is taken as training, as in the original.
        training = training if isinstance(training, bool) else True
        if self.dropout > 0 and training:
            seed = self.dropout_seed if self.dropout_seed is not None else self._seed_generator
            # one mask for every timestep: broadcast along the time axis
            xs = rand_ops.regenerating_dropout(xs, seed_tensor(seed), self.dropout, (0,))
        batch = xs.shape[1] if xs.shape[1] is not None else tf.shape(xs)[1]
        states = self._initial_states(initial_state, batch, xs.dtype)
        outputs, states = self._fused(xs, states)
        if self.stateful:
            for variable, value in zip(self.states, states):
                variable.assign(tf.cast(value, variable.dtype))
        output = outputs if self.return_sequences else states[0]
        if self.return_sequences and not self.time_major:
            output = tf.transpose(outputs, [1, 0, 2])
        return [output] + list(states) if self.return_state else output

    def _fused(self, xs, states):
        """The recurrence as one marked IPU op: (outputs [T, B, u], final states)."""
        weights = [tf.cast(w, xs.dtype) for w in (self.kernel, self.recurrent_kernel,
                                                  self.biases)]
        params = {"activation": _name(self.activation),
                  "recurrent_activation": _name(self.recurrent_activation),
                  **self._cell_params()}

        def body(xs, kernel, recurrent, biases, *states):
            outputs, final = self._loop(xs, list(states), kernel, recurrent, biases)
            return (outputs,) + tuple(final)

        result = marked_with_gradient(f"Popnn{self.KIND}Layer",
                                      f"Popnn{self.KIND}LayerBackprop", body,
                                      [xs] + weights + list(states), params)
        return result[0], list(result[1:])

    def _cell_params(self):
        return {}

    def _loop(self, xs, states, kernel, recurrent, biases):
        """Runs `_step` over time; returns the outputs [T, B, u] and the final states."""
        steps = xs.shape[0]
        projected = self._project(xs, kernel, biases)
        element = tf.TensorShape([xs.shape[1], projected.shape[-1]])
        projected = tf.TensorArray(xs.dtype, size=projected.shape[0] or tf.shape(xs)[0],
                                   element_shape=element).unstack(projected)
        outputs = tf.TensorArray(xs.dtype, size=steps if steps is not None
                                 else tf.shape(xs)[0],
                                 element_shape=tf.TensorShape([xs.shape[1], self.units]))

        def body(t, outputs, *states):
            new_states = self._step(projected.read(t), list(states), recurrent, biases)
            return (t + 1, outputs.write(t, new_states[0])) + tuple(new_states)

        # A static trip count lets the gradient's accumulators have a known size.
        result = tf.while_loop(lambda t, *_: t < tf.shape(xs)[0], body,
                               (tf.constant(0), outputs) + tuple(states),
                               maximum_iterations=steps)
        return result[1].stack(), list(result[2:])

    def _project(self, xs, kernel, biases):
        """The input projection x @ kernel (+ input bias) of every timestep at once."""
        raise NotImplementedError

    def _step(self, projected, states, recurrent, biases):
        raise NotImplementedError

    def _act(self, x):
        return keras.activations.get(self.activation)(x)

    def _recurrent_act(self, x):
        return keras.activations.get(self.recurrent_activation)(x)

    def get_config(self):
        config = super().get_config()
        config.update({
            "units": self.units, "activation": self.activation,
            "recurrent_activation": self.recurrent_activation,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer":
                keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "dropout": self.dropout, "dropout_seed": self.dropout_seed,
            "return_sequences": self.return_sequences, "return_state": self.return_state,
            "stateful": self.stateful, "partials_dtype": self.partials_dtype,
            "seed": self.seed, "time_major": self.time_major,
        })
        return config


def _name(activation):
    return activation if isinstance(activation, str) else keras.activations.serialize(
        activation)


def _input_projection(xs, kernel, bias):
    """x @ kernel + bias for every timestep of time-major xs [T, B, F], as one matmul."""
    steps, batch = tf.shape(xs)[0], tf.shape(xs)[1]
    flat = tf.reshape(xs, [-1, xs.shape[-1]])
    return tf.reshape(tf.matmul(flat, kernel) + bias, tf.stack([steps, batch, -1]))


@serializable
class PopnnLSTM(_PopnnRNN):
    """Long Short-Term Memory layer as fused on the IPU, with Keras' weights.

    Args mirror `keras.layers.LSTM`; the IPU-specific ones are `dropout_seed` (a pair of
    ints: the same input dropout mask on every call), `partials_dtype`, `options` and
    `options_bwd` (planner options; no numerical effect) and `time_major` ([T, B, F]
    inputs and outputs). `use_bias=False`, regularizers, constraints,
    `recurrent_dropout`, `go_backwards` and `unroll` are refused. With `return_state`
    the layer returns (output, h, c); `initial_state` is (h, c).
    """

    KIND = "LSTM"
    GATES = 4
    STATES = 2

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.,
                 dropout_seed=None, recurrent_dropout=0., implementation=2,
                 return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, partials_dtype=tf.float32, seed=None,
                 time_major=False, options=None, options_bwd=None, **kwargs):
        check_unsupported("LSTM", locals())
        super().__init__(units, activation, recurrent_activation, kernel_initializer,
                         recurrent_initializer, bias_initializer, dropout, dropout_seed,
                         return_sequences, return_state, stateful, partials_dtype, seed,
                         time_major, options, options_bwd, **kwargs)
        self.unit_forget_bias = unit_forget_bias

    def _bias_init(self, shape, dtype=None):
        bias = self.bias_initializer(shape, dtype=dtype)
        if not self.unit_forget_bias:
            return bias
        u = self.units
        return tf.concat([bias[:u], tf.ones([u], bias.dtype), bias[2 * u:]], 0)

    def _project(self, xs, kernel, biases):
        return _input_projection(xs, kernel, biases)

    def _step(self, projected, states, recurrent, biases):
        h, c = states
        z = projected + tf.matmul(h, recurrent)
        i, f, g, o = tf.split(z, 4, axis=-1)
        c = self._recurrent_act(f) * c + self._recurrent_act(i) * self._act(g)
        return [self._recurrent_act(o) * self._act(c), c]

    def get_config(self):
        config = super().get_config()
        config["unit_forget_bias"] = self.unit_forget_bias
        return config


@serializable
class PopnnGRU(_PopnnRNN):
    """Gated Recurrent Unit layer as fused on the IPU, with Keras' weights.

    Args mirror `keras.layers.GRU` (with `reset_after=True` by default: biases of shape
    [2, 3 * units], input and recurrent); the IPU-specific ones are as in `PopnnLSTM`.
    With `return_state` the layer returns (output, state); `initial_state` is [B, units].
    """

    KIND = "GRU"
    GATES = 3
    STATES = 1

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0., dropout_seed=None, recurrent_dropout=0.,
                 implementation=2, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, time_major=False,
                 seed=None, partials_dtype=tf.float32, reset_after=True, options=None,
                 options_bwd=None, **kwargs):
        check_unsupported("GRU", locals())
        super().__init__(units, activation, recurrent_activation, kernel_initializer,
                         recurrent_initializer, bias_initializer, dropout, dropout_seed,
                         return_sequences, return_state, stateful, partials_dtype, seed,
                         time_major, options, options_bwd, **kwargs)
        self.reset_after = reset_after

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def _cell_params(self):
        return {"reset_after": bool(self.reset_after)}

    def _project(self, xs, kernel, biases):
        return _input_projection(xs, kernel, biases[0] if self.reset_after else biases)

    def _step(self, projected, states, recurrent, biases):
        h, = states
        u = self.units
        x_z, x_r, x_h = tf.split(projected, 3, axis=-1)
        if self.reset_after:
            inner = tf.matmul(h, recurrent) + biases[1]
            r_z, r_r, r_h = tf.split(inner, 3, axis=-1)
            z = self._recurrent_act(x_z + r_z)
            r = self._recurrent_act(x_r + r_r)
            candidate = self._act(x_h + r * r_h)
        else:
            inner = tf.matmul(h, recurrent[:, :2 * u])
            r_z, r_r = tf.split(inner, 2, axis=-1)
            z = self._recurrent_act(x_z + r_z)
            r = self._recurrent_act(x_r + r_r)
            candidate = self._act(x_h + tf.matmul(r * h, recurrent[:, 2 * u:]))
        return [z * h + (1 - z) * candidate]

    def get_config(self):
        config = super().get_config()
        config["reset_after"] = self.reset_after
        return config


LSTM = PopnnLSTM
GRU = PopnnGRU
