"""Op family 'image': resizing and space/batch rearrangements of images.

Owns the IR ops `resize_bilinear` and `resize_bilinear_grad` (channels-last images,
TensorFlow's corner and half-pixel conventions), and the importers of ResizeBilinear,
ResizeBilinearGrad, SpaceToBatchND and BatchToSpaceND. The last two (what TensorFlow
turns a dilated convolution into) need no op of their own: they import as a pad,
reshapes and a transpose, and reshapes, a transpose and a slice.

Kernels follow TensorFlow's CPU kernels: source coordinates and interpolation weights
in float32, `top + (bottom - top) * y_lerp` of the two horizontal interpolations, and
the gradient scattered pixel by pixel in the order the CPU kernel adds it.
"""
import math

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.array import ints, reshape
from ipu_keras._src.ops.indexing import strided_slice
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPES = ("ResizeBilinear", "ResizeBilinearGrad", "SpaceToBatchND", "BatchToSpaceND")
"""The TensorFlow op types this module imports."""

IR_OPS = ("resize_bilinear", "resize_bilinear_grad")
"""The IR ops this module registers."""

# -- bilinear resizing ---------------------------------------------------------------------


def _scale(in_size, out_size, align_corners):
    if align_corners and out_size > 1:
        return np.float32((in_size - 1) / np.float32(out_size - 1))
    return np.float32(in_size / np.float32(out_size))


def _weights(in_size, out_size, align_corners, half_pixel_centers):
    """(lower index, upper index, lerp) per output index, as TensorFlow computes them."""
    scale = _scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=np.float32)
    source = (i + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel_centers else i * scale
    floor = np.floor(source)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(source).astype(np.int64), in_size - 1)
    return lower, upper, (source - floor).astype(np.float32)


def _resize_shape(in_types, *, size, align_corners, half_pixel_centers):
    x = in_types[0]
    return [TensorType((x.shape[0], *size, x.shape[3]), "float32")]


def _resize_bilinear(x, *, size, align_corners, half_pixel_centers):
    x = x.astype(np.float32, copy=False)
    top, bottom, y_lerp = _weights(x.shape[1], size[0], align_corners, half_pixel_centers)
    left, right, x_lerp = _weights(x.shape[2], size[1], align_corners, half_pixel_centers)
    x_lerp, y_lerp = x_lerp[None, None, :, None], y_lerp[None, :, None, None]

    def row(index):
        r = x[:, index]
        return r[:, :, left] + (r[:, :, right] - r[:, :, left]) * x_lerp

    upper, lower = row(top), row(bottom)
    return upper + (lower - upper) * y_lerp


def _resize_grad_shape(in_types, *, input_shape, dtype, align_corners, half_pixel_centers):
    return [TensorType(tuple(input_shape), dtype)]


def _resize_bilinear_grad(dy, *, input_shape, dtype, align_corners, half_pixel_centers):
    """Float32 gradients `dy` scattered pixel by pixel into an image of `dtype`, summed
    in float32 (float64 for a float64 image) and rounded once, as TensorFlow does."""
    _, height, width, _ = input_shape
    top, bottom, y_lerp = _weights(height, dy.shape[1], align_corners, half_pixel_centers)
    left, right, x_lerp = _weights(width, dy.shape[2], align_corners, half_pixel_centers)
    work = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    dx = np.zeros(tuple(input_shape), work)
    one = np.float32(1)
    for y in range(dy.shape[1]):
        for x in range(dy.shape[2]):
            g, yl, xl = dy[:, y, x], y_lerp[y], x_lerp[x]
            dx[:, top[y], left[x]] += (g * (one - yl) * (one - xl)).astype(work)
            dx[:, top[y], right[x]] += (g * (one - yl) * xl).astype(work)
            dx[:, bottom[y], left[x]] += (g * yl * (one - xl)).astype(work)
            dx[:, bottom[y], right[x]] += (g * yl * xl).astype(work)
    return dx.astype(dtype, copy=False)


def _per_output(factor):
    return lambda in_types, out_types, **_: Work("vector", factor * out_types[0].size)


register_op("resize_bilinear", shape=_resize_shape, kernel=_resize_bilinear,
            cost=_per_output(6), mapping="linear")
register_op("resize_bilinear_grad", shape=_resize_grad_shape, kernel=_resize_bilinear_grad,
            cost=lambda in_types, out_types, **_: Work("vector", 8 * in_types[0].size),
            mapping="linear")


def _resize_params(node):
    return {"align_corners": bool(node.attr("align_corners", False)),
            "half_pixel_centers": bool(node.attr("half_pixel_centers", False))}


@tf_import("ResizeBilinear")
def _import_resize_bilinear(node, b):
    size = ints(node.static(1))
    return b.emit("resize_bilinear", [node.inputs[0]], size=size, **_resize_params(node))


@tf_import("ResizeBilinearGrad")
def _import_resize_bilinear_grad(node, b):
    dy, original = node.inputs
    return b.emit("resize_bilinear_grad", [dy], input_shape=original.type.shape,
                  dtype=original.type.dtype, **_resize_params(node))


# -- space to batch and back ---------------------------------------------------------------


def _block(node):
    return ints(node.static(1))


@tf_import("SpaceToBatchND")
def _import_space_to_batch(node, b):
    """[N, *spatial, *rest] padded, cut into blocks, block offsets moved to the batch."""
    x, block = node.inputs[0], _block(node)
    m = len(block)
    paddings = tuple(tuple(p) for p in np.asarray(node.static(2)).reshape(m, 2).tolist())
    if any(lo or hi for lo, hi in paddings):
        pads = ((0, 0),) + paddings + ((0, 0),) * (x.type.rank - 1 - m)
        x = b.emit("pad", [x, b.const(0, x.type.dtype)], paddings=pads, mode="constant")
    n, spatial, rest = x.type.shape[0], x.type.shape[1:m + 1], x.type.shape[m + 1:]
    split = [n] + [d for s, k in zip(spatial, block) for d in (s // k, k)] + list(rest)
    x = reshape(b, x, split)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, x.type.rank))
    x = b.emit("transpose", [x], perm=tuple(perm))
    return reshape(b, x, node.out_types[0].shape)


@tf_import("BatchToSpaceND")
def _import_batch_to_space(node, b):
    """The inverse: block offsets moved from the batch back into space, then cropped."""
    x, block = node.inputs[0], _block(node)
    m = len(block)
    crops = np.asarray(node.static(2)).reshape(m, 2).tolist()
    n, spatial, rest = x.type.shape[0], x.type.shape[1:m + 1], x.type.shape[m + 1:]
    batch = n // math.prod(block)
    x = reshape(b, x, list(block) + [batch] + list(spatial) + list(rest))
    perm = [m] + [d for i in range(m) for d in (m + 1 + i, i)]
    perm += list(range(2 * m + 1, x.type.rank))
    x = b.emit("transpose", [x], perm=tuple(perm))
    full = [s * k for s, k in zip(spatial, block)]
    x = reshape(b, x, [batch] + full + list(rest))
    begin = (0,) + tuple(lo for lo, _ in crops) + (0,) * len(rest)
    sizes = (batch,) + tuple(f - lo - hi for f, (lo, hi) in zip(full, crops)) + tuple(rest)
    return strided_slice(b, x, begin, sizes, (1,) * x.type.rank)
