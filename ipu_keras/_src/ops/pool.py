"""Op family 'pool': max and average pooling over 1 to 3 spatial dimensions.

Owns the IR ops `max_pool`, `max_pool_grad`, `avg_pool` and `avg_pool_grad` (channels
last; padding resolved to `(low, high)` pairs at import, NCHW imported with
transposes) and the importers of MaxPool, MaxPoolV2, MaxPool3D, AvgPool, AvgPool3D and
their gradients. The window helpers come from `ops/conv.py`.

TensorFlow semantics kept: max pooling pads with the lowest value; the gradient of 2-d
max pooling (MaxPoolGrad) goes to the first maximum of each window in row-major order,
that of 3-d max pooling (MaxPool3DGrad) to every element of the window equal to the
pooled output, as TensorFlow's CPU kernels do when a window holds ties; average
pooling with SAME padding divides by the number of non-padded elements in the window.

The max-pool gradient followed by the ReLU gradient at the pool's input is registered as
one kernel for the engine (`_max_pool_relu_grad`, `simulator/pairs.py`).
"""
import functools
import itertools

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores, simd
from ipu_keras._src.ops.conv import (
    Layout, offset_slices, out_spatial, pad_spatial, scatter_windows,
)
from ipu_keras._src.ops.nn import relu_grad
from ipu_keras._src.ops.registry import Work, register_op, register_pair, tf_import

TF_TYPES = (
    "MaxPool", "MaxPoolV2", "MaxPoolGrad", "MaxPoolGradV2", "MaxPool3D", "MaxPool3DGrad",
    "AvgPool", "AvgPoolGrad", "AvgPool3D", "AvgPool3DGrad",
)
"""The TensorFlow op types this module imports."""

IR_OPS = ("max_pool", "max_pool_grad", "avg_pool", "avg_pool_grad")
"""The IR ops this module registers."""

# -- kernels ------------------------------------------------------------------------------


def _windows(x_shape, ksize, strides, padding):
    """(output spatial shape, per-offset slices of the padded input)."""
    ones = (1,) * len(ksize)
    out = out_spatial(x_shape[1:-1], ksize, strides, ones, padding)
    return out, list(offset_slices(ksize, strides, ones, out))


def _lowest(dtype):
    dtype = np.dtype(dtype)
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool(x, *, ksize, strides, padding):
    _, slices = _windows(x.shape, ksize, strides, padding)
    xp = pad_spatial(x, padding, _lowest(x.dtype))
    y = xp[slices[0]].copy()
    for index in slices[1:]:
        np.maximum(y, xp[index], out=y)
    return y


def _maxima(parts, y, ties, y_is_max):
    """What a max-pool gradient compares each window offset's elements (`parts`, in
    order) with: `y`, or for `ties="first"` without `y_is_max` each window's maximum
    computed again (TensorFlow's MaxPoolGrad ignores its orig_output). For `"first"`, None
    when a window holds NaN: the `>` scan of `_first_max` then says where its gradient
    goes."""
    best = y
    if ties == "first" and not y_is_max:
        parts = iter(parts)
        best = next(parts).copy()
        for part in parts:
            np.maximum(best, part, out=best)
    if ties == "first" and best.dtype.kind in "fc" and np.isnan(best).any():
        return None
    return best


def _hits(parts, best, ties):
    """Per window offset (`parts` in order), the mask of windows whose gradient goes to
    that offset's element: equal to `best`, and for `ties="first"` the first such offset
    only. One mask array, overwritten at each step."""
    hit = np.empty(best.shape, bool)
    free = np.ones(best.shape, bool) if ties == "first" else None
    for part in parts:
        np.equal(part, best, out=hit)
        if free is not None:
            hit &= free
            free ^= hit
        yield hit


def _first_max(x, ksize, strides, padding):
    """Per output element, the kernel offset of its window's first maximum, by a `>`
    scan (NaN never replaces a maximum): for windows holding NaN."""
    _, slices = _windows(x.shape, ksize, strides, padding)
    xp = pad_spatial(x, padding, _lowest(x.dtype))
    best = xp[slices[0]].copy()
    arg = np.zeros(best.shape, np.int32)
    for i, index in enumerate(slices[1:], 1):
        part = xp[index]
        better = part > best
        best = np.where(better, part, best)
        arg[better] = i
    return arg


def _split(xp, ksize, out):
    """A view of the padded (N, *spatial, C) array's first out*ksize rows per spatial axis as
    (N, out0, k0, out1, k1, ..., C): non-overlapping windows, offset i of window o at (o, i)."""
    region = xp[(slice(None),) + tuple(slice(0, o * k) for o, k in zip(out, ksize))]
    return region.reshape((xp.shape[0],) + tuple(d for ok in zip(out, ksize) for d in ok)
                          + (xp.shape[-1],))


def _max_pool_grad_tiled(x, y, dy, ksize, strides, padding, ties, y_is_max, relu=False,
                         into=None):
    """`_max_pool_grad` for non-overlapping windows (strides == ksize), or None. `into`: an
    array to write the gradient into, used when it can take it whole (no padding, dy's
    dtype, contiguous). `relu`: the ReLU gradient at x of that (`_max_pool_relu_grad`)."""
    if tuple(strides) != tuple(ksize):
        return None
    out = tuple(y.shape[1:-1])
    xs = _split(pad_spatial(x, padding, _lowest(x.dtype)), ksize, out)
    views = [(slice(None),) + tuple(i for o in offset for i in (slice(None), o)) + (slice(None),)
             for offset in itertools.product(*(range(k) for k in ksize))]
    best = _maxima((xs[index] for index in views), y, ties, y_is_max)
    if best is None:
        return None  # NaN windows: leave the `>` scan to the general path
    padded = (x.shape[0],) + tuple(size + lo + hi for size, (lo, hi) in zip(
        x.shape[1:-1], padding)) + (x.shape[-1],)
    whole = (into is not None and into.shape == padded and into.dtype == dy.dtype
             and into.flags.c_contiguous)
    dx = into if whole else np.empty(padded, dy.dtype)
    # Every window element is written below; only the rows no window covers need zeros.
    for axis, (o, k) in enumerate(zip(out, ksize), 1):
        dx[(slice(None),) * axis + (slice(o * k, None),)] = 0
    dxs = _split(dx, ksize, out)
    # 0 + dy, as the general path's accumulation into zeros gives (no negative zeros).
    grad = dy + np.zeros((), dy.dtype)
    if relu:
        # Each element takes at most one window's gradient, and only where it equals that
        # window's maximum: x > 0 there exactly where the maximum is > 0. Elsewhere +0,
        # as +0 * (x > 0) gives.
        grad = relu_grad(grad, best)
    if dy.dtype.kind in "fiu" and dy.dtype.itemsize in (1, 2, 4, 8):
        # Select by bit masks (grad & all-ones, or & 0 giving +0): same bits as np.where,
        # without its data-dependent branches.
        bits = np.dtype(f"u{dy.dtype.itemsize}")
        grad, dxs = grad.view(bits), _split(dx.view(bits), ksize, out)
        mask = np.empty(best.shape, bits)

        def select(target, hit):
            np.copyto(mask, hit, casting="unsafe")
            np.negative(mask, out=mask)
            np.bitwise_and(grad, mask, out=target)
    else:
        def select(target, hit):
            target[...] = 0
            np.copyto(target, grad, where=hit)
    for index, hit in zip(views, _hits((xs[index] for index in views), best, ties)):
        select(dxs[index], hit)
    if whole:
        return into
    crop = tuple(slice(lo, lo + size) for size, (lo, _) in zip(x.shape[1:-1], padding))
    return dx[(slice(None),) + crop + (slice(None),)]


SPLIT_GRAD_ELEMENTS = 1 << 20
"""Max-pool gradients with at least this many outputs are split over the cores. A slab
makes two dozen short numpy calls, and the two threads wait on each other for the GIL:
split, the tutorial CNN's second gradient (64x11x11x64) took 0.54-0.86 ms against
0.37-0.39 on one core, ResNet-50's (8x34x34x64, 3x3 windows) 2.4-2.7 against 1.5-2.0; the
CNN's first (64x26x26x32) 1.2-1.9 against 1.9-3.7 (`cores.execution()`, medians of 40)."""


def _max_pool_grad(x, y, dy, *, ksize, strides, padding, ties="first", y_is_max=False,
                   relu=False):
    """`ties="first"`: to each window's first maximum; `"all"`: to every element equal to y.
    `y_is_max`: y is `max_pool` of x over the same windows (the importer saw it made so),
    each window's maximum, which the kernels then compare with instead of computing it
    again (`_maxima`). Batches of `SPLIT_GRAD_ELEMENTS` outputs are computed a slab per
    core (`cores.batchwise`). `relu`: see `_max_pool_relu_grad`."""
    kernel = functools.partial(_max_pool_grad_batch, ksize=ksize, strides=strides,
                               padding=padding, ties=ties, y_is_max=y_is_max, relu=relu)
    return cores.batchwise(kernel, (x, y, dy), (True, True, True), x.shape, x.dtype,
                           into=True, min_elements=SPLIT_GRAD_ELEMENTS)


def _max_pool_relu_grad(x, y, dy, **params):
    """`relu_grad(_max_pool_grad(x, y, dy, **params), x)`, bit for bit: the gradient of a
    max pool of ReLU outputs (the Keras CNN's Conv-ReLU-MaxPool) back through the ReLU.
    Non-overlapping windows without NaN apply the ReLU's mask to the pooled gradient
    (`_max_pool_grad_tiled`; the tutorial CNN's first pool: 346K elements instead of
    1.4M); other windows compute the two one after the other. The engine runs it for the
    pair of steps (`simulator/pairs.py`)."""
    return _max_pool_grad(x, y, dy, relu=True, **params)


def _max_pool_grad_batch(x, y, dy, *, ksize, strides, padding, ties, y_is_max=False,
                         relu=False, out=None):
    """The gradient of a batch; `out`: an array of its shape and dtype to fill."""
    dx = _max_pool_grad_tiled(x, y, dy, ksize, strides, padding, ties, y_is_max, relu,
                              into=out)
    if dx is None:
        dx = _max_pool_grad_scattered(x, y, dy, ksize, strides, padding, ties, y_is_max)
        if relu:
            dx = relu_grad(dx.astype(x.dtype, copy=False), x)
    if out is None:
        return dx.astype(x.dtype, copy=False)
    if dx is not out:
        out[...] = dx
    return out


def _max_pool_grad_scattered(x, y, dy, ksize, strides, padding, ties, y_is_max):
    """`_max_pool_grad_batch` for any windows: each kernel offset's part (dy where its
    element takes the window's gradient, +0 elsewhere, selected by bit masks) added into
    the padded input. Comparing with the maxima instead of rescanning with `>` took a
    ResNet-50 slab's gradient (4x34x34x64, 3x3 windows, stride 2) from 3.9 to 0.8 ms."""
    ones = (1,) * len(ksize)
    zero = np.zeros((), dy.dtype)
    _, slices = _windows(x.shape, ksize, strides, padding)
    xp = pad_spatial(x, padding, _lowest(x.dtype))
    best = _maxima((xp[index] for index in slices), y, ties, y_is_max)
    if best is None:
        arg = _first_max(x, ksize, strides, padding)
        piece = lambda i: np.where(arg == i, dy, zero)  # noqa: E731
    else:
        # scatter_windows asks for each offset's part once, in order: the masks' order.
        hits = _hits((xp[index] for index in slices), best, ties)
        piece = lambda i: simd.select(next(hits), dy, zero)  # noqa: E731
    return scatter_windows(piece, x.shape, ksize, strides, ones, padding, dy.dtype)


def _counts(spatial, ksize, strides, padding):
    """Non-padded elements per window, shaped (1, *out, 1) to broadcast over the output."""
    out = out_spatial(spatial, ksize, strides, (1,) * len(ksize), padding)
    count = np.ones((), np.int64)
    for size, k, s, (lo, _), o in zip(spatial, ksize, strides, padding, out):
        start = np.arange(o) * s - lo
        valid = np.minimum(start + k, size) - np.maximum(start, 0)
        count = np.multiply.outer(count, valid)
    return count.reshape((1,) + out + (1,))


def _avg_pool(x, *, ksize, strides, padding):
    _, slices = _windows(x.shape, ksize, strides, padding)
    work = np.float32 if x.dtype == np.float16 else x.dtype
    xp = pad_spatial(x.astype(work, copy=False), padding)
    total = xp[slices[0]].copy()
    for index in slices[1:]:
        total += xp[index]
    count = _counts(x.shape[1:-1], ksize, strides, padding).astype(work)
    return (total / count).astype(x.dtype, copy=False)


def _avg_pool_grad(dy, *, input_shape, ksize, strides, padding):
    input_shape = tuple(input_shape)
    work = np.float32 if dy.dtype == np.float16 else dy.dtype
    share = dy.astype(work) / _counts(input_shape[1:-1], ksize, strides, padding).astype(work)
    dx = scatter_windows(lambda i: share, input_shape, ksize, strides, (1,) * len(ksize),
                         padding, work)
    return dx.astype(dy.dtype, copy=False)


# -- rules --------------------------------------------------------------------------------


def _pooled_shape(x_shape, ksize, strides, padding):
    if len(x_shape) != len(ksize) + 2 or len(strides) != len(ksize):
        raise ValueError(f"Pooling expected ksize and strides for each spatial dimension. "
                         f"Received: input={x_shape}, ksize={ksize}, strides={strides}")
    out, _ = _windows(x_shape, ksize, strides, padding)
    if min(out, default=1) < 1:
        raise ValueError(f"Pooling expected a window that fits the input. Received: "
                         f"input={x_shape}, ksize={ksize}, padding={padding}")
    return (x_shape[0],) + out + (x_shape[-1],)


def _pool_shape(in_types, *, ksize, strides, padding):
    x = in_types[0]
    return [TensorType(_pooled_shape(x.shape, ksize, strides, padding), x.dtype)]


def _max_pool_grad_shape(in_types, *, ksize, strides, padding, ties="first", y_is_max=False):
    x, y, dy = in_types
    expected = _pooled_shape(x.shape, ksize, strides, padding)
    if dy.shape != expected or y.shape != expected or ties not in ("first", "all"):
        raise ValueError(f"max_pool_grad expected an output and gradient of shape {expected} "
                         f"and ties 'first' or 'all'. Received: output={y}, gradient={dy}, "
                         f"ties={ties!r}")
    return [x]


def _avg_pool_grad_shape(in_types, *, input_shape, ksize, strides, padding):
    expected = _pooled_shape(tuple(input_shape), ksize, strides, padding)
    if in_types[0].shape != expected:
        raise ValueError(f"avg_pool_grad expected a gradient of shape {expected}. "
                         f"Received: gradient={in_types[0]}")
    return [TensorType(input_shape, in_types[0].dtype)]


def _pool_cost(in_types, out_types, **_):
    """One reduction step per element of the pooled (forward) input."""
    return Work("reduce", max(t.size for t in list(in_types) + list(out_types)))


for _op, _shape, _kernel, _mapping in (
    ("max_pool", _pool_shape, _max_pool, "reduce"),
    ("max_pool_grad", _max_pool_grad_shape, _max_pool_grad, "elementwise"),
    ("avg_pool", _pool_shape, _avg_pool, "reduce"),
    ("avg_pool_grad", _avg_pool_grad_shape, _avg_pool_grad, "reduce"),
):
    register_op(_op, shape=_shape, kernel=_kernel, cost=_pool_cost, mapping=_mapping,
                tile_rule="window")
register_pair("max_pool_grad", "relu_grad", _max_pool_relu_grad, link=0, same=[(1, 0)])


# -- importers ----------------------------------------------------------------------------


def _params(node, layout, x_shape, ksize=None, strides=None):
    """ksize, strides and padding of a pooling node, for a channels-last input shape."""
    ksize = layout.spatial(node.attr("ksize") if ksize is None else ksize, "ksize")
    strides = layout.spatial(node.attr("strides") if strides is None else strides, "strides")
    padding = layout.padding(x_shape[1:-1], ksize, strides, (1,) * len(ksize))
    return {"ksize": ksize, "strides": strides, "padding": padding}


def _window_operands(node):
    """MaxPoolV2 and MaxPoolGradV2 take ksize and strides as their last two inputs."""
    if node.type.endswith("V2"):
        n = len(node.inputs)
        return node.static(n - 2), node.static(n - 1)
    return None, None


@tf_import("MaxPool", "MaxPoolV2", "MaxPool3D", "AvgPool", "AvgPool3D")
def _import_pool(node, b):
    x = node.inputs[0]
    layout = Layout(node, x.type.rank)
    params = _params(node, layout, layout.last(x.type.shape), *_window_operands(node))
    op = "max_pool" if node.type.startswith("Max") else "avg_pool"
    return layout.to_first(b, b.emit(op, [layout.to_last(b, x)], **params))


@tf_import("MaxPoolGrad", "MaxPoolGradV2", "MaxPool3DGrad")
def _import_max_pool_grad(node, b):
    x, y, dy = node.inputs[:3]
    layout = Layout(node, x.type.rank)
    params = _params(node, layout, layout.last(x.type.shape), *_window_operands(node))
    ties = "all" if node.type == "MaxPool3DGrad" else "first"
    operands = [layout.to_last(b, v) for v in (x, y, dy)]
    return layout.to_first(b, b.emit("max_pool_grad", operands, ties=ties,
                                     y_is_max=_pooled_by(b, *operands[:2], params), **params))


def _pooled_by(b, x, y, params):
    """Whether y is `max_pool` of x over the windows `params`, made by this builder (the
    gradient of a max pooling is given its output): its windows' maxima, exactly."""
    for eqn in reversed(b.equations):
        if y in eqn.outputs:
            return (eqn.op == "max_pool" and eqn.inputs[0] is x
                    and all(eqn.params[k] == v for k, v in params.items()))
    return False


@tf_import("AvgPoolGrad", "AvgPool3DGrad")
def _import_avg_pool_grad(node, b):
    dy = node.inputs[1]
    layout = Layout(node, dy.type.rank)
    x_shape = layout.last(node.static(0))
    dx = b.emit("avg_pool_grad", [layout.to_last(b, dy)], input_shape=x_shape,
                **_params(node, layout, x_shape))
    return layout.to_first(b, dx)

