"""The host/device boundary: batches become flat numpy arrays of IPU dtypes.

The IPU has no 64-bit types. float64 becomes float32 and int64 becomes int32, with
one warning per dtype; an int64 value outside the int32 range is an error rather than
a silent wrap. It has no complex, string or object types either: such an input is an
error (Keras on the CPU would drop a complex input's imaginary part without a word).
"""
import warnings

import numpy as np
import tensorflow as tf

from ipu_keras._src.compat import user_stacklevel
from ipu_keras.errors import FeedError, UnsupportedDTypeError

_CONVERSIONS = {np.dtype("float64"): np.dtype("float32"), np.dtype("int64"): np.dtype("int32"),
                np.dtype("uint64"): np.dtype("int32")}
_warned = set()


def to_device_array(value):
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise UnsupportedDTypeError(
            f"The IPU has no {array.dtype} type: inputs expected bool, integer or "
            f"floating-point values. Received: dtype={array.dtype}, shape={array.shape}. "
            "Convert the input on the host first (for complex values np.real, np.abs, or "
            "the real and imaginary parts as two inputs).")
    target = _CONVERSIONS.get(array.dtype)
    if target is None:
        return array
    if target.kind == "i" and array.size:
        info = np.iinfo(target)
        if array.min() < info.min or array.max() > info.max:
            raise FeedError(
                f"The IPU has no {array.dtype} type: values are converted to {target}, which "
                f"expected values in [{info.min}, {info.max}]. Received: values in "
                f"[{array.min()}, {array.max()}]."
            )
    if array.dtype not in _warned:
        _warned.add(array.dtype)
        warnings.warn(
            f"The IPU has no {array.dtype} type: inputs of that dtype are converted to {target} "
            "at the host/device boundary.", stacklevel=user_stacklevel())
    return array.astype(target)


def flatten_batch(batch):
    """(structure with None kept, flat list of device arrays for the non-None leaves)."""
    leaves = tf.nest.flatten(batch)
    return [to_device_array(leaf) for leaf in leaves if leaf is not None]


def signature(arrays):
    """What a compiled step is specialised on: each array's shape and dtype."""
    return tuple((a.shape, a.dtype) for a in arrays)
