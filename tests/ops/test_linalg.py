"""The 'linalg' op family (matrix diagonals and bands) against TensorFlow."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.ops import linalg
from tests.ops.harness import case, check_case, f32, grad, i32

raw = tf.raw_ops


def _diag(k, rows=-1, cols=-1, align="RIGHT_LEFT", padding=0.0):
    return lambda d: raw.MatrixDiagV3(diagonal=d, k=k, num_rows=rows, num_cols=cols,
                                      padding_value=tf.cast(padding, d.dtype), align=align)


def _diag_part(k, align="RIGHT_LEFT", padding=0.0):
    return lambda x: raw.MatrixDiagPartV3(input=x, k=k, padding_value=tf.cast(padding, x.dtype),
                                          align=align)


def _set_diag(k, align="RIGHT_LEFT"):
    return lambda x, d: raw.MatrixSetDiagV3(input=x, diagonal=d, k=k, align=align)


DIAG = [
    case("MatrixDiag", lambda d: raw.MatrixDiag(diagonal=d), f32(2, 3)),
    case("MatrixDiagV2", lambda d: raw.MatrixDiagV2(diagonal=d, k=[-1, 1], num_rows=-1,
                                                    num_cols=-1, padding_value=7.0),
         f32(2, 3, 3)),
    case("MatrixDiagV3", _diag(0), f32(4)),
    case("MatrixDiagV3", lambda x: tf.eye(4, dtype=tf.float32) * x, f32(4, 4), label="eye"),
    case("MatrixDiagV3", _diag(1, padding=-1.0), f32(2, 3), label="k1-padding"),
    case("MatrixDiagV3", _diag(-2, rows=5, cols=4), i32(2, 3), label="k-2-rect-int32"),
    case("MatrixDiagV3", _diag([-1, 2]), f32(2, 4, 3), label="band-right-left"),
    case("MatrixDiagV3", _diag([-1, 1], rows=3, cols=4, align="LEFT_RIGHT"), f32(3, 3),
         label="band-left-right"),
    case("MatrixDiagV3", grad(_diag([-1, 1]), 0), f32(2, 3, 3), label="grad"),
]

DIAG_PART = [
    case("MatrixDiagPart", lambda x: raw.MatrixDiagPart(input=x), f32(2, 3, 4)),
    case("MatrixDiagPartV2", lambda x: raw.MatrixDiagPartV2(input=x, k=[-1, 1],
                                                            padding_value=9.0), f32(3, 4)),
    case("MatrixDiagPartV3", _diag_part(0), f32(3, 3)),
    case("MatrixDiagPartV3", _diag_part(2, padding=3.0), f32(2, 4, 5), label="k2"),
    case("MatrixDiagPartV3", _diag_part([-2, 1], padding=-5.0), f32(4, 3), label="band"),
    case("MatrixDiagPartV3", _diag_part([-1, 2], align="LEFT_LEFT"), i32(2, 3, 5),
         label="band-left-left-int32"),
    case("MatrixDiagPartV3", grad(_diag_part([-1, 1]), 0), f32(2, 3, 4), label="grad"),
    case("MatrixDiagPartV3", lambda x: tf.linalg.diag_part(x), f32(4, 4), label="keras"),
]

SET_DIAG = [
    case("MatrixSetDiag", lambda x, d: raw.MatrixSetDiag(input=x, diagonal=d), f32(3, 4),
         f32(3)),
    case("MatrixSetDiagV2", lambda x, d: raw.MatrixSetDiagV2(input=x, diagonal=d, k=[0, 1]),
         f32(3, 3), f32(2, 3)),
    case("MatrixSetDiagV3", _set_diag(0), f32(2, 3, 3), f32(2, 3)),
    case("MatrixSetDiagV3", lambda x: tf.eye(4, 3, dtype=tf.float32) * x, f32(4, 3),
         label="eye-rect"),
    case("MatrixSetDiagV3", _set_diag([-1, 1], align="RIGHT_RIGHT"), f32(4, 3), f32(3, 3),
         label="band-right-right"),
    case("MatrixSetDiagV3", grad(_set_diag([-1, 0]), 0, 1), f32(2, 3, 4), f32(2, 2, 3),
         label="grad"),
]

BAND = [
    case("MatrixBandPart", lambda x: tf.linalg.band_part(x, -1, 0), f32(4, 4)),
    case("MatrixBandPart", lambda x: tf.linalg.band_part(x, 1, 2), f32(2, 4, 5), label="band"),
    case("MatrixBandPart", lambda x: tf.linalg.band_part(x, 0, -1), i32(3, 5), label="int32"),
    case("MatrixBandPart", grad(lambda x: tf.linalg.band_part(x, 1, 0), 0), f32(3, 3),
         label="grad"),
]

CASES = DIAG + DIAG_PART + SET_DIAG + BAND


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(linalg.TF_TYPES) <= {c.tf_op for c in CASES}


def test_single_diagonal_round_trip():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    part = linalg._matrix_diag_part(x, np.float32(0), k=(1, 1), align="RIGHT_LEFT")
    np.testing.assert_array_equal(part, [1, 6, 11])
