"""`keras.ipu` and `tf.keras.ipu` (SDK 2.6+): `import ipu_keras` makes `ipu_keras.keras`
reachable under Graphcore's Keras spellings, whichever of Keras and ipu_keras was imported
first, without loading Keras or TensorFlow itself, and without a second copy of any
module (`keras.ipu is ipu_keras.keras`). Fresh interpreters check the import orders; the
in-process tests check the aliases and that Keras' modules keep their own spec and loader.
"""
import importlib
import subprocess
import sys
import textwrap

import keras
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src import keras_namespace


def _run(code):
    """Runs `code` in a fresh interpreter; returns its stdout lines (fails on an error)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_importing_ipu_keras_loads_neither_keras_nor_tensorflow():
    assert _run("""
        import sys
        import ipu_keras
        print("keras" in sys.modules, "tensorflow" in sys.modules)
    """) == ["False", "False"]


@pytest.mark.slow
def test_keras_imported_after_ipu_keras():
    """SDK 2.6 code: `from tensorflow import keras` then `keras.ipu.X`, and `tf.keras.ipu`."""
    assert _run("""
        import ipu_keras
        from tensorflow import keras
        import tensorflow as tf
        print(keras.ipu is ipu_keras.keras, tf.keras.ipu is ipu_keras.keras)
        print(keras.ipu.PipelineStage is ipu_keras.keras.PipelineStage)
        from tensorflow.keras.ipu import SequentialLayerPipelineStageAssignment as A
        print(A is ipu_keras.keras.SequentialLayerPipelineStageAssignment)
        import keras as plain
        print(plain.ipu is ipu_keras.keras, type(plain.__loader__).__name__)
    """) == ["True", "True", "True", "True", "True", "SourceFileLoader"]


@pytest.mark.slow
def test_keras_imported_before_ipu_keras():
    assert _run("""
        import keras
        import tensorflow as tf
        tf.keras.layers  # tf.keras loaded before ipu_keras too
        import ipu_keras
        print(keras.ipu is ipu_keras.keras, tf.keras.ipu is ipu_keras.keras)
        from keras.ipu.optimizers import ALSOptimizer
        print(ALSOptimizer is ipu_keras.optimizers.ALSOptimizer)
    """) == ["True", "True", "True"]


def test_keras_ipu_is_ipu_keras_keras():
    assert keras.ipu is ipu_keras.keras
    assert tf.keras.ipu is ipu_keras.keras
    from tensorflow import keras as tf_keras
    assert tf_keras.ipu is ipu_keras.keras
    assert keras.ipu.PipelineStage is ipu_keras.keras.PipelineStage
    assert keras.ipu.ReplicatedMetricReductionMethod.MEAN.value == "MEAN"


def test_import_statements_give_the_same_modules():
    import keras.ipu
    from keras.ipu import optimizers
    from keras.ipu.optimizers import GradientAccumulationOptimizer

    assert keras.ipu is ipu_keras.keras
    assert optimizers is ipu_keras.optimizers
    assert GradientAccumulationOptimizer is ipu_keras.optimizers.GradientAccumulationOptimizer
    assert sys.modules["keras.ipu.optimizers"] is ipu_keras.optimizers
    assert ipu_keras.keras.__spec__.name == "ipu_keras.keras"   # its own spec is kept
    assert ipu_keras.optimizers.__spec__.name == "ipu_keras.optimizers"


def test_keras_keeps_its_other_attributes_and_errors():
    assert keras.layers.Dense is not None
    with pytest.raises(AttributeError, match="module 'keras' has no attribute 'ipuu'"):
        keras.ipuu   # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("keras.ipu.no_such_module")


def test_install_twice_adds_one_finder():
    keras_namespace.install()
    finders = [f for f in sys.meta_path if type(f).__name__ == "_KerasIPUFinder"]
    assert len(finders) == 1
