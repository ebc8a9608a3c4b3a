"""Op family 'reduce': reductions over static axes, and arg-max/arg-min.

Owns one IR op per reduction kind, `reduce_<kind>(x)` with params `axes` (sorted
non-negative ints, from the TensorFlow op's constant axis operand) and `keep_dims`,
and `argmax`/`argmin(x)` with params `axis` and the output `dtype`; and their
TensorFlow importers. Kernels follow TensorFlow's CPU kernels: float16 sums in
float32, integer `Mean` sums wide and divides truncating, integer `EuclideanNorm`
truncates the square root, `Max`/`Min` of nothing is the dtype's lowest/highest value,
and arg-max/arg-min skip NaNs and take the first of equal values. `top_k(x)` (params `k`
and the index `dtype`) gives the k largest entries of the last axis, largest first, the
lower index first among equal values, and their indices.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import normalize_axes
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPES = ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm", "ArgMax",
            "ArgMin", "TopKV2")
"""The TensorFlow op types this module imports."""


def _accumulator(dtype):
    return np.float32 if dtype == np.float16 else dtype


def _mean(x, axes, keep_dims):
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if x.dtype.kind in "iu":
        total = np.sum(x, axis=axes, keepdims=keep_dims, dtype=np.int64)
        return (np.sign(total) * (np.abs(total) // max(count, 1))).astype(x.dtype)
    with np.errstate(invalid="ignore"):
        total = np.sum(x, axis=axes, keepdims=keep_dims, dtype=_accumulator(x.dtype))
        return (total / count).astype(x.dtype)


def _extreme(fn, side):
    """Max (side -1) or Min (side +1), starting from the dtype's lowest or highest value."""

    def kernel(x, axes, keep_dims):
        if x.dtype.kind == "f":
            initial = side * np.inf
        elif x.dtype.kind == "b":
            initial = side > 0
        else:
            initial = np.iinfo(x.dtype).max if side > 0 else np.iinfo(x.dtype).min
        return fn(x, axis=axes, keepdims=keep_dims, initial=initial)

    return kernel


def _euclidean_norm(x, axes, keep_dims):
    if x.dtype.kind in "iu":
        total = np.sum(np.square(x.astype(np.int64)), axis=axes, keepdims=keep_dims)
        return np.sqrt(total.astype(np.float64)).astype(x.dtype)
    total = np.sum(np.square(x), axis=axes, keepdims=keep_dims, dtype=_accumulator(x.dtype))
    return np.sqrt(total).astype(x.dtype)


def _summing(fn):
    def kernel(x, axes, keep_dims):
        if not axes:   # a sum or product over no axis is x itself (TensorFlow's gradients ask)
            return x
        total = fn(x, axis=axes, keepdims=keep_dims, dtype=_accumulator(x.dtype))
        return total.astype(x.dtype, copy=False)

    return kernel


_REDUCTIONS = (
    # (TensorFlow op, IR op, kernel(x, axes, keep_dims), output dtype or None for x's)
    ("Sum", "reduce_sum", _summing(np.sum), None),
    ("Mean", "reduce_mean", _mean, None),
    ("Max", "reduce_max", _extreme(np.max, -1), None),
    ("Min", "reduce_min", _extreme(np.min, +1), None),
    ("Prod", "reduce_prod", _summing(np.prod), None),
    ("All", "reduce_all", lambda x, axes, keep_dims: np.all(x, axis=axes, keepdims=keep_dims),
     "bool"),
    ("Any", "reduce_any", lambda x, axes, keep_dims: np.any(x, axis=axes, keepdims=keep_dims),
     "bool"),
    ("EuclideanNorm", "reduce_euclidean_norm", _euclidean_norm, None),
)


def _reduced_shape(shape, axes, keep_dims):
    axes = set(axes)
    return tuple(1 if i in axes else d for i, d in enumerate(shape)
                 if keep_dims or i not in axes)


def _reduce_shape(dtype):
    def rule(in_types, *, axes, keep_dims=False):
        (x,) = in_types
        return [TensorType(_reduced_shape(x.shape, axes, keep_dims), dtype or x.dtype)]

    return rule


def _reduce_kernel(fn):
    def kernel(x, *, axes, keep_dims=False):
        return fn(np.asarray(x), tuple(axes), bool(keep_dims))

    return kernel


def _input_elements(in_types, out_types, **_):
    return Work("reduce", in_types[0].size)


def _import_reduction(op):
    def importer(node, b):
        x = node.inputs[0]
        axes = normalize_axes(node.static(1), x.type.rank) if x.type.rank else ()
        return b.emit(op, [x], axes=axes, keep_dims=bool(node.attr("keep_dims", False)))

    return importer


for _tf_type, _op, _fn, _dtype in _REDUCTIONS:
    register_op(_op, shape=_reduce_shape(_dtype), kernel=_reduce_kernel(_fn),
                cost=_input_elements, mapping="reduce", tile_rule="reduce")
    tf_import(_tf_type)(_import_reduction(_op))


# -- argmax / argmin ----------------------------------------------------------------------


def _arg_shape(in_types, *, axis, dtype="int64"):
    (x,) = in_types
    return [TensorType(_reduced_shape(x.shape, (axis,), False), dtype)]


def _arg_kernel(fn, nan_as):
    def kernel(x, *, axis, dtype="int64"):
        if x.dtype.kind == "f":
            x = np.where(np.isnan(x), nan_as, x)
        return fn(x, axis=axis).astype(dtype)

    return kernel


@tf_import("ArgMax", "ArgMin")
def _import_arg(node, b):
    x = node.inputs[0]
    axis = int(np.asarray(node.static(1)).item()) % max(x.type.rank, 1)
    op = "argmax" if node.type == "ArgMax" else "argmin"
    return b.emit(op, [x], axis=axis, dtype=node.out_types[0].dtype)


def _unknown_axes(params, rank):
    """argmax/argmin's reduction tree does not count their `axis` as a known trailing
    reduction (`passes/traffic.py`), as before these facts moved here."""
    return None


register_op("argmax", shape=_arg_shape, kernel=_arg_kernel(np.argmax, -np.inf),
            cost=_input_elements, mapping="reduce", tile_rule="reduce",
            reduced_axes=_unknown_axes)
register_op("argmin", shape=_arg_shape, kernel=_arg_kernel(np.argmin, np.inf),
            cost=_input_elements, mapping="reduce", tile_rule="reduce",
            reduced_axes=_unknown_axes)



# -- top_k ---------------------------------------------------------------------------------


def _top_k_shape(in_types, *, k, dtype="int32"):
    (x,) = in_types
    if not 0 <= k <= x.shape[-1]:
        raise ValueError(f"top_k expected 0 <= k <= {x.shape[-1]} (the last dimension of "
                         f"{x}). Received: k={k}")
    shape = x.shape[:-1] + (k,)
    return [TensorType(shape, x.dtype), TensorType(shape, dtype)]


def _top_k(x, *, k, dtype="int32"):
    """A stable descending order: a stable ascending sort of the reversed row, reversed."""
    n = x.shape[-1]
    order = (n - 1 - np.argsort(x[..., ::-1], axis=-1, kind="stable"))[..., ::-1][..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(dtype)


register_op("top_k", shape=_top_k_shape, kernel=_top_k, cost=_input_elements,
            mapping="reduce", tile_rule="reduce")


@tf_import("TopKV2")
def _import_top_k(node, b):
    k = int(np.asarray(node.static(1)).item())
    return list(b.emit("top_k", [node.inputs[0]], k=k, dtype=node.out_types[1].dtype))


IR_OPS = tuple(op for _, op, _, _ in _REDUCTIONS) + ("argmax", "argmin", "top_k")
"""The IR ops this module registers."""
