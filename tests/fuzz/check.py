"""Runs a generated graph in TensorFlow and on the simulator and compares each result."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.config import reset_ipu_configuration
from ipu_keras.errors import IPUError
from tests.fuzz import strategies  # noqa: F401 (registers every fuzz op for `build`)
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
    got = [np.asarray(t) for t in ipu_keras.ipu_compiler.compile(fn, arrays)]
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
            T.propagated(facts.err).assert_close(g.astype(np.float64), e.astype(np.float64),
                                                 err_msg=where)


def _run_on_tiles(fn, arrays, tiles, strict):
    cfg = ipu_keras.config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = tiles
    cfg.ipu_model.strict_tile_mode = strict
    cfg.configure_ipu_system()
    try:
        return [np.asarray(t) for t in ipu_keras.ipu_compiler.compile(fn, arrays)]
    finally:
        reset_ipu_configuration()


def check_strict_mode(graph, tiles=8):
    """Asserts strict tile mode (each compute set replayed tile by tile) gives the same bits
    as the vectorised run of `graph` on a small target."""
    fn = build(graph)
    arrays = graph.arrays()
    try:
        vectorised = _run_on_tiles(fn, arrays, tiles, strict=False)
    except IPUError as e:
        # A graph the simulator rejects (an index out of range, as TensorFlow would) is
        # rejected in strict mode too, with the same designed error.
        with pytest.raises(type(e)):
            _run_on_tiles(fn, arrays, tiles, strict=True)
        return
    strict = _run_on_tiles(fn, arrays, tiles, strict=True)
    for index, v, s in zip(graph.outputs, vectorised, strict):
        np.testing.assert_array_equal(s, v, err_msg=f"v{index} = {graph.steps[index]!r}")
