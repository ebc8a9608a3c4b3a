"""Trace and compile time of a Keras train step against the size of the model.

For 1, 2, 4 and 8 stacked residual blocks (Conv-BN-ReLU-Conv-BN, add, ReLU on 16x16x16,
batch 4, SGD), and for keras.applications.ResNet50 (64x64x3, batch 8), each in a fresh
process: the first `fit` of one step on an `ipu_keras.Model`, split into tracing
(`tf.function` -> IR), the compiler's passes, and the rest (the device loop, engine and
session); then the same model in a second process with the executable cache warm,
where the compiler is replaced by loading the executable. Keras' own first `fit` call
(TensorFlow tracing its step) is printed beside it.

    python bench/compile_speed.py [--blocks 1,2,4,8] [--no-resnet]

Columns: IR equations of the compiled step, seconds of tracing (split into TensorFlow
tracing the Keras step into a graph, and our importer turning the graph into IR), of the
compiler's passes and of the rest, microseconds of trace + compile per equation (flat
when the cost grows linearly with the model), the cache hit's load seconds and Keras'
first-call seconds.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time


def _blocks_model(keras, blocks):
    inputs = keras.Input((16, 16, 16))
    x = inputs
    for _ in range(blocks):
        y = keras.layers.Conv2D(16, 3, padding="same")(x)
        y = keras.layers.BatchNormalization()(y)
        y = keras.layers.ReLU()(y)
        y = keras.layers.Conv2D(16, 3, padding="same")(y)
        y = keras.layers.BatchNormalization()(y)
        x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return inputs, keras.layers.Dense(10)(x), (16, 16, 16), 4


def _resnet50(keras):
    base = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    return base.inputs, base.outputs, (64, 64, 3), 8


def _timed(module, name, seconds):
    """Wraps `module.name` so that each call adds its duration to `seconds[name]`."""
    fn = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

    setattr(module, name, wrapper)


def run_one(model_name, side, cache):
    """Fits one step of one model on one side; returns its row (a dict)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np

    import ipu_keras
    from ipu_keras._src.keras import program
    tracer = importlib.import_module("ipu_keras._src.tracer.trace")   # the module, not the function

    if cache:
        cfg = ipu_keras.config.IPUConfig()
        cfg.executable_cache_path = cache
        cfg.configure_ipu_system()
    seconds = {}
    _timed(program, "trace", seconds)
    _timed(tracer, "import_concrete", seconds)
    _timed(program, "compile_for_ipu", seconds)
    keras.utils.set_random_seed(0)
    if model_name == "resnet50":
        inputs, outputs, shape, batch = _resnet50(keras)
    else:
        inputs, outputs, shape, batch = _blocks_model(keras, int(model_name))
    model = (ipu_keras.Model if side == "ipu" else keras.Model)(inputs, outputs)
    model.compile(keras.optimizers.SGD(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=1)
    rng = np.random.default_rng(0)
    x = rng.random((batch,) + shape, dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    start = time.perf_counter()
    model.fit(x, y, batch_size=batch, verbose=0)
    row = {"first_s": time.perf_counter() - start}
    if side == "ipu":
        executable = model.train_function.last_program.executable
        row.update(equations=executable.info["equations"], trace_s=seconds["trace"],
                   import_s=seconds["import_concrete"],
                   compile_s=seconds["compile_for_ipu"],
                   passes_s=sum(executable.info["pass_seconds"].values()),
                   cache=executable.info["cache"]["status"],
                   total_s=model.train_function.last_program.compile_seconds)
    return row


def _subprocess(model_name, side, cache=None):
    command = [sys.executable, os.path.abspath(__file__), "--one",
               f"{model_name}:{side}:{cache or ''}"]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(model_name):
    with tempfile.TemporaryDirectory() as cache:
        cold = _subprocess(model_name, "ipu", cache)
        warm = _subprocess(model_name, "ipu", cache)
    cpu = _subprocess(model_name, "keras")
    if not (cold and warm and cpu):
        return f"{model_name:10s} failed"
    rest = cold["total_s"] - cold["trace_s"] - cold["compile_s"]
    per_eqn = 1e6 * (cold["trace_s"] + cold["compile_s"]) / cold["equations"]
    tf_trace = cold["trace_s"] - cold["import_s"]
    return (f"{model_name:10s} {cold['equations']:9d} {cold['trace_s']:7.2f} "
            f"{tf_trace:6.2f} {cold['import_s']:6.2f} "
            f"{cold['compile_s']:9.2f} {rest:6.2f} {per_eqn:9.0f} "
            f"{warm['compile_s']:7.2f} ({warm['cache']}) {cpu['first_s']:9.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="1,2,4,8")
    parser.add_argument("--no-resnet", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model_name, side, cache = args.one.split(":")
        print(json.dumps(run_one(model_name, side, cache or None)))
        return
    print(f"{'model':10s} {'equations':>9s} {'trace s':>7s} {'(tf':>6s} {'import)':>6s} "
          f"{'compile s':>9s} "
          f"{'rest s':>6s} {'us/eqn':>9s} {'load s':>7s} {'':5s} {'keras 1st':>9s}")
    names = [b for b in args.blocks.split(",") if b] + ([] if args.no_resnet else ["resnet50"])
    for name in names:
        print(_row(name), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
