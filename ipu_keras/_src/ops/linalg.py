"""Op family 'linalg': diagonals and bands of (batches of) matrices.

Owns the IR ops `matrix_diag` (diagonals to a matrix filled with a padding value),
`matrix_diag_part` (a matrix's diagonals, padded to the longest), `matrix_set_diag`
(a matrix with diagonals replaced) and `band_part` (a matrix with everything outside
a band zeroed), and the TensorFlow importers of every version of MatrixDiag,
MatrixDiagPart, MatrixSetDiag and of MatrixBandPart. Diagonals are numbered as in
TensorFlow: `d > 0` above the main diagonal; a range `k = (low, high)` stacks
diagonals high..low on the second-to-last axis, each shorter one aligned left or
right within the longest as `align` says (superdiagonal side first, as
"RIGHT_LEFT"). `k`, the output size and the band limits are static params.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import per_output_element
from ipu_keras._src.ops.array import ints
from ipu_keras._src.ops.registry import register_op, tf_import

TF_TYPES = (
    "MatrixDiag", "MatrixDiagV2", "MatrixDiagV3", "MatrixDiagPart", "MatrixDiagPartV2",
    "MatrixDiagPartV3", "MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3",
    "MatrixBandPart",
)
"""The TensorFlow op types this module imports."""

IR_OPS = ("matrix_diag", "matrix_diag_part", "matrix_set_diag", "band_part")
"""The IR ops this module registers."""

ALIGNS = ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT")
_copy_cost = per_output_element("copy")


def _length(rows, cols, d):
    return min(rows + min(d, 0), cols - max(d, 0))


def _max_length(rows, cols, k):
    return max(_length(rows, cols, d) for d in range(k[0], k[1] + 1))


def _diagonals(rows, cols, k, align):
    """Per diagonal, in TensorFlow's order (k[1] down to k[0]):
    (row in the stacked diagonals, element rows, element columns, slice of the row)."""
    super_left, sub_left = (side == "LEFT" for side in align.split("_"))
    longest = _max_length(rows, cols, k)
    for index, d in enumerate(range(k[1], k[0] - 1, -1)):
        n = _length(rows, cols, d)
        left = (d >= 0 and super_left) or (d <= 0 and sub_left)
        start = 0 if left else longest - n
        yield index, np.arange(n) + max(-d, 0), np.arange(n) + max(d, 0), slice(start, start + n)


def _stacked(diagonal, k):
    """Diagonals with the diagonal axis, which a single diagonal (k[0] == k[1]) lacks."""
    return diagonal[..., None, :] if k[0] == k[1] else diagonal


def _unstacked(stacked, k):
    return stacked[..., 0, :] if k[0] == k[1] else stacked


# -- matrix_diag ---------------------------------------------------------------------------


def _diag_shape(in_types, *, k, rows, cols, align):
    diagonal = in_types[0]
    batch = diagonal.shape[:-1] if k[0] == k[1] else diagonal.shape[:-2]
    return [TensorType(batch + (rows, cols), diagonal.dtype)]


def _matrix_diag(diagonal, padding, *, k, rows, cols, align):
    stacked = _stacked(diagonal, k)
    out = np.full(stacked.shape[:-2] + (rows, cols), padding, diagonal.dtype)
    for index, r, c, part in _diagonals(rows, cols, k, align):
        out[..., r, c] = stacked[..., index, part]
    return out


register_op("matrix_diag", shape=_diag_shape, kernel=_matrix_diag, cost=_copy_cost,
            mapping="linear")


# -- matrix_diag_part ----------------------------------------------------------------------


def _diag_part_shape(in_types, *, k, align):
    x = in_types[0]
    rows, cols = x.shape[-2:]
    count = () if k[0] == k[1] else (k[1] - k[0] + 1,)
    return [TensorType(x.shape[:-2] + count + (_max_length(rows, cols, k),), x.dtype)]


def _matrix_diag_part(x, padding, *, k, align):
    rows, cols = x.shape[-2:]
    out = np.full(x.shape[:-2] + (k[1] - k[0] + 1, _max_length(rows, cols, k)), padding,
                  x.dtype)
    for index, r, c, part in _diagonals(rows, cols, k, align):
        out[..., index, part] = x[..., r, c]
    return _unstacked(out, k)


register_op("matrix_diag_part", shape=_diag_part_shape, kernel=_matrix_diag_part,
            cost=_copy_cost, mapping="linear")


# -- matrix_set_diag -----------------------------------------------------------------------


def _matrix_set_diag(x, diagonal, *, k, align):
    out = np.array(x, copy=True)
    stacked = _stacked(diagonal, k)
    for index, r, c, part in _diagonals(*x.shape[-2:], k, align):
        out[..., r, c] = stacked[..., index, part]
    return out


register_op("matrix_set_diag", shape=lambda in_types, **_: [in_types[0]],
            kernel=_matrix_set_diag, cost=_copy_cost, mapping="linear")


# -- band_part -----------------------------------------------------------------------------


def _band_part(x, *, lower, upper):
    """Keeps x[..., i, j] where (lower < 0 or i - j <= lower) and (upper < 0 or j - i <= upper)."""
    i = np.arange(x.shape[-2])[:, None]
    j = np.arange(x.shape[-1])[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return np.where(keep, x, np.zeros((), x.dtype))


register_op("band_part", shape=lambda in_types, **_: [in_types[0]], kernel=_band_part,
            cost=_copy_cost, mapping="linear")


# -- importers -----------------------------------------------------------------------------


def _k(node, i):
    k = ints(node.static(i))
    return (k[0], k[0]) if len(k) == 1 else (k[0], k[1])


def _align(node):
    """V3 ops name their alignment; V2 ops always align left; V1 ops have one diagonal."""
    align = str(node.attr("align", "RIGHT_LEFT" if node.type.endswith("V3") else "LEFT_LEFT"))
    if align not in ALIGNS:
        raise ValueError(f"'{node.name}' expected align in {ALIGNS}. Received: align={align!r}")
    return align


def _zero(b, x):
    return b.const(0, x.type.dtype)


@tf_import("MatrixDiag", "MatrixDiagV2", "MatrixDiagV3")
def _import_matrix_diag(node, b):
    diagonal = node.inputs[0]
    rows, cols = node.out_types[0].shape[-2:]
    if node.type == "MatrixDiag":
        return b.emit("matrix_diag", [diagonal, _zero(b, diagonal)], k=(0, 0), rows=rows,
                      cols=cols, align="LEFT_LEFT")
    return b.emit("matrix_diag", [diagonal, node.inputs[4]], k=_k(node, 1), rows=rows,
                  cols=cols, align=_align(node))


@tf_import("MatrixDiagPart", "MatrixDiagPartV2", "MatrixDiagPartV3")
def _import_matrix_diag_part(node, b):
    x = node.inputs[0]
    if node.type == "MatrixDiagPart":
        return b.emit("matrix_diag_part", [x, _zero(b, x)], k=(0, 0), align="LEFT_LEFT")
    return b.emit("matrix_diag_part", [x, node.inputs[2]], k=_k(node, 1), align=_align(node))


@tf_import("MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3")
def _import_matrix_set_diag(node, b):
    x, diagonal = node.inputs[:2]
    k = (0, 0) if node.type == "MatrixSetDiag" else _k(node, 2)
    align = "LEFT_LEFT" if node.type == "MatrixSetDiag" else _align(node)
    return b.emit("matrix_set_diag", [x, diagonal], k=k, align=align)


@tf_import("MatrixBandPart")
def _import_band_part(node, b):
    lower, upper = (int(np.asarray(node.static(i))) for i in (1, 2))
    return b.emit("band_part", [node.inputs[0]], lower=lower, upper=upper)
