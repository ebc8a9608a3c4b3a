"""Keras `fit` per model family: the simulated IPU against Keras on the CPU, in one run.

The four families of issue 15, each trained with `fit` and `steps_per_execution`:

  mlp          MNIST MLP (Flatten, Dense(128, relu), Dense(10, softmax)), batch 32, spe 100
  cnn          the Keras tutorial CNN (Conv32-pool-Conv64-pool-Dropout-Dense10), batch 64
  resnet50     keras.applications.ResNet50 (weights=None), 64x64x3 input, batch 8
  transformer  a Transformer encoder: 4 layers, d_model 256, 4 heads, seq 128, batch 16

Every (family, side) pair runs in its own process, so its peak resident memory is its own
and one side's threads or caches never help the other. A process builds the model from seed
0, fits one execution as warm-up (tracing and compiling), then times `fit` over the timed
executions. ipu_keras runs `ipu_keras.Model` (the same layers); Keras runs `keras.Model`.

    python bench/families.py [--quick] [--families cnn,resnet50] [--repeats 3]

The two processes of a family are prepared one after the other and stay up; then the
timed fits alternate between them (keras, ipu, keras, ...), `--repeats` each, one process
working at a time: on a machine whose speed drifts (a shared virtual machine can run the
same process 1.5x slower from one minute to the next) both sides run through the same
phases. Each column shows the median fit; `ratios` lists every pair's.

Columns: host ms per step after warm-up for each side, their ratio (ipu_keras / Keras;
above 1 the simulator is slower), each side's CPU ms per step in those fits (all its
threads: CPU ms over wall ms is how many cores it kept busy), the first `fit` call's
seconds (trace + compile + one execution) per side, ipu_keras' own trace + compile
seconds, and the peak RSS per side.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

# family: (batch, steps_per_execution, timed executions, timed executions with --quick)
FAMILIES = {
    "mlp": (32, 100, 10, 2),
    "cnn": (64, 10, 5, 1),
    "resnet50": (8, 5, 4, 1),
    "transformer": (16, 4, 3, 1),
}
SIDES = ("keras", "ipu")
# Untimed pause before each timed fit: TensorFlow's and BLAS' idle threads spin for a
# while after their last work, on the cores the next fit (of the other process) needs.
SETTLE_SECONDS = 0.5


def _mlp(keras):
    inputs = keras.Input((28, 28))
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(128, activation="relu")(x)
    return inputs, keras.layers.Dense(10, activation="softmax")(x), (28, 28), 10


def _cnn(keras):
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(0.5)(x)
    return inputs, keras.layers.Dense(10, activation="softmax")(x), (28, 28, 1), 10


def _resnet50(keras):
    base = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    return base.inputs, base.outputs, (64, 64, 3), 10


def _transformer(keras, layers=4, d_model=256, heads=4, seq=128, vocab=1000):
    inputs = keras.Input((seq,), dtype="int32")
    x = keras.layers.Embedding(vocab, d_model)(inputs)
    for _ in range(layers):
        attention = keras.layers.MultiHeadAttention(heads, d_model // heads)(x, x)
        x = keras.layers.LayerNormalization()(x + attention)
        hidden = keras.layers.Dense(4 * d_model, activation="gelu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(d_model)(hidden))
    x = keras.layers.GlobalAveragePooling1D()(x)
    return inputs, keras.layers.Dense(2, activation="softmax")(x), (seq,), 2


BUILDERS = {"mlp": _mlp, "cnn": _cnn, "resnet50": _resnet50, "transformer": _transformer}


def _data(family, shape, classes, samples):
    import numpy as np

    rng = np.random.default_rng(0)
    if family == "transformer":
        x = rng.integers(0, 1000, (samples,) + shape).astype(np.int32)
    else:
        x = rng.random((samples,) + shape, dtype=np.float32)
    return x, rng.integers(0, classes, samples).astype(np.int32)


def prepare(family, side, quick):
    """Builds one family on one side and fits one execution (tracing and compiling);
    returns `timed()`, which fits the timed executions and returns the result row (a dict).
    Each call of `timed` fits the same data again, the weights going on from the last."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    import ipu_keras

    batch, spe, executions, quick_executions = FAMILIES[family]
    executions = quick_executions if quick else executions
    keras.utils.set_random_seed(0)
    inputs, outputs, shape, classes = BUILDERS[family](keras)
    model = (ipu_keras.Model if side == "ipu" else keras.Model)(inputs, outputs)
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy",
                  steps_per_execution=spe)
    x, y = _data(family, shape, classes, (executions + 1) * spe * batch)
    warm = spe * batch
    start = time.perf_counter()
    model.fit(x[:warm], y[:warm], batch_size=batch, verbose=0, shuffle=False)
    first = time.perf_counter() - start

    def timed():
        start, cpu = time.perf_counter(), _cpu_seconds()
        history = model.fit(x[warm:], y[warm:], batch_size=batch, verbose=0, shuffle=False)
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        program = getattr(getattr(model, "train_function", None), "last_program", None)
        return {"family": family, "side": side,
                "ms_per_step": 1e3 * seconds / (executions * spe),
                "cpu_ms_per_step": 1e3 * cpu / (executions * spe),
                "steps": executions * spe, "first_s": first,
                "compile_s": getattr(program, "compile_seconds", None),
                "loss": history.history["loss"][-1],
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}

    return timed


def _cpu_seconds():
    """CPU seconds this process has used so far, all its threads together."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_one(family, side, quick):
    """Fits one family on one side; returns its result row (a dict)."""
    return prepare(family, side, quick)()


def _serve(family, side, quick):
    """`--serve`: prepares, says "ready", then runs `timed()` once per line read from
    stdin, printing each row as JSON, until stdin closes."""
    timed = prepare(family, side, quick)
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps(timed()), flush=True)


class _Side:
    """A `--serve` process of one (family, side): started and warmed up alone, then
    asked for one timed fit at a time. None rows when it failed (its stderr is shown)."""

    def __init__(self, family, side, quick):
        self.errors = tempfile.TemporaryFile(mode="w+")
        command = [sys.executable, os.path.abspath(__file__), "--serve", f"{family}:{side}"]
        self.process = subprocess.Popen(command + (["--quick"] if quick else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errors, text=True)
        self.alive = self._read() == "ready"

    def _read(self):
        line = self.process.stdout.readline()
        if not line:   # exited: show why
            self.process.wait()
            self.errors.seek(0)
            sys.stderr.write(self.errors.read()[-3000:])
        return line.strip()

    def run(self):
        if not self.alive:
            return None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        line = self._read()
        self.alive = bool(line)
        return json.loads(line) if line else None

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        self.errors.close()


def run_family(family, repeats, quick):
    """{(family, side): [rows]}: each side's process prepared in turn, then `repeats`
    timed fits alternating between them (keras, ipu, keras, ...), one process working at
    a time, each after a pause that lets the other's idle threads stop spinning."""
    sides = {}
    try:
        for side in SIDES:
            sides[side] = _Side(family, side, quick)
        rows = {}
        for _ in range(max(repeats, 1)):
            for side in SIDES:
                time.sleep(SETTLE_SECONDS)
                row = sides[side].run()
                if row is not None:
                    rows.setdefault((family, side), []).append(row)
        return rows
    finally:
        for process in sides.values():
            process.close()


def _median_run(runs):
    """The run of median ms/step among `runs` (a list of result dicts), or None."""
    runs = sorted(runs, key=lambda r: r["ms_per_step"])
    return runs[(len(runs) - 1) // 2] if runs else None


def print_table(rows):
    """Prints one line per family from {(family, side): [results]} (a failed side: '-')."""
    print(f"{'model':12s} {'steps':>5s} {'keras ms/step':>13s} {'ipu ms/step':>11s} "
          f"{'ratio':>6s} {'keras cpu ms':>12s} {'ipu cpu ms':>10s} {'keras 1st s':>11s} "
          f"{'ipu 1st s':>9s} {'ipu compile s':>13s} "
          f"{'keras MiB':>9s} {'ipu MiB':>8s}")
    pairs = {}
    for family in dict.fromkeys(f for f, _ in rows):
        keras_runs, ipu_runs = rows.get((family, "keras"), []), rows.get((family, "ipu"), [])
        pairs[family] = [i["ms_per_step"] / c["ms_per_step"] for c, i in zip(keras_runs, ipu_runs)]
        keras_run, ipu_run = _median_run(keras_runs), _median_run(ipu_runs)

        def col(row, key, width, fmt):
            value = row.get(key) if row else None
            return format(value, fmt).rjust(width) if value is not None else "-".rjust(width)

        ratio = (ipu_run["ms_per_step"] / keras_run["ms_per_step"]
                 if keras_run and ipu_run else None)
        steps = (ipu_run or keras_run or {}).get("steps", 0)
        print(f"{family:12s} {steps:5d} {col(keras_run, 'ms_per_step', 13, '.1f')} "
              f"{col(ipu_run, 'ms_per_step', 11, '.1f')} "
              f"{format(ratio, '.2f') + 'x' if ratio else '-':>6s} "
              f"{col(keras_run, 'cpu_ms_per_step', 12, '.1f')} "
              f"{col(ipu_run, 'cpu_ms_per_step', 10, '.1f')} "
              f"{col(keras_run, 'first_s', 11, '.2f')} {col(ipu_run, 'first_s', 9, '.2f')} "
              f"{col(ipu_run, 'compile_s', 13, '.2f')} {col(keras_run, 'peak_rss_mib', 9, '.0f')} "
              f"{col(ipu_run, 'peak_rss_mib', 8, '.0f')}")
    if any(len(r) > 1 for r in pairs.values()):
        for family, ratios in pairs.items():
            print(f"ratios {family}: " + ", ".join(f"{r:.2f}x" for r in ratios))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed executions")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated subset of {','.join(FAMILIES)}")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per side, alternating; the table shows the median")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        family, side = args.one.split(":")
        print(json.dumps(run_one(family, side, args.quick)))
        return
    if args.serve:
        _serve(*args.serve.split(":"), args.quick)
        return
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; expected a subset of {list(FAMILIES)}")
    rows = {}
    for family in families:
        rows.update(run_family(family, args.repeats, args.quick))
    print_table(rows)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
