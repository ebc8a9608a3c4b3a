"""SerialDense's temporary memory on the device falls as its serialization factor grows
(the pieces are separate, smaller matmuls), at the price of more cycles.

`python -m tests.addons.test_serial_dense_memory` prints the figures of docs/addons.md.
"""
import numpy as np
import pytest
import keras

import ipu_keras as ipu
from ipu_keras_addons.keras import layers as ipu_layers

pytestmark = pytest.mark.slow

BATCH, IN, UNITS = 64, 256, 512


def measure(dimension, factor, train=False):
    """(temporary bytes, total cycles) of one step of a one-SerialDense model."""
    model = ipu.Sequential([keras.Input((IN,)),
                            ipu_layers.SerialDense(UNITS, factor, dimension)])
    model.compile("sgd", "mse", steps_per_execution=1)
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, IN), dtype=np.float32)
    if train:
        model.fit(x, rng.random((BATCH, UNITS), dtype=np.float32), batch_size=BATCH,
                  verbose=0)
        program = model.train_function.last_program
    else:
        model.predict(x, batch_size=BATCH, verbose=0)
        program = model.predict_function.last_program
    memory = program.executable.memory
    return memory["categories"]["temporaries"], model.ipu_report()["total_cycles"]


@pytest.mark.parametrize("dimension", ["kernel_rows", "input_rows_kernel_columns"])
def test_temporary_memory_falls_with_the_factor(dimension):
    temporaries = [measure(dimension, factor)[0] for factor in (1, 2, 4)]
    assert temporaries[0] > temporaries[1] > temporaries[2]


if __name__ == "__main__":
    print("| serialization_dimension | factor | train temporaries (bytes) | train cycles |")
    print("|---|---|---|---|")
    for dim in ("input_columns", "input_rows_kernel_columns", "kernel_rows"):
        for fac in (1, 2, 4):
            print(f"| {dim} | {fac} | " + " | ".join(map(str, measure(dim, fac, True))) + " |")
