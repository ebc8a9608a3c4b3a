"""TensorFlow 1 pipelines: `pipelining_ops.pipeline` in a `tf.compat.v1` graph, compiled
with `ipu_compiler.compile` in `ipu_scope` and run by a `Session`, v2 behaviour off.

The scenarios run in a process of their own (`v1_driver.py`, `scenarios_pipelines.py`);
TensorFlow on the CPU running the same stage functions, without IPU code, is the oracle.
"""
import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from tests.tf1.v1_driver import drive


@pytest.fixture(scope="module")
def runs():
    return drive("scenarios_pipelines")


def test_training_pipeline_matches_accumulated_training_on_the_cpu(runs):
    ipu, cpu = runs["training"], runs["training_cpu"]
    # Stage 1 reshapes with a v1 Dimension (images.shape[0]); the buffers' shapes are
    # v1 TensorShapes: both once failed with "unhashable type: 'Dimension'".
    assert ipu["returned"] == "Operation"
    np.testing.assert_allclose(ipu["losses"], cpu["losses"], **T.FLOAT32.kwargs)
    assert sorted(ipu["weights"]) == sorted(cpu["weights"]) == [
        "FCModel/d1_b", "FCModel/d1_w", "FCModel/d2_b", "FCModel/d2_w"]
    for name, value in cpu["weights"].items():
        np.testing.assert_allclose(ipu["weights"][name], value, **T.FLOAT32.kwargs)
    assert ipu["num_ipus"] == 2 and ipu["cycles"] > 0


def test_training_outfeeds_the_unmasked_outputs_as_a_list(runs):
    masked, cpu = runs["masked_outputs"], runs["training_cpu"]
    assert masked["type"] == "list" and len(masked["losses"]) == 1    # [loss]; lr masked
    # Two micro-batches before the first update: the CPU's first two losses.
    np.testing.assert_allclose(masked["losses"][0], cpu["losses"][0][:2], **T.FLOAT32.kwargs)


def test_inference_last_stage_returning_a_list_outfeeds_a_list(runs):
    ipu, cpu = runs["inference"], runs["inference_cpu"]
    assert ipu["type"] == "list"
    np.testing.assert_allclose(ipu["logits"], cpu["logits"], **T.FLOAT32.kwargs)
    np.testing.assert_allclose(ipu["softmax"], cpu["softmax"], **T.FLOAT32.kwargs)
    # A last stage returning one tensor enqueues it as it is (SDK 3.x).
    np.testing.assert_allclose(ipu["single"], cpu["logits"][:4], **T.FLOAT32.kwargs)
