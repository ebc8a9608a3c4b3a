"""Training-step speed: the simulated IPU against TensorFlow on the CPU, in one run.

Both sides run the IPU TensorFlow 2 tutorial's custom loop (the model and data of
`ipu-keras demo`: an MLP on MNIST-shaped batches of 32, SGD, every step's loss sent
out of the loop) for `--steps` steps, after one warm-up call that compiles:

* `ipu_speN`: `IPUStrategy.run` on the simulator, N steps per execution, losses
  through an outfeed;
* `tf_cpu_speN`: the same loop as a plain `tf.function` (not `jit_compile`: XLA
  cannot compile the iterator op) with N steps per call, losses in a TensorArray.

It prints one row per configuration and one line per ratio of host time per step
(`ipu / tf`; above 1 means the simulator is slower). Run from the repository root:
`python bench/step_speed.py [--steps N]`. See bench/README.md for the columns.
"""
import argparse
import math
import os
import pathlib
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import ipu_keras as ipu  # noqa: E402
from ipu_keras._src.driver import executor as _executor
from ipu_keras._src import demo  # noqa: E402

STEPS_PER_EXECUTION = (10, 100)
BATCH_SIZE = 32


def peak_rss_mib():
    """Peak resident memory of the whole process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def _setup():
    model = demo.make_model()
    return model, keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy()


def _time_calls(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return time.perf_counter() - start


def bench_ipu(dataset, steps, spe):
    """The tutorial loop on the simulated IPU; returns one result row (a dict)."""
    model, optimizer, loss_fn = _setup()
    strategy = ipu.ipu_strategy.IPUStrategy()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    loop = demo.make_training_loop(model, optimizer, loss_fn, outfeed.enqueue)
    iterator = iter(dataset)

    def call():
        strategy.run(loop, args=[iterator, spe])
        return outfeed.dequeue()

    first = _time_calls(call, 1)
    compiled = _executor.last_compiled()
    calls = math.ceil(steps / spe)
    seconds = _time_calls(call, calls)
    device = sum(compiled.session.last_cycles.values()) / compiled.target.clock_hz
    return {"config": f"ipu_spe{spe}", "steps": calls * spe, "first_call_s": first,
            "compile_s": compiled.compile_seconds, "us_per_step": 1e6 * seconds / (calls * spe),
            "device_us_per_step": 1e6 * device / spe, "peak_rss_mib": peak_rss_mib()}


def _tf_loop(model, optimizer, loss_fn):
    """The tutorial loop for TensorFlow: losses collected in a TensorArray."""

    @tf.function
    def training_loop(iterator, steps):
        losses = tf.TensorArray(tf.float32, size=steps)
        for i in tf.range(steps):
            features, labels = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            losses = losses.write(i, loss)
        return losses.stack()

    return training_loop


def bench_tf(dataset, steps, spe):
    """The same loop in TensorFlow on the CPU; returns one result row (a dict)."""
    loop = _tf_loop(*_setup())
    iterator, n = iter(dataset), tf.constant(spe)

    def call():
        return loop(iterator, n).numpy()

    first = _time_calls(call, 1)
    calls = math.ceil(steps / spe)
    seconds = _time_calls(call, calls)
    return {"config": f"tf_cpu_spe{spe}", "steps": calls * spe, "first_call_s": first,
            "compile_s": None, "us_per_step": 1e6 * seconds / (calls * spe),
            "device_us_per_step": None, "peak_rss_mib": peak_rss_mib()}


COLUMNS = (  # key, heading, format
    ("config", "config", "{}"),
    ("steps", "steps", "{}"),
    ("first_call_s", "first call s", "{:.2f}"),
    ("compile_s", "compile s", "{:.2f}"),
    ("us_per_step", "host us/step", "{:,.1f}"),
    ("device_us_per_step", "device us/step", "{:,.1f}"),
    ("peak_rss_mib", "peak RSS MiB", "{:,.0f}"),
)


def format_table(rows):
    """The rows as an aligned text table (first column left-aligned)."""
    cells = [[heading for _, heading, _ in COLUMNS]]
    for row in rows:
        cells.append(["-" if row[key] is None else fmt.format(row[key])
                      for key, _, fmt in COLUMNS])
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                  for i, (c, w) in enumerate(zip(line, widths)))
        for line in cells)


def main(argv=None):
    """Runs the benchmark and prints the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000,
                        help="timed steps per configuration (default: %(default)s)")
    args = parser.parse_args(argv)
    x, y, source = demo.load_data()
    dataset = demo.make_dataset(x, y, BATCH_SIZE)
    print(f"data: {source}, batch {BATCH_SIZE}, {args.steps} timed steps per configuration "
          f"after one warm-up call; {os.cpu_count()} CPUs")
    rows = [bench_ipu(dataset, args.steps, spe) for spe in STEPS_PER_EXECUTION]
    rows += [bench_tf(dataset, args.steps, spe) for spe in STEPS_PER_EXECUTION]
    print(format_table(rows))
    by_name = {r["config"]: r for r in rows}
    for spe in STEPS_PER_EXECUTION:
        ipu_row, tf_row = by_name[f"ipu_spe{spe}"], by_name[f"tf_cpu_spe{spe}"]
        print(f"ratio {ipu_row['config']}/{tf_row['config']} = "
              f"{ipu_row['us_per_step'] / tf_row['us_per_step']:.2f}x")
    print("peak RSS: the whole process's peak up to the end of that row (rows run in order).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
