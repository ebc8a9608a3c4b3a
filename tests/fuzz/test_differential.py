"""Randomized differential test: random small graphs on the simulator against TensorFlow.

Each example is a `Graph` (`tests/fuzz/graph.py`): a few inputs and up to six ops of
the elementwise, matmul, reduction, shape and indexing families chained together,
with random shapes (including size-1 and size-0 dimensions) and dtypes (float32,
float16, int32, bool). It is run eagerly by TensorFlow on the CPU and compiled and
run on the simulator through `ipu_keras.ipu_compiler.compile`, and every op's result
must agree: bit for bit where the error model (`tests/fuzz/facts.py`) proves the value
exact, within twice the propagated rounding-error bound otherwise. A second test runs
the same kind of graphs in strict tile mode (each compute set replayed tile by tile
from only the data the tile holds or receives), which must not change a bit.

In CI the examples are derandomized (a fixed seed) and bounded. For a longer,
randomly seeded local run set `IPU_KERAS_FUZZ_EXAMPLES`, e.g.

    IPU_KERAS_FUZZ_EXAMPLES=2000 PYTHONPATH=. nice python -m pytest tests/fuzz -q

A failing example prints as a small program (`v3 = matmul(v0, v2, ...)`); the graphs
found failing so far are pinned in `test_regressions.py`. Locally each test draws a
fresh random seed, the strict-mode test a third of the examples.
"""
import os

from hypothesis import HealthCheck, given, settings

from tests.fuzz.check import check_graph, check_strict_mode
from tests.fuzz.strategies import graphs

_LOCAL_EXAMPLES = os.environ.get("IPU_KERAS_FUZZ_EXAMPLES")
CI_EXAMPLES = 150


def fuzz_settings(ci_examples, share=1):
    """CI: a fixed seed and `ci_examples`; locally `IPU_KERAS_FUZZ_EXAMPLES // share`."""
    return settings(
        max_examples=int(_LOCAL_EXAMPLES) // share if _LOCAL_EXAMPLES else ci_examples,
        derandomize=_LOCAL_EXAMPLES is None,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )


@fuzz_settings(CI_EXAMPLES)
@given(graph=graphs())
def test_simulator_agrees_with_tensorflow(graph):
    check_graph(graph)


@fuzz_settings(CI_EXAMPLES // 3, share=3)
@given(graph=graphs())
def test_strict_tile_mode_matches_vectorised_run(graph):
    """The same graphs on an 8-tile target, replayed tile by tile: not one bit differs."""
    check_strict_mode(graph)
