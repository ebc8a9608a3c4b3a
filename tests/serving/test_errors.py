"""Misuse of `ipu.serving` gets the SDK's errors (ValueError / TypeError subclasses that
name the value received), before anything is written."""
import os

import numpy as np
import pytest
import tensorflow as tf

from ipu_keras import serving
from ipu_keras.errors import ServingError, ServingTypeError

SPEC = tf.TensorSpec([2, 3], tf.float32)


def plain(x):
    return x * 2.0


@tf.function
def no_signature(x):
    return x * 2.0


@tf.function(input_signature=[SPEC])
def with_signature(x):
    return x * 2.0


def test_a_non_empty_export_dir_is_refused_unless_purged(one_ipu, tmp_path):
    (tmp_path / "old.txt").write_text("keep")
    with pytest.raises(ServingError, match=r'Directory ".*" is not empty\. Please specify an '
                       r"empty directory"):
        serving.export_single_step(with_signature, str(tmp_path), 1)
    assert os.listdir(tmp_path) == ["old.txt"]
    runtime = serving.export_single_step(with_signature, str(tmp_path), 1,
                                         purge_export_dir=True)
    assert "old.txt" not in os.listdir(tmp_path)
    np.testing.assert_array_equal(runtime(np.ones((2, 3), np.float32))[0].numpy(), 2.0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"predict_step": plain}, ServingError,
     r"deduction from given `predict_step` is not possible.*or `input_dataset`"),
    ({"predict_step": no_signature}, ServingError,
     r"Empty `input_signature` inside provided tf.function `predict_step`"),
    ({"predict_step": plain, "predict_step_signature": [SPEC],
      "input_dataset": tf.data.Dataset.from_tensors(tf.zeros([2, 3]))}, ServingError,
     r"Both `predict_step_signature` and `input_dataset` cannot be provided"),
    ({"predict_step": plain, "predict_step_signature": SPEC}, ServingTypeError,
     r"`predict_step_signature` must be an instance of tuple or list"),
    ({"predict_step": plain, "predict_step_signature": []}, ServingError,
     r"`predict_step_signature` must be not empty"),
    ({"predict_step": plain, "predict_step_signature": [SPEC, (2, 3)]}, ServingTypeError,
     r"`predict_step_signature\[1\]` is not an instance of TensorSpec"),
    ({"predict_step": plain, "input_dataset": [1, 2]}, ServingTypeError,
     r"`input_dataset` is provided, it should be an instance of tf.Dataset"),
    ({"predict_step": plain, "predict_step_signature": [SPEC, SPEC]}, ServingError,
     r"Length of input_signature does not match the number of `predict_step` arguments"),
    ({"predict_step": with_signature, "output_names": ("a",)}, ServingTypeError,
     r"output_names must be either a string or a list"),
    ({"predict_step": with_signature, "output_names": ["a", "b"]}, ServingError,
     r"Length of output_names does not match the number of results"),
    ({"predict_step": with_signature, "iterations": True}, ServingError,
     r"`iterations` to be a positive integer.*Received: iterations=True"),
    ({"predict_step": plain, "predict_step_signature": [tf.TensorSpec([None, 3])]},
     ServingError, r"static shapes"),
    ({"predict_step": with_signature, "preprocessing_step": plain}, ServingError,
     r"deduction from given `preprocessing_step` is not possible"),
    ({"predict_step": plain, "preprocessing_step": with_signature}, ServingError,
     r"deduction from given `predict_step` is not possible.*`predict_step_signature`\."),
    ({"predict_step": with_signature, "postprocessing_step": plain}, ServingError,
     r"deduction from given `postprocessing_step` is not possible"),
])
def test_signature_misuse_is_refused_with_the_sdk_rule(one_ipu, tmp_path, kwargs, error,
                                                        message):
    kwargs = dict({"iterations": 1}, **kwargs)
    with pytest.raises(error, match=message):
        serving.export_single_step(export_dir=str(tmp_path / "out"), **kwargs)
    assert not os.path.exists(tmp_path / "out" / "saved_model.pb")


def test_errors_are_value_and_type_errors_as_in_the_sdk():
    assert issubclass(ServingError, ValueError) and issubclass(ServingTypeError, TypeError)


def test_loading_a_directory_that_is_not_an_export_says_so(tmp_path):
    with pytest.raises(ServingError, match=r"no such file.*ipu_saved_model_cli run"):
        serving.load(str(tmp_path))
    assert not serving.is_serving_export(str(tmp_path))


def test_an_export_of_graphcores_sdk_is_refused_clearly(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "application_1234.popef").write_bytes(b"POPEF")
    with pytest.raises(ServingError, match=r"'application_1234.popef', a Poplar executable "
                       r"made by Graphcore's SDK"):
        serving.load(str(tmp_path))
