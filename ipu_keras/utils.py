"""Small helpers of the IPU API."""
import contextlib

import tensorflow as tf


def running_on_ipu_model():
    """True: every device of ipu_keras is a simulated IPU (an "IPU Model")."""
    return True


def reset_ipu_seed(seed, device="/device:IPU:0", cpu_seed=None):
    """Sets the seed of random ops; the simulator's random numbers follow TensorFlow's."""
    del device
    tf.random.set_seed(seed if cpu_seed is None else cpu_seed)


@contextlib.contextmanager
def move_variable_initialization_to_cpu():
    """Kept for compatibility: variables are always initialised on the host."""
    yield
