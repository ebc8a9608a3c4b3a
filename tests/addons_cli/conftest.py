"""Small SavedModels shared by the `ipu_saved_model_cli` tests (written once per session
into a temporary directory, never committed)."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

RNG = np.random.default_rng(13)


@pytest.fixture(scope="session")
def saved_models(tmp_path_factory):
    return tmp_path_factory.mktemp("saved_models")


@pytest.fixture(scope="session")
def mlp_dir(saved_models):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((6,), name="features"),
                              keras.layers.Dense(16, activation="relu", name="hidden"),
                              keras.layers.Dense(3, name="logits")])
    path = str(saved_models / "mlp")
    model.export(path, verbose=False)
    return path


@pytest.fixture(scope="session")
def cnn_dir(saved_models):
    keras.utils.set_random_seed(2)
    model = keras.Sequential([
        keras.Input((8, 8, 2), name="image"),
        keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
        keras.layers.MaxPooling2D(name="pool"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(10, activation="softmax", name="classifier")])
    path = str(saved_models / "cnn")
    model.export(path, verbose=False)
    return path


class _GeluModel(tf.Module):
    """x -> dense -> erf-GELU (written out op by op, as BERT's graphs have it) -> dense."""

    def __init__(self):
        super().__init__()
        self.w1 = tf.Variable(RNG.normal(size=(5, 7)).astype(np.float32))
        self.w2 = tf.Variable(RNG.normal(size=(7, 2)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
    def __call__(self, x):
        with tf.name_scope("intermediate"):
            h = tf.matmul(x, self.w1, name="BiasAdd")
            cdf = 0.5 * (1.0 + tf.math.erf(h / tf.constant(math.sqrt(2.0)), name="Erf"))
            g = tf.multiply(h, cdf, name="gelu_mul")
        with tf.name_scope("output"):
            return {"y": tf.matmul(g, self.w2, name="MatMul")}


def _save_module(module, path):
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__})
    return str(path)


@pytest.fixture(scope="session")
def gelu_dir(saved_models):
    return _save_module(_GeluModel(), saved_models / "gelu")


class _Int64Model(tf.Module):
    """int64 ids -> embedding rows, scaled by a float input; returns floats and int64s."""

    def __init__(self):
        super().__init__()
        self.table = tf.Variable(RNG.normal(size=(10, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.int64, name="ids"),
                                  tf.TensorSpec([None, 1], tf.float32, name="scale")])
    def __call__(self, ids, scale):
        rows = tf.gather(self.table, ids)
        shifted = ids + tf.constant(1, tf.int64)
        return {"vectors": tf.reduce_sum(rows, axis=1) * scale, "shifted": shifted}


@pytest.fixture(scope="session")
def int64_dir(saved_models):
    return _save_module(_Int64Model(), saved_models / "int64")


@pytest.fixture(scope="session")
def image_file(saved_models):
    path = str(saved_models / "image.npy")
    np.save(path, RNG.random((4, 8, 8, 2), dtype=np.float32))
    return path


@pytest.fixture(scope="session")
def features_file(saved_models):
    path = str(saved_models / "features.npy")
    np.save(path, RNG.normal(size=(5, 6)).astype(np.float32))
    return path
