"""`ipu.replication_ops.replication_index()`: this replica's index, an int32 scalar.

0 with one replica and in TensorFlow on the CPU; in a replicated program, the index of
the replica running it (`ops/collective.py`)."""
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from ipu_keras._src.ops.collective import REPLICATION_INDEX_ATTR


def replication_index(name=None):
    out = tf.identity(tf.constant(0, tf.int32), name=name or "replication_index")
    out.op._set_attr(REPLICATION_INDEX_ATTR, attr_value_pb2.AttrValue(b=True))
    return out
