"""Moving values between IPUs: `ipu_copy`, the explicit inter-IPU copy.

The compiler's `shard` pass inserts one `ipu_copy(x) {source_ipu, destination_ipu}`
wherever a value made on one IPU is used on another; no TensorFlow op imports to it.
Its output has the input's type and values, spread linearly over the destination
IPU's tiles (a fresh value there, never a view of the source). Its work is a copy of
every element into place; the lowering adds the IPU-Link transfer of its bytes and an
external sync (`device/cost.py: ipu_link_cycles`).
"""
import numpy as np

from ipu_keras._src.ops._common import per_output_element, same_type
from ipu_keras._src.ops.registry import register_op


def _copy(x, *, source_ipu, destination_ipu):
    del source_ipu, destination_ipu
    return np.array(x, copy=True)


register_op("ipu_copy", shape=same_type, kernel=_copy, cost=per_output_element("copy"),
            mapping="linear", role="link_copy")
