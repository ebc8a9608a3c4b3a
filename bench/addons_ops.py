"""What the addons' fused IPU ops change in the simulated device's cycles and memory.

One training step (batch 32, SGD, `ipu_keras.Sequential`, ipu2) of the same model
built with an addons layer, which is one IPU op per pass, and with the Keras layer that
computes the same numbers as a generic graph:

* PopnnLSTM(64) / PopnnGRU(64) against keras.layers.LSTM / GRU, 20 steps of 16 features,
  then Dense(4);
* Dropout(0.5, ref=True), the regenerating dropout op, against ref=False (plain ops whose
  mask the backward pass reads), between Dense(256) layers of 64 features.

Printed per model: simulated cycles of the step, the peak not-always-live bytes and,
for dropout, the not-always-live bytes while the layer after it runs.

    PYTHONPATH=. python bench/addons_ops.py
"""
import numpy as np


def _step(layers, shape, units):
    import keras

    import ipu_keras as ipu

    keras.utils.set_random_seed(0)
    model = ipu.Sequential([keras.Input(shape)] + layers + [keras.layers.Dense(units,
                                                                              name="after")])
    model.compile("sgd", "mse", steps_per_execution=1)
    rng = np.random.default_rng(0)
    model.fit(rng.random((32,) + shape, np.float32), rng.random((32, units), np.float32),
              batch_size=32, verbose=0)
    executable = model.train_function.last_program.executable
    return model.ipu_report()["total_cycles"], executable


def _after_bytes(executable):
    from ipu_keras._src.reports.document import liveness_section

    steps = liveness_section(executable)["loop"]["steps"]
    return next(s["bytes"] for s in steps if s["label"] == "matmul (after)")


def main():
    import keras

    from ipu_keras_addons.keras import layers as ipu_layers

    print(f"{'model':34} {'cycles':>10} {'peak not-always-live':>22} {'after the layer':>16}")
    rows = [
        ("PopnnLSTM(64) (one op per pass)", [ipu_layers.PopnnLSTM(64)], (20, 16), 4),
        ("keras LSTM(64) (while loop)", [keras.layers.LSTM(64)], (20, 16), 4),
        ("PopnnGRU(64) (one op per pass)", [ipu_layers.PopnnGRU(64)], (20, 16), 4),
        ("keras GRU(64) (while loop)", [keras.layers.GRU(64)], (20, 16), 4),
    ]
    for ref in (True, False):
        rows.append((f"Dropout(0.5, ref={ref})",
                     [keras.layers.Dense(256, activation="relu"),
                      ipu_layers.Dropout(0.5, ref=ref)], (64,), 4))
    for name, layers, shape, units in rows:
        cycles, executable = _step(layers, shape, units)
        peak = executable.memory["peak_not_always_live_bytes"]
        after = _after_bytes(executable) if name.startswith("Dropout") else ""
        after = f"{after:,}" if after != "" else "-"
        print(f"{name:34} {cycles:>10,} {peak:>22,} {after:>16}")


if __name__ == "__main__":
    main()
