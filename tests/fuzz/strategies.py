"""The hypothesis strategy of random graphs, drawn from every registered fuzz op."""
from hypothesis import strategies as st

from tests.fuzz import ops_elementwise, ops_index, ops_reduce, ops_shape  # noqa: F401 (register)
from tests.fuzz.graph import REGISTRY, Builder

INPUT_DTYPES = ("float32", "float16", "int32", "float32", "bool")
MAX_OPS = 6
_NAMES = sorted(REGISTRY)


def _op_name(x):
    """An op name from a drawn integer, hashed: hypothesis draws small integers (and
    `sampled_from` its first option) far more often than others, which would make one
    op dominate; hashing spreads those favourites over different ops."""
    return _NAMES[((x + 1) * 0x9E3779B97F4A7C15 >> 17) % len(_NAMES)]


@st.composite
def graphs(draw, max_ops=MAX_OPS):
    """A `Graph` of 1-2 inputs and 2-`max_ops` ops, each consuming earlier values.

    An op that does not apply to the values so far (or whose result could overflow)
    draws nothing; a few such misses are allowed before the graph is closed.
    """
    b = Builder(draw)
    for _ in range(draw(st.integers(1, 2))):
        b.fresh(b.shape(), b.choice(INPUT_DTYPES))
    target = draw(st.integers(2, max_ops))
    emitted = 0
    for _ in range(4 * target):
        if emitted == target:
            break
        draw_op = REGISTRY[_op_name(draw(st.integers(0, 2 ** 32 - 1)))][0]
        if draw_op(b) is not None:
            emitted += 1
    return b.graph()
