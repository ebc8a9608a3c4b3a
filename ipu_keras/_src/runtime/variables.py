"""The host ends of the device's variables: the TensorFlow variables a session reads
before each execution and writes back after it.

A `tf.Variable`'s `numpy()` and `assign()` run Python layers of checks, and `assign`
reads the value back: 37 and 70 us per variable here, and ResNet-50's 324 variables took
67-76 ms an execution. A plain `ResourceVariable` is read and written with the raw ops on
its handle instead (`ReadVariableOp` 14 us, `AssignVariableOp` 19 us; ResNet-50 13-28 ms
an execution, the values' copies included); any other variable (a distributed one, whose
assign writes every component) through its own methods.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops.resource_variable_ops import ResourceVariable


class HostVariables:
    """Reads and writes a list of TensorFlow variables as numpy arrays."""

    def __init__(self, variables):
        self.variables = list(variables)
        self._plain = [type(v) is ResourceVariable for v in self.variables]

    def read(self):
        """Every variable's value, as a list of numpy arrays."""
        return [np.asarray(tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype))
                if plain else np.asarray(v.numpy())
                for v, plain in zip(self.variables, self._plain)]

    def write(self, indices, values):
        """Assigns `values[i]` to variable `i` for each `i` of `indices`."""
        for i in indices:
            v = self.variables[i]
            if self._plain[i]:
                value = np.asarray(values[i], dtype=v.dtype.as_numpy_dtype)
                tf.raw_ops.AssignVariableOp(resource=v.handle, value=value)
            else:
                v.assign(values[i])
