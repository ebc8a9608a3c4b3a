"""Shared shape, dtype and cost rules used by several op families."""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.registry import NO_WORK, Work


def channel_axis(rank, params):
    """The channel axis of a tensor of `rank` under the op's `data_format` (default NHWC)."""
    if rank <= 1:
        return 0
    return 1 if str(params.get("data_format", "NHWC")).startswith("NC") else rank - 1


def broadcast_shape(*shapes):
    return tuple(np.broadcast_shapes(*shapes))


def same_type(in_types, **_):
    """The output has the type of the first input."""
    return [in_types[0]]


def broadcast_type(in_types, **_):
    """Numpy broadcasting of all inputs; dtype of the first."""
    return [TensorType(broadcast_shape(*(t.shape for t in in_types)), in_types[0].dtype)]


def broadcast_to_dtype(dtype):
    def rule(in_types, **_):
        return [TensorType(broadcast_shape(*(t.shape for t in in_types)), dtype)]

    return rule


def per_output_element(kind="vector", factor=1):
    """Cost rule: `factor` units of `kind` work per output element."""

    def cost(in_types, out_types, **_):
        return Work(kind, factor * sum(t.size for t in out_types))

    return cost


def per_input_element(kind="vector", factor=1):
    def cost(in_types, out_types, **_):
        return Work(kind, factor * sum(t.size for t in in_types))

    return cost


def no_cost(in_types, out_types, **_):
    return NO_WORK


def normalize_axes(axes, rank):
    """Axes as a sorted tuple of non-negative ints; None means every axis."""
    if axes is None:
        return tuple(range(rank))
    axes = np.atleast_1d(np.asarray(axes)).astype(int).tolist()
    return tuple(sorted({a % rank if rank else 0 for a in axes}))
