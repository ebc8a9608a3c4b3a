"""Runs a generated graph in TensorFlow and on the simulator and compares each result."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras.errors import IPUError
from tests.fuzz import strategies  # noqa: F401 (registers every fuzz op for `build`)
from tests.fuzz.facts import tolerance
from tests.fuzz.graph import build


def check_graph(graph):
    """Asserts the simulator reproduces TensorFlow's result for every op of `graph`."""
    fn = build(graph)
    arrays = graph.arrays()
    try:
        expected = [np.asarray(t) for t in fn(*[tf.constant(a) for a in arrays])]
    except tf.errors.InvalidArgumentError as e:
        # The generator avoids what TensorFlow rejects; where it does not, our side must
        # reject it too, with a designed error rather than a numpy traceback.
        with pytest.raises(IPUError):
            ipu_keras.ipu_compiler.compile(fn, arrays)
            pytest.fail(f"TensorFlow rejects this graph ({e.message}); the simulator did not")
        return
    got = ipu_keras.ipu_compiler.compile(fn, arrays)
    assert len(got) == len(expected)
    for index, g, e in zip(graph.outputs, got, expected):
        facts = graph.facts[index]
        where = f"v{index} = {graph.steps[index]!r} ({facts})"
        assert g.shape == e.shape, f"{where}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype} != {e.dtype}"
        assert e.shape == facts.shape, f"{where}: the fuzzer expected shape {facts.shape}"
        if facts.exact:
            np.testing.assert_array_equal(g, e, err_msg=where)
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=0,
                                       atol=tolerance(facts), err_msg=where)
