"""The session's variable sync (runtime/variables.py): raw ops for plain variables, the
variable's own methods for any other, the same values either way."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.runtime.variables import HostVariables


class _Wrapped:
    """A variable that is not a plain ResourceVariable: only numpy() and assign()."""

    def __init__(self, value):
        self.inner = tf.Variable(value)
        self.assigned = 0

    def numpy(self):
        return self.inner.numpy()

    def assign(self, value):
        self.assigned += 1
        self.inner.assign(value)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
def test_plain_variables_read_and_write_their_values_and_dtype(dtype):
    values = [np.arange(6, dtype=dtype).reshape(2, 3), np.array(7, dtype)]
    variables = [tf.Variable(v) for v in values]
    host = HostVariables(variables)
    read = host.read()
    for got, want in zip(read, values):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    new = [v * 2 + 1 for v in values]
    host.write([0], new)            # only the listed ones are written
    assert np.array_equal(variables[0].numpy(), new[0])
    assert variables[0].dtype.as_numpy_dtype == dtype
    assert np.array_equal(variables[1].numpy(), values[1])


def test_a_value_of_another_dtype_is_written_in_the_variables():
    variable = tf.Variable(np.zeros(3, np.float32))
    HostVariables([variable]).write([0], [np.array([1.5, 2.5, 3.5], np.float64)])
    assert variable.dtype == tf.float32
    assert np.array_equal(variable.numpy(), np.array([1.5, 2.5, 3.5], np.float32))


def test_other_variables_go_through_their_own_methods():
    wrapped = _Wrapped(np.ones(4, np.float32))
    plain = tf.Variable(np.zeros(2, np.float32))
    host = HostVariables([wrapped, plain])
    first, second = host.read()
    assert np.array_equal(first, np.ones(4)) and np.array_equal(second, np.zeros(2))
    host.write([0, 1], [np.full(4, 3, np.float32), np.full(2, 5, np.float32)])
    assert wrapped.assigned == 1
    assert np.array_equal(wrapped.inner.numpy(), np.full(4, 3))
    assert np.array_equal(plain.numpy(), np.full(2, 5))
