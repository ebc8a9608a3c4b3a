"""The seeds' TensorFlow 1 listings run with only their import lines changed.

Each driver runs in its own process (the listings assume TF1 behaviour, which
`disable_v2_behavior` switches on process-wide) and prints JSON; TensorFlow on the CPU
running the same graph functions is the oracle (in float32 for the float16 ResNeXt).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T

HERE = os.path.dirname(os.path.abspath(__file__))


def _drive(which):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(HERE))
    env["PYTHONPATH"] = os.pathsep.join([root, HERE, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, os.path.join(HERE, "listing_driver.py"), which],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def tutorials():
    return _drive("tutorials")


def test_basic_graph_prints_the_cpu_result(tutorials):
    basic = tutorials["tutorial_basic.py"]
    np.testing.assert_array_equal(basic["result"], basic["cpu"])
    assert basic["printed"] == "[3. 8.]"


def test_compiled_graph_returns_a_one_element_list(tutorials):
    xla = tutorials["tutorial_xla_compile.py"]
    assert len(xla["result"]) == 1
    np.testing.assert_array_equal(xla["result"][0], xla["cpu"])
    assert xla["printed"] == "[array([3., 8.], dtype=float32)]"


def test_four_shard_graph_gives_4_14(tutorials):
    sharded = tutorials["tutorial_sharding.py"]
    np.testing.assert_array_equal(sharded["result"][0], sharded["cpu"])
    assert sharded["printed"] == "[array([ 4., 14.], dtype=float32)]"


def test_resnext_inference_matches_tensorflow_on_the_cpu():
    result = _drive("resnext")
    outfed, twin = np.asarray(result["outfed"]), np.asarray(result["cpu_float32"])
    # BATCHES_PER_STEP=2 enqueues of [BATCH_SIZE=1, 1000] logits, one input repeated.
    assert outfed.shape == (2, 1, 1000)
    for step in outfed:
        T.MIXED_RESNEXT.assert_close_at_scale(step, twin)
    assert result["conv_options"]["availableMemoryProportion"] == "0.3"
    assert result["steps"] == 2
    assert "Throughput" in result["printed"]
