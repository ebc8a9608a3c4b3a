"""TensorFlow 1 corners: datasets made inside `ipu_scope`, replication with
`CrossReplicaOptimizer` over variables made inside the compiled function, the TF1
addons layers at `ipu_keras_addons.v1.layers`.

The scenarios run with v2 behaviour off in a process of their own
(`scenarios_corners.py`); TensorFlow on the CPU without IPU code is the oracle.
"""
import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import AddonsUnsupportedArgumentError
from tests.tf1.v1_driver import drive


@pytest.fixture(scope="module")
def runs():
    return drive("scenarios_corners")


def test_datasets_made_inside_ipu_scope_run_on_the_host(runs):
    got, cpu = runs["dataset_in_scope"], runs["dataset_cpu"]["batches"]
    # Behind an infeed: two loop iterations, two batches.
    np.testing.assert_allclose(got["outfeed"], cpu[:2], **T.FLOAT32_FEW_OPS.kwargs)
    # A one-shot iterator's get_next() captured by the compiled function is its input,
    # computed on the host at each run (it was compiled into the cluster and failed).
    np.testing.assert_allclose(got["captured"], cpu, **T.FLOAT32_FEW_OPS.kwargs)


def test_cross_replica_minimize_applies_the_mean_gradient_of_the_replicas(runs):
    got, cpu = runs["replicated"], runs["replicated_cpu"]
    # outfeed: [runs][iterations, replicas]
    np.testing.assert_allclose(got["losses"], cpu["losses"], **T.FLOAT32.kwargs)
    assert sorted(got["weights"]) == ["b", "w"]
    for name, value in cpu["weights"].items():
        np.testing.assert_allclose(got["weights"][name], value, **T.FLOAT32.kwargs)


def test_tf1_addons_layers_path_runs_popnn_lstm_as_keras_lstm(runs):
    got, cpu = runs["v1_lstm"], runs["v1_lstm_cpu"]
    # `from ipu_tensorflow_addons.v1 import layers` -> `from ipu_keras_addons.v1 import
    # layers`: time-major, (outputs, LSTMStateTuple(c, h)), trained by a TF1 optimizer.
    assert got["names"] == ["popnn_lstm/biases", "popnn_lstm/kernel",
                            "popnn_lstm/recurrent_kernel"]
    for key in ("outputs", "c", "h", "kernel"):
        np.testing.assert_allclose(got[key], cpu[key], **T.FLOAT32.kwargs)


@pytest.mark.parametrize("name", ["PopnnDynamicLSTM", "PopnnDynamicGRU", "PopnnAUGRU"])
def test_tf1_layers_not_simulated_are_refused_by_name(name):
    from ipu_keras_addons.v1 import layers

    with pytest.raises(AddonsUnsupportedArgumentError, match=f"{name} is not simulated"):
        getattr(layers, name)(8)
