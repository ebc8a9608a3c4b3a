"""Op family 'conv': N-d convolutions and their gradients, and the window helpers.

Owns the IR ops `conv` (1 to 3 spatial dimensions, channels last, grouped when the
input has `groups` times the filter's input channels), `conv_input_grad` and
`conv_filter_grad`, with the importers of Conv2D, Conv3D, the depthwise convs and all
their backprops. A depthwise conv is a grouped conv with one group per input channel:
its `(..., C, M)` filter is reshaped to `(..., 1, C * M)`. Padding is resolved to
explicit `(low, high)` pairs per spatial dimension at import time, so kernels never
see "SAME"; NCHW/NCDHW graphs are imported with transposes around the op.

Also owns the window helpers `ops/pool.py` shares: `Layout` (data formats and
attribute lists), `resolve_padding`, `offset_slices` (one strided slice of the padded
input per kernel offset) and `scatter_windows` (their adjoint, i.e. col2im).
Kernels accumulate in float32 (float64 and integers in 64 bits), one matmul per group.
"""
import functools
import itertools
import math

import numpy as np

from ipu_keras.errors import UnsupportedOpError
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores, simd
from ipu_keras._src.ops.registry import FULL, Work, register_op, tf_import

TF_TYPES = (
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
    "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
)
"""The TensorFlow op types this module imports."""

IR_OPS = ("conv", "conv_input_grad", "conv_filter_grad")
"""The IR ops this module registers."""

# -- windows ------------------------------------------------------------------------------


class Layout:
    """A TensorFlow data format: which attribute entries and axes are spatial."""

    def __init__(self, node, rank):
        self.node, self.rank = node, rank
        self.first = str(node.attr("data_format", "NHWC")).startswith("NC")

    def spatial(self, values, name=""):
        """The spatial entries of a full-rank list (strides, ksize, ...); the others must be 1."""
        values = [int(v) for v in values]
        if len(values) != self.rank:
            raise ValueError(f"'{self.node.name}' expected {self.rank} entries in {name}. "
                             f"Received: {name}={values}")
        other = values[:2] if self.first else [values[0], values[-1]]
        if name and any(v != 1 for v in other):
            raise UnsupportedOpError(self.node.type, self.node.name, hint=(
                f"{name} must be 1 in the batch and channel dimensions. Received: "
                f"{name}={values}"))
        return tuple(values[2:] if self.first else values[1:-1])

    def last(self, shape):
        """A shape in this format, as channels-last."""
        shape = tuple(int(d) for d in shape)
        return (shape[0],) + shape[2:] + (shape[1],) if self.first else shape

    def to_last(self, b, value):
        if not self.first:
            return value
        return b.emit("transpose", [value], perm=(0, *range(2, self.rank), 1))

    def to_first(self, b, value):
        if not self.first:
            return value
        return b.emit("transpose", [value], perm=(0, self.rank - 1, *range(1, self.rank - 1)))

    def padding(self, spatial, kernel, strides, dilations):
        """The node's padding attribute as `(low, high)` pairs per spatial dimension."""
        flat = [int(p) for p in self.node.attr("explicit_paddings", [])]
        explicit = None
        if flat:
            explicit = tuple(zip(self.spatial(flat[0::2]), self.spatial(flat[1::2])))
        mode = str(self.node.attr("padding"))
        return resolve_padding(mode, spatial, kernel, strides, dilations, explicit)


def resolve_padding(mode, spatial, kernel, strides, dilations, explicit=None):
    """TensorFlow's VALID/SAME/EXPLICIT padding as a tuple of `(low, high)` pairs."""
    if mode == "EXPLICIT":
        return tuple((int(lo), int(hi)) for lo, hi in explicit)
    if mode == "VALID":
        return tuple((0, 0) for _ in spatial)
    if mode != "SAME":
        raise ValueError(f"Unknown padding, expected VALID, SAME or EXPLICIT. "
                         f"Received: padding={mode!r}")
    pads = []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


def out_spatial(spatial, kernel, strides, dilations, padding):
    return tuple(
        (size + lo + hi - (k - 1) * d - 1) // s + 1
        for size, k, s, d, (lo, hi) in zip(spatial, kernel, strides, dilations, padding)
    )


def pad_spatial(x, padding, value=0):
    """`x` (N, *spatial, C) with `padding`'s `(low, high)` rows of `value` on each spatial
    axis; `x` itself when there are none."""
    if not any(lo or hi for lo, hi in padding):
        return x
    return simd.pad(x, ((0, 0),) + tuple((int(lo), int(hi)) for lo, hi in padding) + ((0, 0),),
                    value)


def offset_slices(kernel, strides, dilations, out):
    """Per kernel offset (row-major): the index of its input rows in the padded input."""
    for offset in itertools.product(*(range(k) for k in kernel)):
        yield (slice(None),) + tuple(
            slice(i * d, i * d + o * s, s)
            for i, d, o, s in zip(offset, dilations, out, strides)
        ) + (slice(None),)


def scatter_windows(piece, input_shape, kernel, strides, dilations, padding, dtype):
    """Adjoint of windowing: add `piece(i)` (N, *out, C) at kernel offset i; crop the padding."""
    padded = np.zeros([input_shape[0]] + [size + lo + hi for size, (lo, hi) in zip(
        input_shape[1:-1], padding)] + [input_shape[-1]], dtype)
    out = out_spatial(input_shape[1:-1], kernel, strides, dilations, padding)
    for i, index in enumerate(offset_slices(kernel, strides, dilations, out)):
        padded[index] += piece(i)
    crop = tuple(slice(lo, lo + size) for size, (lo, _) in zip(input_shape[1:-1], padding))
    return padded[(slice(None),) + crop + (slice(None),)]


# -- conv kernels -------------------------------------------------------------------------

FEW_CHANNELS = 8
"""Inputs with fewer channels are windowed one kernel offset at a time (`_columns`,
`_columns_t`): each copy then moves whole rows, not runs of a few channels."""


def _work(dtype):
    """The dtype a conv accumulates in: float32 for floats up to 32 bits, else 64 bits."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.int64
    return np.float64 if dtype == np.float64 else np.float32


def _padded(x, kernel, strides, dilations, padding, dtype):
    """(x in `dtype` with its padding, the output's spatial shape): what im2col windows."""
    xp = pad_spatial(x.astype(dtype, copy=False), padding)
    return xp, out_spatial(x.shape[1:-1], kernel, strides, dilations, padding)


def _pointwise(kernel, strides, padding):
    """Whether a convolution is 1x1 with unit strides and no padding: its input is then
    its own im2col columns, and its input gradient the product alone (no scatter)."""
    return (all(k == 1 for k in kernel) and all(s == 1 for s in strides)
            and not any(lo or hi for lo, hi in padding))


def _columns(x, kernel, strides, dilations, padding, dtype):
    """im2col: (groups-merged) patches of shape (N * prod(out), prod(kernel), C); for a
    pointwise convolution a view of `x` (in `dtype`), without the copy."""
    if _pointwise(kernel, strides, padding):
        xp = x.astype(dtype, copy=False)
        return xp.reshape(-1, 1, x.shape[-1]), tuple(x.shape[1:-1])
    xp, out = _padded(x, kernel, strides, dilations, padding, dtype)
    if x.shape[-1] < FEW_CHANNELS:  # per-offset copies move longer contiguous runs
        slices = offset_slices(kernel, strides, dilations, out)
        cols = np.stack([xp[index] for index in slices], axis=-2)
        return cols.reshape(-1, math.prod(kernel), x.shape[-1]), out
    # A read-only (N, *out, *kernel, C) window view of xp, copied once into the columns.
    step, sc = xp.strides[1:-1], xp.strides[-1]
    windows = np.lib.stride_tricks.as_strided(
        xp, (xp.shape[0],) + tuple(out) + tuple(kernel) + (xp.shape[-1],),
        (xp.strides[0],) + tuple(t * s for t, s in zip(step, strides))
        + tuple(t * d for t, d in zip(step, dilations)) + (sc,), writeable=False)
    cols = np.empty((xp.shape[0],) + tuple(out) + tuple(kernel) + (xp.shape[-1],), xp.dtype)
    np.copyto(cols, windows)
    return cols.reshape(-1, math.prod(kernel), x.shape[-1]), out


def _columns_t(x, kernel, strides, dilations, padding, dtype):
    """im2col transposed, for few channels: (prod(kernel) * C, N * prod(out)), each kernel
    offset's shifted input one row per channel (offset-major, as the filter's (*K, C)
    axes). A filter gradient's product then reads contiguous rows: the tutorial CNN's
    first one (1 channel) took 1.05 ms through the transposed columns, 0.75 so."""
    xp, out = _padded(x, kernel, strides, dilations, padding, dtype)
    slices = list(offset_slices(kernel, strides, dilations, out))
    cols = np.empty((len(slices), x.shape[-1], x.shape[0]) + tuple(out), dtype)
    for i, index in enumerate(slices):
        np.copyto(cols[i], np.moveaxis(xp[index], -1, 0))
    return cols.reshape(len(slices) * x.shape[-1], -1)


def _grouped_columns(cols, groups):
    """(M, K, C) patches as (groups, M, K * C / groups)."""
    m, k, c = cols.shape
    return cols.reshape(m, k, groups, c // groups).transpose(2, 0, 1, 3).reshape(groups, m, -1)


def _grouped_filter(w, groups):
    """(*K, Cg, O) filter as (groups, K * Cg, O / groups)."""
    k, (cg, o) = math.prod(w.shape[:-2]), w.shape[-2:]
    return w.reshape(k, cg, groups, o // groups).transpose(2, 0, 1, 3).reshape(groups, k * cg, -1)


def _grouped_grads(dy, groups):
    """(N, *out, O) gradient as (groups, M, O / groups)."""
    return dy.reshape(-1, groups, dy.shape[-1] // groups).transpose(1, 0, 2)


def _conv(x, w, *, strides, dilations, padding):
    out = out_spatial(x.shape[1:-1], w.shape[:-2], strides, dilations, padding)
    shape = (x.shape[0],) + out + (w.shape[-1],)
    return cores.batchwise(functools.partial(_conv_batch, strides=strides, dilations=dilations,
                                             padding=padding),
                           (x, w), (True, False), shape, x.dtype, into=True,
                           macs=_macs(math.prod(shape), w.shape).amount)


def _conv_batch(x, w, *, strides, dilations, padding, out=None):
    """The convolution of a batch; `out`: a C-contiguous array of the result's shape and
    dtype to fill (the product writes straight into it when it has one group)."""
    work = _work(x.dtype)
    groups = x.shape[-1] // w.shape[-2]
    cols, spatial = _columns(x, w.shape[:-2], strides, dilations, padding, work)
    into = None
    if out is not None and groups == 1 and out.dtype == work and out.flags.c_contiguous:
        into = out.reshape((1, len(cols), w.shape[-1]))
    y = cores.matmul(_grouped_columns(cols, groups), _grouped_filter(w.astype(work), groups),
                     out=into)
    y = y.transpose(1, 0, 2).reshape((x.shape[0],) + spatial + (w.shape[-1],))
    if out is None:
        return y.astype(x.dtype, copy=False)
    if into is None:
        out[...] = y
    return out


def _conv_input_grad(w, dy, *, input_shape, strides, dilations, padding):
    input_shape = tuple(input_shape)
    kernel = functools.partial(_conv_input_grad_batch, strides=strides, dilations=dilations,
                               padding=padding)
    return cores.batchwise(lambda w, dy: kernel(w, dy, input_shape=(len(dy),) + input_shape[1:]),
                           (w, dy), (False, True), input_shape, w.dtype,
                           macs=_macs(dy.size, w.shape).amount)


def _conv_input_grad_batch(w, dy, *, input_shape, strides, dilations, padding):
    work, input_shape = _work(w.dtype), tuple(input_shape)
    kernel, (cg, o) = w.shape[:-2], w.shape[-2:]
    groups, k = input_shape[-1] // cg, math.prod(kernel)
    # One batched matmul straight into offset-major (K, groups, M, Cg) columns: each
    # offset's piece comes out contiguous (for one group) for the adds of the scatter.
    wk = w.astype(work, copy=False).reshape(k, cg, groups, o // groups).transpose(0, 2, 3, 1)
    dcols = cores.matmul(_grouped_grads(dy.astype(work, copy=False), groups), wk)
    if groups > 1:
        dcols = dcols.transpose(0, 2, 1, 3)
    dcols = dcols.reshape((k,) + dy.shape[:-1] + (input_shape[-1],))
    if _pointwise(kernel, strides, padding):   # one window per element: no scatter
        return dcols.reshape(input_shape).astype(w.dtype, copy=False)
    dx = scatter_windows(lambda i: dcols[i], input_shape, kernel, strides, dilations,
                         padding, work)
    return dx.astype(w.dtype, copy=False)


def _conv_filter_grad(x, dy, *, filter_shape, strides, dilations, padding):
    """The sum over the batch of each element's filter gradient: large batches as one
    partial sum per core, added in the accumulation dtype (`cores.batch_sum`)."""
    kernel = functools.partial(_conv_filter_grad_batch, filter_shape=tuple(filter_shape),
                               strides=strides, dilations=dilations, padding=padding)
    dw = cores.batch_sum(kernel, (x, dy), dy.size, _macs(dy.size, filter_shape).amount)
    return dw.astype(x.dtype, copy=False)


def _conv_filter_grad_batch(x, dy, *, filter_shape, strides, dilations, padding):
    """The filter gradient of a batch, in the accumulation dtype (`_work`)."""
    work = _work(x.dtype)
    kernel, (cg, o) = filter_shape[:-2], filter_shape[-2:]
    groups = x.shape[-1] // cg
    if groups == 1 and cg < FEW_CHANNELS:
        cols_t = _columns_t(x, kernel, strides, dilations, padding, work)
        return cores.matmul(cols_t, dy.astype(work, copy=False).reshape(-1, o)).reshape(
            filter_shape)
    cols, _ = _columns(x, kernel, strides, dilations, padding, work)
    cols = _grouped_columns(cols, groups).transpose(0, 2, 1)
    dw = cores.matmul(cols, _grouped_grads(dy.astype(work, copy=False), groups))
    dw = dw.reshape(groups, math.prod(kernel), cg, o // groups).transpose(1, 2, 0, 3)
    return dw.reshape(filter_shape)


# -- conv rules ---------------------------------------------------------------------------


def _check(x_shape, f_shape, dy_shape, params):
    """Validate a conv's operand shapes; returns its output shape."""
    if len(f_shape) != len(x_shape) or len(x_shape) < 3:
        raise ValueError(f"conv expected an input and filter of equal rank >= 3. "
                         f"Received: input={x_shape}, filter={f_shape}")
    cg, o = f_shape[-2:]
    groups = x_shape[-1] // cg if cg else 0
    if not groups or groups * cg != x_shape[-1] or o % groups:
        raise ValueError(
            "conv expected input channels = groups * filter input channels and output channels "
            f"divisible by groups. Received: input={x_shape}, filter={f_shape}")
    out = out_spatial(x_shape[1:-1], f_shape[:-2], params["strides"], params["dilations"],
                      params["padding"])
    y_shape = (x_shape[0],) + out + (o,)
    if min(out) < 0 or (dy_shape is not None and tuple(dy_shape) != y_shape):
        raise ValueError(f"conv expected an output of shape {y_shape}. Received: input="
                         f"{x_shape}, filter={f_shape}, gradient={dy_shape}, params={params}")
    return y_shape


def _conv_shape(in_types, **params):
    x, w = in_types
    return [TensorType(_check(x.shape, w.shape, None, params), x.dtype)]


def _conv_input_grad_shape(in_types, *, input_shape, **params):
    w, dy = in_types
    _check(tuple(input_shape), w.shape, dy.shape, params)
    return [TensorType(input_shape, w.dtype)]


def _conv_filter_grad_shape(in_types, *, filter_shape, **params):
    x, dy = in_types
    _check(x.shape, tuple(filter_shape), dy.shape, params)
    return [TensorType(filter_shape, x.dtype)]


def _macs(out_elements, filter_shape):
    """Multiply-accumulates of a conv: kernel volume times filter input channels per output."""
    return Work("amp", out_elements * math.prod(filter_shape[:-1]))


# -- planner problems: `groups` products of m x k by k x n, the groups in the channel axis;
# m is the field (batch x output positions), k kernel volume x input channels, n the output
# channels. An input's scale is its distinct elements per im2col element.


def _conv_problem(in_types, out, params):
    x, w = in_types
    cg, o = w.shape[-2:]
    groups = x.shape[-1] // cg
    m, k, n = out.size // o, math.prod(w.shape[:-1]), o // groups
    return dict(groups=groups, m=m, k=k, n=n, dtype=x.dtype, out_itemsize=out.itemsize,
                a_scale=min(1.0, x.size / (groups * m * k)), grouped_cols=True,
                window=_window(x.shape, out.shape, w.shape[:-2], params),
                kernel=tuple(w.shape[:-1]))


def _window(x_shape, out_shape, kernel, params):
    """The input window of a forward convolution, row-major from the batch: (output
    dims, input dims, dilated kernel extents, strides) over (batch, *spatial)."""
    extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, params["dilations"]))
    return ((out_shape[0],) + tuple(out_shape[1:-1]), (x_shape[0],) + tuple(x_shape[1:-1]),
            (1,) + extent, (1,) + tuple(params["strides"]))


def _conv_input_grad_problem(in_types, out, params):
    w, dy = in_types
    cg, o = w.shape[-2:]
    groups = out.shape[-1] // cg
    m, k, n = dy.size // o, o // groups, math.prod(w.shape[:-1])
    return dict(groups=groups, m=m, k=k, n=n, dtype=dy.dtype, out_itemsize=out.itemsize,
                grouped_cols=True, inputs=("b", "a"))


def _conv_filter_grad_problem(in_types, out, params):
    x, dy = in_types
    cg, o = out.shape[-2:]
    groups = x.shape[-1] // cg
    m, k, n = math.prod(out.shape[:-1]), dy.size // o, o // groups
    # A weight-update convolution: poplin copies its input, its output gradients and its
    # result into and out of the plan's layout (the planner's `_rearrangements`).
    return dict(groups=groups, m=m, k=k, n=n, dtype=x.dtype, out_itemsize=out.itemsize,
                a_scale=min(1.0, x.size / (groups * m * k)), grouped_cols=True,
                rearranged=("a", "b", "out"))


# -- strict tile rule "conv": batch and channels element for element, spatial axes whole
# (a superset of the windows); a grouped conv needs its channels whole.


def _only(shape, axis, out_axis):
    return tuple(out_axis if a == axis % len(shape) else FULL for a in range(len(shape)))


def _conv_tile_axes(shapes, out, params):
    (x, w), rank = shapes, len(out)       # (x, w) -> y: batch of x, output channels of w
    grouped = x[-1] != w[-2]
    return [_only(x, 0, 0), _only(w, -1, FULL if grouped else rank - 1)]


def _conv_input_grad_tile_axes(shapes, out, params):
    (w, dy), rank = shapes, len(out)      # (w, dy) -> dx: input channels of w, batch of dy
    grouped = out[-1] != w[-2]
    return [_only(w, -2, FULL if grouped else rank - 1), _only(dy, 0, 0)]


def _conv_filter_grad_tile_axes(shapes, out, params):
    (x, dy), rank = shapes, len(out)      # (x, dy) -> dw: channels of x and of dy
    grouped = x[-1] != out[-2]
    return [_only(x, -1, FULL if grouped else rank - 2), _only(dy, -1, rank - 1)]


register_op("conv", shape=_conv_shape, kernel=_conv, mapping="matmul",
            cost=lambda in_types, out_types, **_: _macs(out_types[0].size, in_types[1].shape),
            plan="conv", problem=_conv_problem, tile_rule="conv", tile_axes=_conv_tile_axes,
            function=True)
register_op("conv_input_grad", shape=_conv_input_grad_shape, kernel=_conv_input_grad,
            mapping="matmul",
            cost=lambda in_types, out_types, **_: _macs(in_types[1].size, in_types[0].shape),
            plan="conv", problem=_conv_input_grad_problem, tile_rule="conv",
            tile_axes=_conv_input_grad_tile_axes, function=True)
register_op("conv_filter_grad", shape=_conv_filter_grad_shape, kernel=_conv_filter_grad,
            mapping="matmul",
            cost=lambda in_types, out_types, **_: _macs(in_types[1].size, out_types[0].shape),
            plan="conv", problem=_conv_filter_grad_problem, tile_rule="conv",
            tile_axes=_conv_filter_grad_tile_axes, function=True)


# -- importers ----------------------------------------------------------------------------


def _params(node, layout, x_shape, f_shape):
    """strides, dilations and padding of a conv node, for a channels-last input shape."""
    kernel = tuple(f_shape[:-2])
    strides = layout.spatial(node.attr("strides"), "strides")
    dilations = layout.spatial(node.attr("dilations", [1] * layout.rank), "dilations")
    padding = layout.padding(x_shape[1:-1], kernel, strides, dilations)
    return {"strides": strides, "dilations": dilations, "padding": padding}


def _grouped(b, value, depthwise):
    """A depthwise `(..., C, M)` filter as the grouped `(..., 1, C * M)` filter."""
    if not depthwise:
        return value
    *kernel, c, m = value.type.shape
    return b.emit("reshape", [value], shape=(*kernel, 1, c * m))


def _grouped_shape(shape, depthwise):
    shape = tuple(int(d) for d in shape)
    return shape[:-2] + (1, shape[-2] * shape[-1]) if depthwise else shape


def _import_forward(depthwise):
    def importer(node, b):
        x, w = node.inputs
        layout = Layout(node, x.type.rank)
        f_shape = _grouped_shape(w.type.shape, depthwise)
        params = _params(node, layout, layout.last(x.type.shape), f_shape)
        y = b.emit("conv", [layout.to_last(b, x), _grouped(b, w, depthwise)], **params)
        return layout.to_first(b, y)

    return importer


def _import_input_grad(depthwise):
    def importer(node, b):
        _, w, dy = node.inputs
        layout = Layout(node, dy.type.rank)
        x_shape = layout.last(node.static(0))
        params = _params(node, layout, x_shape, _grouped_shape(w.type.shape, depthwise))
        dx = b.emit("conv_input_grad", [_grouped(b, w, depthwise), layout.to_last(b, dy)],
                    input_shape=x_shape, **params)
        return layout.to_first(b, dx)

    return importer


def _import_filter_grad(depthwise):
    def importer(node, b):
        x, _, dy = node.inputs
        layout = Layout(node, x.type.rank)
        x_shape, f_shape = layout.last(x.type.shape), tuple(int(d) for d in node.static(1))
        grouped = _grouped_shape(f_shape, depthwise)
        params = _params(node, layout, x_shape, grouped)
        dw = b.emit("conv_filter_grad", [layout.to_last(b, x), layout.to_last(b, dy)],
                    filter_shape=grouped, **params)
        return b.emit("reshape", [dw], shape=f_shape) if depthwise else dw

    return importer


for _tf_types, _make in (
    (("Conv2D", "Conv3D", "DepthwiseConv2dNative"), _import_forward),
    (("Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput"),
     _import_input_grad),
    (("Conv2DBackpropFilter", "Conv3DBackpropFilterV2", "DepthwiseConv2dNativeBackpropFilter"),
     _import_filter_grad),
):
    for _tf_type in _tf_types:
        tf_import(_tf_type)(_make(_tf_type.startswith("Depthwise")))
