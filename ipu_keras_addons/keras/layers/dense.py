"""SerialDense: a Dense layer whose matmul is split into `serialization_factor` pieces.

The original serializes the matmul (forward and backward) to cut the temporary memory of
one large product. Here the layer emits the pieces as separate TensorFlow matmuls inside
the name scope `serialized_matmul`, so the device runs (and accounts for) smaller products;
the numbers equal one `x @ kernel + bias`.
"""
import keras
import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import argument_error, serializable

# Graphcore's names for the three split dimensions, and what each splits for x [.., m, k]
# and kernel [k, n]: 'input_columns' splits m, 'input_rows_kernel_columns' the reduction k,
# 'kernel_rows' splits n.
DIMENSIONS = ("input_columns", "input_rows_kernel_columns", "kernel_rows")


def serialized_matmul(x, kernel, factor, dimension):
    """`x @ kernel` computed as `factor` smaller matmuls along `dimension` (see DIMENSIONS)."""
    if factor == 1:
        return tf.matmul(x, kernel)
    with tf.name_scope("serialized_matmul"):
        if dimension == "input_columns":
            pieces = tf.split(x, factor, axis=-2)
            return tf.concat([tf.matmul(p, kernel) for p in pieces], axis=-2)
        if dimension == "kernel_rows":
            pieces = tf.split(kernel, factor, axis=1)
            return tf.concat([tf.matmul(x, p) for p in pieces], axis=-1)
        x_pieces = tf.split(x, factor, axis=-1)
        k_pieces = tf.split(kernel, factor, axis=0)
        out = tf.matmul(x_pieces[0], k_pieces[0])
        for xp, kp in zip(x_pieces[1:], k_pieces[1:]):
            out = out + tf.matmul(xp, kp)
        return out


@serializable
class SerialDense(keras.layers.Layer):
    """Densely-connected layer whose matmul is serialized to reduce temporary memory.

    Computes `activation(dot(input, kernel) + bias)` like `keras.layers.Dense`, with the
    same weights, but splits the product into `serialization_factor` smaller matmuls.

    Args:
        units: Positive integer, dimensionality of the output space.
        serialization_factor: An integer, how many pieces the matmul is split into; it
            must divide the serialized dimension.
        serialization_dimension: For inputs `[..., m, k]` and kernel `[k, units]`:
            `'input_columns'` splits m, `'input_rows_kernel_columns'` splits k (partial
            products are summed) and `'kernel_rows'` splits units.
        activation: Activation function to use (default: none).
        use_bias: Boolean, whether the layer uses a bias vector.
        kernel_initializer: Initializer for the `kernel` weights matrix.
        bias_initializer: Initializer for the bias vector.
        kernel_regularizer: Regularizer function applied to the `kernel` weights matrix.
        bias_regularizer: Regularizer function applied to the bias vector.
        activity_regularizer: Regularizer function applied to the output of the layer.
        kernel_constraint: Constraint function applied to the `kernel` weights matrix.
        bias_constraint: Constraint function applied to the bias vector.
    """

    def __init__(self, units, serialization_factor, serialization_dimension, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 **kwargs):
        if "input_shape" not in kwargs and "input_dim" in kwargs:
            kwargs["input_shape"] = (kwargs.pop("input_dim"),)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        self.serialization_factor = serialization_factor
        self.serialization_dimension = serialization_dimension
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.input_spec = keras.layers.InputSpec(min_ndim=2)
        self.supports_masking = True

    def build(self, input_shape):
        last_dim = input_shape[-1]
        if last_dim is None:
            raise argument_error("SerialDense", "the last dimension of the inputs to be "
                                 "defined", input_shape=input_shape)
        self.input_spec = keras.layers.InputSpec(min_ndim=2, axes={-1: last_dim})
        self.kernel = self.add_weight(
            name="kernel", shape=(last_dim, self.units), initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)

    def _check_serialization(self, input_shape):
        factor, dimension = self.serialization_factor, self.serialization_dimension
        if factor < 1:
            raise argument_error("SerialDense", "serialization_factor to be at least 1",
                                 serialization_factor=factor)
        if dimension not in DIMENSIONS:
            raise argument_error("SerialDense", "serialization_dimension to be one of "
                                 f"{DIMENSIONS}", serialization_dimension=dimension)
        size = {"input_columns": input_shape[-2], "kernel_rows": self.units,
                "input_rows_kernel_columns": input_shape[-1]}[dimension]
        if size is not None and size % factor:
            raise argument_error(
                "SerialDense", f"serialization_factor to divide the {dimension!r} dimension "
                f"(size {size}); choose a divisor", serialization_factor=factor)

    def call(self, inputs):
        self._check_serialization(inputs.shape)
        kernel = tf.cast(self.kernel, inputs.dtype)
        outputs = serialized_matmul(inputs, kernel, self.serialization_factor,
                                    self.serialization_dimension)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, inputs.dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "units": self.units,
            "serialization_factor": self.serialization_factor,
            "serialization_dimension": self.serialization_dimension,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
            "bias_constraint": keras.constraints.serialize(self.bias_constraint),
        })
        return config
