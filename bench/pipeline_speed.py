"""A two-stage pipeline on two simulated IPUs against the same training unpipelined.

The MNIST-shaped MLP of the IPU tutorial (batch 32, Dense(128, relu) -> Dense(10)) is
trained with gradient accumulation 8 (MEAN) for --runs weight updates:
  pipelined    ipu_keras.ops.pipelining_ops.pipeline, stages on IPUs 0 and 1, Grouped
  unpipelined  the same micro-batch loop on one IPU (a tf.while_loop accumulating the
               gradients in variables, then one apply_gradients)
Printed per configuration: host wall time per micro-batch step (after a warm-up run
that compiles), and the simulated device cycles of one weight update.

    python bench/pipeline_speed.py [--runs 50]
"""
import argparse
import os
import time

G, BATCH = 8, 32


def build(pipelined, runs):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras.ops import pipelining_ops as po

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2 if pipelined else 1
    cfg.configure_ipu_system()
    rng = np.random.default_rng(0)
    x = rng.random((G * BATCH, 784), dtype=np.float32)
    y = rng.integers(0, 10, G * BATCH).astype(np.int32)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        d1, d2 = keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)
        d1.build((None, 784))
        d2.build((None, 128))
        opt = keras.optimizers.SGD(0.01)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data.repeat())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def loss_of(logits, labels):
            return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True))

        def pipelined_run():
            return po.pipeline(
                [lambda a, b: (d1(a), b), lambda h, b: (d2(h), b)],
                gradient_accumulation_count=G, infeed_queue=infeed, outfeed_queue=outfeed,
                optimizer_function=lambda logits, b: po.OptimizerFunctionOutput(
                    opt, loss_of(logits, b)),
                outfeed_loss=True, reduction_method="MEAN")

        variables = d1.trainable_variables + d2.trainable_variables
        buffers = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        opt.build(variables)

        def unpipelined_run():
            def body(i):
                a, b = next(infeed)
                with tf.GradientTape() as tape:
                    loss = loss_of(d2(d1(a)), b)
                grads = tape.gradient(loss, variables)
                updates = [buf.assign_add(g / G) for buf, g in zip(buffers, grads)]
                with tf.control_dependencies(updates + [outfeed.enqueue(loss)]):
                    return i + 1

            tf.while_loop(lambda i: i < G, body, [tf.constant(0)])
            opt.apply_gradients(zip([buf.read_value() for buf in buffers], variables))
            for buf in buffers:
                buf.assign(tf.zeros_like(buf))

        step = pipelined_run if pipelined else unpipelined_run

        def run():
            strategy.run(step)
            outfeed.dequeue()

    return run, ipu


def measure(pipelined, runs):
    run, ipu = build(pipelined, runs)
    run()                                           # compiles
    start = time.perf_counter()
    for _ in range(runs):
        run()
    seconds = time.perf_counter() - start
    executable = ipu._executor.last_compiled().executable
    pipelines = executable.info.get("pipelines") or []
    cycles = (f"{pipelines[0]['makespan_cycles']:,} (serial {pipelines[0]['serial_cycles']:,})"
              if pipelines else None)
    return seconds / (runs * G) * 1e6, cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    print(f"{'config':<12} {'host us/step':>13} {'pipeline cycles/update':>32}")
    for pipelined in (True, False):
        us, cycles = measure(pipelined, args.runs)
        name = "pipelined" if pipelined else "unpipelined"
        print(f"{name:<12} {us:>13.0f} {cycles if cycles else '-':>32}")


if __name__ == "__main__":
    main()
