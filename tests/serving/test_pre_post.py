"""Preprocessing and postprocessing run on the CPU around the IPU step: strings in,
numbers out, as in the SDK's examples; their signatures must chain exactly."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras import serving
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import ServingError

W = np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32)


@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
def predict_step(x):
    return tf.matmul(x, W)


def preprocessing_step(text):
    return tf.strings.to_number(text, tf.float32)


def postprocessing_step(logits):
    return tf.argmax(logits, axis=1, output_type=tf.int32), tf.reduce_max(logits, axis=1)


TEXT = [tf.TensorSpec([2, 4], tf.string)]
LOGITS = [tf.TensorSpec([2, 3], tf.float32)]


@pytest.fixture(scope="module")
def exported(one_ipu, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("prepost") / "model")
    runtime = serving.export_single_step(
        predict_step, path, 8, output_names=["label", "score"],
        preprocessing_step=preprocessing_step, preprocessing_step_signature=TEXT,
        postprocessing_step=postprocessing_step, postprocessing_step_signature=LOGITS)
    return path, runtime


def _want(text):
    return postprocessing_step(predict_step(preprocessing_step(text)))


def test_strings_in_postprocessed_numbers_out(exported):
    _, runtime = exported
    text = np.array([["1.5", "-2", "0.25", "3"], ["4", "0", "-1", "2.5"]])
    got = runtime(text)
    label, score = _want(text)
    np.testing.assert_array_equal(got["label"].numpy(), label.numpy())
    T.FLOAT32.assert_close(got["score"].numpy(), score.numpy())
    assert runtime.info["preprocessing"] and runtime.info["postprocessing"]
    assert [s.dtype for s in runtime.input_signature] == [tf.string]


def test_plain_tensorflow_runs_the_same_chain_on_the_cpu(exported):
    path, _ = exported
    text = tf.constant([["2", "2", "2", "2"], ["-1", "1", "-1", "1"]])
    got = tf.saved_model.load(path).signatures["serving_default"](text=text)
    label, score = _want(text)
    np.testing.assert_array_equal(got["label"].numpy(), label.numpy())
    T.FLOAT32.assert_close(got["score"].numpy(), score.numpy())


def test_preprocessing_outputs_must_match_the_step_signature(one_ipu, tmp_path):
    with pytest.raises(ServingError, match=r"`preprocessing_step` returned Tensor at "
                       r"position 0 does not match required `predict_step` TensorSpec"):
        serving.export_single_step(
            predict_step, str(tmp_path / "a"), 1, preprocessing_step=lambda t: tf.zeros([3, 4]),
            preprocessing_step_signature=TEXT)
    with pytest.raises(ServingError, match=r"number of the `preprocessing_step` outputs"):
        serving.export_single_step(
            predict_step, str(tmp_path / "b"), 1,
            preprocessing_step=lambda t: (tf.zeros([2, 4]), tf.zeros([2, 4])),
            preprocessing_step_signature=TEXT)


def test_postprocessing_signature_must_match_the_step_outputs(one_ipu, tmp_path):
    with pytest.raises(ServingError, match=r"`predict_step` returned Tensor at position 0 "
                       r"does not match required `postprocessing_step` TensorSpec"):
        serving.export_single_step(
            predict_step, str(tmp_path / "c"), 1, postprocessing_step=postprocessing_step,
            postprocessing_step_signature=[tf.TensorSpec([2, 5], tf.float32)])
