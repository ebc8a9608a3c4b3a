"""The `ipu-keras demo`: the IPU TensorFlow 2 tutorial's training loop, and what it cost.

It trains the tutorial's model (a Keras MLP on MNIST-shaped data, SGD, sparse
categorical cross-entropy) with the tutorial's custom loop: a `tf.function` that
pulls `steps_per_execution` batches from an iterator in a `tf.range` loop and sends
each step's loss through an outfeed, run by `IPUStrategy.run`. Then it reports what
the IPU tools would have told you: the target, the compile time (trace and each
compiler pass), the fullest tile's memory, and per execution the simulated device
time split into compute, exchange, sync and host I/O, next to the losses.

Separation of concerns: `load_data` and `make_model` build the inputs,
`train_on_ipu` is the only function that trains (so it can be swapped for
`ipu_keras.Sequential.fit` without touching the rest), the `_report_*` functions
only format figures, and `run_demo` wires them together and returns the figures.
"""
import contextlib
import dataclasses
import io
import math
import time

import numpy as np

SYNTHETIC_SAMPLES = 640
"""Samples in the synthetic stand-in for MNIST (small, so the model can fit it)."""
MNIST_SAMPLES = 10000
"""Samples of the real MNIST training set used when it can be loaded."""


@dataclasses.dataclass
class Execution:
    """One call of the compiled training loop: `steps_per_execution` steps.

    Attributes:
        losses: The loss of every step, as delivered by the outfeed.
        wall_seconds: Host wall time of the call (and the outfeed dequeue).
        cycles: Simulated cycles of the call, per kind ("compute", "exchange",
            "sync", "host_io").
    """

    losses: np.ndarray
    wall_seconds: float
    cycles: dict


def load_data(samples=MNIST_SAMPLES):
    """MNIST training images and labels, or synthetic arrays of the same shapes.

    Args:
        samples: How many real MNIST samples to keep.

    Returns:
        tuple: `(x, y, source)` with `x` float32 of shape `(n, 28, 28)` in [0, 1],
        `y` int32 of shape `(n,)` and `source` either "mnist" or "synthetic".
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # keras prints "Downloading ..."
            import keras
            (x, y), _ = keras.datasets.mnist.load_data()
        return x[:samples].astype(np.float32) / 255.0, y[:samples].astype(np.int32), "mnist"
    except Exception:  # no network (or no cache): synthetic data of the same shapes
        rng = np.random.default_rng(0)
        x = rng.random((SYNTHETIC_SAMPLES, 28, 28), dtype=np.float32)
        y = rng.integers(0, 10, SYNTHETIC_SAMPLES).astype(np.int32)
        return x, y, "synthetic"


def make_dataset(x, y, batch_size):
    """An endlessly repeating `tf.data.Dataset` of `(images, labels)` batches."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    return dataset.batch(batch_size, drop_remainder=True).repeat()


def make_model(seed=7):
    """The tutorial's model: Flatten, Dense(128, relu), Dense(10, softmax)."""
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def make_training_loop(model, optimizer, loss_fn, record, jit_compile=None):
    """The tutorial's loop: `steps` SGD steps on batches from `iterator`.

    Args:
        model: The Keras model to train.
        optimizer: A Keras optimizer.
        loss_fn: A Keras loss taking `(labels, predictions)`.
        record: Called with each step's loss inside the loop (e.g. an outfeed's
            `enqueue`).
        jit_compile: Passed to `tf.function`: the tutorial says True; the simulated
            IPU compiles either way, while TensorFlow's own XLA on the CPU cannot
            compile the iterator op.

    Returns:
        A `tf.function` taking `(iterator, steps)`.
    """
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def training_loop(iterator, steps):
        for _ in tf.range(steps):
            features, labels = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            record(loss)

    return training_loop


def train_on_ipu(dataset, executions, steps_per_execution):
    """Trains the tutorial's model on the simulated IPU with the custom loop.

    This is the only function of the demo that trains; the rest reads its results.

    Args:
        dataset: A repeating `tf.data.Dataset` of `(images, labels)` batches.
        executions: How many times to run the compiled loop.
        steps_per_execution: Training steps per run of the compiled loop.

    Returns:
        tuple: `(compiled, executions)`: the `CompiledFunction` that ran (compile
        time, executable, target) and a list of `Execution`.
    """
    import keras
    import ipu_keras as ipu
    from ipu_keras._src.driver import executor as _executor

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        loop = make_training_loop(model, keras.optimizers.SGD(0.01),
                                  keras.losses.SparseCategoricalCrossentropy(),
                                  outfeed.enqueue)
        iterator = iter(dataset)
        results, compiled = [], None
        for _ in range(executions):
            start = time.perf_counter()
            strategy.run(loop, args=[iterator, steps_per_execution])
            losses = outfeed.dequeue().numpy()
            wall = time.perf_counter() - start
            compiled = compiled or _executor.last_compiled()
            results.append(Execution(losses, wall, dict(compiled.session.last_cycles)))
    return compiled, results


# -- figures ------------------------------------------------------------------------


def device_seconds(cycles, clock_hz):
    """Simulated seconds per cycle kind, plus their "total"."""
    seconds = {kind: count / clock_hz for kind, count in cycles.items()}
    seconds["total"] = sum(seconds.values())
    return seconds


def host_seconds_per_step(compiled, executions, steps_per_execution):
    """Host wall time per step, leaving out the compile of the first execution."""
    if len(executions) > 1:
        walls = [e.wall_seconds for e in executions[1:]]
    else:
        walls = [max(executions[0].wall_seconds - compiled.compile_seconds, 0.0)]
    return sum(walls) / (len(walls) * steps_per_execution)


def figures(source, compiled, executions, steps_per_execution):
    """Everything the demo reports, as a plain dict (see `run_demo`)."""
    target, executable = compiled.target, compiled.executable
    per_execution = [
        {"mean_loss": float(np.mean(e.losses)), "wall_seconds": e.wall_seconds,
         "device_seconds": device_seconds(e.cycles, target.clock_hz)}
        for e in executions
    ]
    return {
        "data": source,
        "target": {"name": target.name, "tiles": target.num_tiles,
                   "clock_hz": target.clock_hz, "bytes_per_tile": target.bytes_per_tile},
        "compile_seconds": compiled.compile_seconds,
        "trace_seconds": executable.info["trace_seconds"],
        "pass_seconds": dict(executable.info["pass_seconds"]),
        "max_tile": executable.memory["max_tile"],
        "max_tile_bytes": executable.memory["max_tile_bytes"],
        "steps": steps_per_execution * len(executions),
        "executions": per_execution,
        "first_loss": per_execution[0]["mean_loss"],
        "last_loss": per_execution[-1]["mean_loss"],
        "host_seconds_per_step": host_seconds_per_step(
            compiled, executions, steps_per_execution),
        "device_seconds_per_step":
            per_execution[-1]["device_seconds"]["total"] / steps_per_execution,
    }


# -- report -------------------------------------------------------------------------


def _us(seconds):
    return f"{seconds * 1e6:,.1f} us"


def _report_setup(fig, out):
    t = fig["target"]
    out(f"data:     {fig['data']} (28x28 images, 10 classes)")
    out(f"target:   {t['name']}, {t['tiles']} tiles, {t['clock_hz'] / 1e9:.2f} GHz, "
        f"{t['bytes_per_tile'] // 1024} KiB per tile")


def _report_compile(fig, out):
    passes = fig["pass_seconds"]
    detail = ", ".join(f"{name} {1e3 * sec:.1f}" for name, sec in passes.items())
    out(f"compile:  {fig['compile_seconds']:.2f} s on the first call: trace "
        f"{fig['trace_seconds']:.2f} s, compiler passes {sum(passes.values()):.3f} s")
    out(f"passes:   {detail} (ms)")
    used, limit = fig["max_tile_bytes"], fig["target"]["bytes_per_tile"]
    out(f"memory:   fullest tile {fig['max_tile']}: {used:,} of {limit:,} bytes "
        f"({100 * used / limit:.1f}%)")


_KINDS = ("total", "compute", "exchange", "sync", "host_io")


def _report_executions(fig, out):
    out(f"{'':22}{'simulated device time per execution':^60}".rstrip())
    out(f"{'execution':>9}  {'mean loss':>9}" + "".join(f"{k:>12}" for k in _KINDS)
        + f"{'host wall':>12}")
    for i, e in enumerate(fig["executions"]):
        dev = e["device_seconds"]
        out(f"{i:>9}  {e['mean_loss']:>9.4f}" + "".join(f"{_us(dev[k]):>12}" for k in _KINDS)
            + f"{e['wall_seconds']:>10.3f} s")


def _report_summary(fig, out):
    trend = "down" if fig["last_loss"] < fig["first_loss"] else "NOT down"
    out(f"loss:     {fig['first_loss']:.4f} (first execution) -> {fig['last_loss']:.4f} "
        f"(last execution), {trend}")
    out(f"per step: simulated device {_us(fig['device_seconds_per_step'])}, "
        f"host wall {_us(fig['host_seconds_per_step'])} (compile excluded)")


def run_demo(steps=200, steps_per_execution=10, batch_size=32, out=print):
    """Trains the IPU tutorial's model on the simulated IPU and reports what it did.

    Args:
        steps: Training steps in total; a multiple of `steps_per_execution`.
        steps_per_execution: Steps per run of the compiled loop on the device.
        batch_size: Samples per step.
        out: Called with each line of the report.

    Returns:
        dict: The figures printed: "data", "target" (name, tiles, clock_hz,
        bytes_per_tile), "compile_seconds", "trace_seconds", "pass_seconds",
        "max_tile", "max_tile_bytes", "steps", "executions" (per execution:
        "mean_loss", "wall_seconds", "device_seconds" by kind and "total"),
        "first_loss", "last_loss", "host_seconds_per_step" and
        "device_seconds_per_step".

    Raises:
        ValueError: if `steps` is not a positive multiple of `steps_per_execution`.
    """
    if steps_per_execution < 1 or steps < 1 or steps % steps_per_execution:
        raise ValueError(
            "run_demo expected `steps` to be a positive multiple of a positive "
            f"`steps_per_execution`. Received: steps={steps}, "
            f"steps_per_execution={steps_per_execution}")
    x, y, source = load_data()
    dataset = make_dataset(x, y, batch_size)
    compiled, executions = train_on_ipu(dataset, steps // steps_per_execution,
                                        steps_per_execution)
    fig = figures(source, compiled, executions, steps_per_execution)
    for report in (_report_setup, _report_compile, _report_executions, _report_summary):
        report(fig, out)
    if not all(math.isfinite(e["mean_loss"]) for e in fig["executions"]):
        out("warning:  a loss is not finite")
    return fig
