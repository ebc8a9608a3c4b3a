"""`export_pipeline` (stages on their IPUs, one micro-batch per call) and `export_keras`
(the model's inference; `iterations` is its `steps_per_execution`)."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras.keras
from ipu_keras import ipu_strategy, serving
from ipu_keras._src import compat
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import PipelineError, ServingError
from tests.conftest import configured_ipus

W = np.random.default_rng(8).normal(size=(5, 4)).astype(np.float32)
SIGNATURE = [tf.TensorSpec([2, 5], tf.float32)]


def stage0(scale, x):
    return tf.matmul(x * scale, W)


def stage1(h):
    return tf.nn.softmax(h), tf.reduce_sum(h, axis=1)


@pytest.fixture(scope="module")
def two_ipus():
    yield from configured_ipus(2)


def test_a_pipeline_runs_its_stages_on_their_ipus(two_ipus, tmp_path):
    runtime = serving.export_pipeline([stage0, stage1], str(tmp_path / "p"), 4,
                                      inputs=[2.0], predict_step_signature=SIGNATURE)
    assert [s.name for s in runtime.input_signature] == ["x"]   # `inputs` are not fed
    assert runtime.executable.info["device_ipus"] == 2
    assert runtime.info["device_mapping"] == [0, 1]
    x = np.random.default_rng(1).normal(size=(2, 5)).astype(np.float32)
    got = runtime(x)
    want = stage1(stage0(2.0, x))
    for g, w in zip(got, want):
        T.FLOAT32.assert_close(g.numpy(), w.numpy())


def test_the_sdk_2_name_input_signature_still_works(two_ipus, tmp_path):
    compat.reset_warnings()
    with pytest.warns(DeprecationWarning, match=r"export_pipeline\(input_signature=\)"):
        runtime = serving.export_pipeline([stage0, stage1], str(tmp_path / "p"), 2,
                                          inputs=[1.0], input_signature=SIGNATURE)
    x = np.ones((2, 5), np.float32)
    T.FLOAT32.assert_close(runtime(x)[1].numpy(), stage1(stage0(1.0, x))[1].numpy())


def test_pipeline_depth_and_mapping_follow_the_pipeline_rules(two_ipus, tmp_path):
    with pytest.raises(PipelineError, match="must be a multiple of 2, but it is 3"):
        serving.export_pipeline([stage0, stage1], str(tmp_path / "a"), 3, inputs=[1.0],
                                predict_step_signature=SIGNATURE)
    with pytest.raises(ServingError, match=r"one per stage \(2\). Received: "
                       r"device_mapping=\[0\]"):
        serving.export_pipeline([stage0, stage1], str(tmp_path / "b"), 2, inputs=[1.0],
                                device_mapping=[0], predict_step_signature=SIGNATURE)
    with pytest.raises(ServingError, match="positive integer.*Received: iterations=0"):
        serving.export_pipeline([stage0, stage1], str(tmp_path / "c"), 0,
                                predict_step_signature=SIGNATURE)


def test_a_pipelined_keras_model_exports_its_stages(two_ipus, tmp_path):
    keras.utils.set_random_seed(4)
    with ipu_strategy.IPUStrategy().scope():
        inputs = keras.Input((6,), batch_size=2)
        with ipu_keras.keras.PipelineStage(0):
            hidden = keras.layers.Dense(5, activation="relu")(inputs)
        with ipu_keras.keras.PipelineStage(1):
            outputs = keras.layers.Dense(2)(hidden)
        model = keras.Model(inputs, outputs)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.compile(steps_per_execution=4)
    runtime = model.export_for_ipu_serving(str(tmp_path / "k"))   # the SDK 2.6+ method
    assert runtime.info["iterations"] == 4 and runtime.info["kind"] == "keras"
    x = np.random.default_rng(3).normal(size=(2, 6)).astype(np.float32)
    T.FLOAT32.assert_close(runtime(x)[0].numpy(), model(x, training=False).numpy())


@pytest.fixture(scope="module")
def ipu_model(one_ipu):
    keras.utils.set_random_seed(3)
    with ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(steps_per_execution=2)
    return model


def test_export_keras_gives_what_predict_gives(ipu_model, tmp_path):
    runtime = serving.export_keras(ipu_model, str(tmp_path / "k"), batch_size=4)
    assert [s.name for s in runtime.input_signature] == [ipu_model.inputs[0].name]
    assert runtime.info["iterations"] == 2 and runtime.info["kind"] == "keras"
    assert runtime.input_signature[0].shape.as_list() == [4, 6]
    x = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    (got,) = runtime(x)
    T.FLOAT32.assert_close(got.numpy(), ipu_model.predict(x, batch_size=4, verbose=0))


def test_export_keras_refuses_what_it_cannot_export(ipu_model, tmp_path):
    with pytest.raises(ServingError, match="Not all dimensions of inputs can be determined"):
        serving.export_keras(ipu_model, str(tmp_path / "a"))
    plain = keras.Sequential([keras.Input((3,), batch_size=2), keras.layers.Dense(1)])
    with pytest.raises(ServingError, match="not created inside an IPU strategy"):
        serving.export_keras(plain, str(tmp_path / "b"))
