"""The 'image' op family (bilinear resizing, space-to-batch and back) against TensorFlow."""
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import image
from tests.ops.harness import case, check_case, f32, grad, i32

raw = tf.raw_ops


def _resize(size, align_corners=False, half_pixel_centers=False):
    return lambda x: raw.ResizeBilinear(images=x, size=size, align_corners=align_corners,
                                        half_pixel_centers=half_pixel_centers)


def _resize_grad(original, align_corners=False, half_pixel_centers=False, dtype=tf.float32):
    return lambda g: raw.ResizeBilinearGrad(
        grads=g, original_image=tf.zeros(original, dtype), align_corners=align_corners,
        half_pixel_centers=half_pixel_centers)


RESIZE = [
    case("ResizeBilinear", _resize([6, 8]), f32(2, 3, 4, 2)),
    case("ResizeBilinear", _resize([6, 7], half_pixel_centers=True), f32(2, 3, 4, 3),
         label="half-pixel"),
    case("ResizeBilinear", _resize([5, 3], align_corners=True), f32(1, 3, 4, 2),
         label="align-corners"),
    case("ResizeBilinear", _resize([2, 3], half_pixel_centers=True), f32(2, 5, 7, 1),
         label="down"),
    case("ResizeBilinear", _resize([4, 4]), i32(1, 2, 2, 3), label="int32"),
    case("ResizeBilinear", lambda x: tf.image.resize(x, [7, 5]), f32(2, 3, 4, 2),
         label="tf-image"),
    case("ResizeBilinearGrad", _resize_grad([2, 3, 4, 2]), f32(2, 6, 8, 2)),
    case("ResizeBilinearGrad", _resize_grad([2, 3, 4, 1], half_pixel_centers=True),
         f32(2, 7, 9, 1), label="half-pixel"),
    case("ResizeBilinearGrad", _resize_grad([1, 3, 4, 2], align_corners=True),
         f32(1, 5, 3, 2), label="align-corners"),
    case("ResizeBilinearGrad", _resize_grad([2, 5, 7, 2], half_pixel_centers=True),
         f32(2, 2, 3, 2), label="down"),
    case("ResizeBilinearGrad", _resize_grad([1, 3, 4, 2], half_pixel_centers=True,
                                            dtype=tf.float16),
         f32(1, 6, 8, 2), label="float16", tolerance=T.EXACT),
    case("ResizeBilinearGrad", grad(lambda x: tf.image.resize(x, [6, 5]), 0),
         f32(2, 3, 4, 2), label="tf-image"),
]


def _s2b(block, paddings):
    return lambda x: raw.SpaceToBatchND(input=x, block_shape=block, paddings=paddings)


def _b2s(block, crops):
    return lambda x: raw.BatchToSpaceND(input=x, block_shape=block, crops=crops)


SPACE = [
    case("SpaceToBatchND", _s2b([2, 2], [[0, 0], [0, 0]]), f32(2, 4, 6, 3)),
    case("SpaceToBatchND", _s2b([2, 3], [[1, 1], [2, 1]]), f32(2, 4, 3, 2), label="padded"),
    case("SpaceToBatchND", _s2b([2], [[1, 2]]), i32(3, 5, 2), label="1d-int32"),
    case("SpaceToBatchND", _s2b([2], [[0, 0]]), f32(2, 4, 3, 2), label="rest-dims"),
    case("BatchToSpaceND", _b2s([2, 2], [[0, 0], [0, 0]]), f32(8, 2, 3, 3)),
    case("BatchToSpaceND", _b2s([2, 3], [[1, 0], [2, 1]]), f32(12, 3, 2, 2), label="cropped"),
    case("BatchToSpaceND", _b2s([3], [[1, 1]]), i32(6, 4, 2), label="1d-int32"),
    case("SpaceToBatchND", lambda x, w: tf.nn.atrous_conv2d(x, w, 2, "SAME"),
         f32(2, 7, 7, 3), f32(3, 3, 3, 4), label="atrous"),
    case("BatchToSpaceND", grad(lambda x, w: tf.nn.atrous_conv2d(x, w, 2, "VALID")),
         f32(2, 8, 7, 3), f32(2, 2, 3, 4), label="atrous-grad"),
]

CASES = RESIZE + SPACE


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(image.TF_TYPES) <= {c.tf_op for c in CASES}
