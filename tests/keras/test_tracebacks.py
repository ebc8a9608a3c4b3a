"""An error in `fit` shows the user's frames, not the simulator's (`_src/keras/tracebacks.py`),
as Keras' own traceback filtering leaves out Keras' and TensorFlow's frames."""
import pathlib
import traceback

import keras
import numpy as np
import pytest

import ipu_keras

MACHINERY = str(pathlib.Path(ipu_keras.__file__).resolve().parent / "_src")


def _wrong_shape_fit():
    model = ipu_keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 4") \
            as info:
        model.fit(np.zeros((8, 5), np.float32), np.zeros((8, 3), np.float32), verbose=0)
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    return files, str(info.value)


def test_the_traceback_leaves_out_the_machinery():
    files, message = _wrong_shape_fit()
    assert files[0] == __file__
    inside = [f for f in files if f.startswith(MACHINERY)]
    assert inside == [str(pathlib.Path(MACHINERY) / "keras" / "tracebacks.py")]  # the re-raise
    assert not any("__autograph_generated_file" in f for f in files)
    # Nor does autograph's "in user code" listing in the message; Keras' frames stay.
    assert MACHINERY not in message and "in train_step" in message


def test_with_filtering_off_the_traceback_is_whole():
    keras.config.disable_traceback_filtering()
    try:
        files, _ = _wrong_shape_fit()
    finally:
        keras.config.enable_traceback_filtering()
    assert sum(f.startswith(MACHINERY) for f in files) >= 4    # trainer, program, tracer, ...
