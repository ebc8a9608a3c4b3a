"""Keras `fit` on the simulated IPU against Keras on the CPU, in one run.

Trains the MNIST-shaped MLP of the IPU tutorial (batch 32, Flatten -> Dense(128, relu)
-> Dense(10, softmax), SGD) for --steps steps with:
  ipu_spe1     ipu_keras.Sequential, steps_per_execution=1
  ipu_spe100   ipu_keras.Sequential, steps_per_execution=100
  keras_spe100 keras.Sequential on TensorFlow's CPU, steps_per_execution=100
  ipu_ga8_spe96        ipu_keras.Sequential accumulating 8 batches per weight update (MEAN)
  ipu_pipe2_ga8_spe96  the same model pipelined over two IPUs (stages [0, 0, 1]), same
                       accumulation: host time of the pipelined model next to the plain one
Each configuration runs in its own process so that its peak resident memory is its
own. Time per step excludes the first epoch-sized warm-up (compilation, tracing).

    python bench/fit_speed.py [--steps 2000]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

CONFIGS = ("ipu_spe1", "ipu_spe100", "keras_spe100", "ipu_ga8_spe96", "ipu_pipe2_ga8_spe96")
BATCH = 32


def run_one(config, steps):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import keras

    import ipu_keras

    rng = np.random.default_rng(0)
    x = rng.random((steps * BATCH, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, steps * BATCH).astype(np.int32)
    keras.utils.set_random_seed(0)
    cls = keras.Sequential if config.startswith("keras") else ipu_keras.Sequential
    model = cls([keras.Input((28, 28)), keras.layers.Flatten(),
                 keras.layers.Dense(128, activation="relu"),
                 keras.layers.Dense(10, activation="softmax")])
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy",
                  steps_per_execution=int(re.search(r"spe(\d+)", config).group(1)))
    _accumulate_or_pipeline(model, config)
    warmup = 200
    model.fit(x[: warmup * BATCH], y[: warmup * BATCH], batch_size=BATCH, verbose=0,
              shuffle=False)
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    return {"config": config, "us_per_step": seconds / steps * 1e6,
            "loss": history.history["loss"][-1],
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _accumulate_or_pipeline(model, config):
    import ipu_keras

    accumulation = re.search(r"_ga(\d+)_", config)
    if "_pipe2_" in config:
        cfg = ipu_keras.config.IPUConfig()
        cfg.auto_select_ipus = 2
        cfg.configure_ipu_system()
        model.set_pipeline_stage_assignment([0, 0, 1])
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=int(accumulation.group(1)),
            gradient_accumulation_reduction_method="mean")
    elif accumulation:
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=int(accumulation.group(1)),
            gradient_accumulation_reduction_method="mean")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.steps)))
        return
    results = {}
    for config in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--one", config, "--steps",
                              str(args.steps)], capture_output=True, text=True, check=True)
        results[config] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'config':20s} {'us/step':>10s} {'final loss':>11s} {'peak RSS MiB':>13s}")
    for r in results.values():
        print(f"{r['config']:20s} {r['us_per_step']:10.1f} {r['loss']:11.5f} "
              f"{r['peak_rss_mib']:13.1f}")
    ipu1, ipu100, cpu, accumulated, pipelined = (results[c] for c in CONFIGS)
    print(f"ratio ipu_spe100/keras_spe100 time = {ipu100['us_per_step'] / cpu['us_per_step']:.2f}x"
          " (target <= 1.5x)")
    print(f"speedup ipu_spe100 over ipu_spe1 = {ipu1['us_per_step'] / ipu100['us_per_step']:.2f}x"
          " (target >= 1.6x)")
    print(f"ratio ipu_spe100/keras_spe100 peak RSS = "
          f"{ipu100['peak_rss_mib'] / cpu['peak_rss_mib']:.2f}x (target <= 1.5x)")
    print(f"ratio ipu_pipe2_ga8_spe96/ipu_ga8_spe96 time = "
          f"{pipelined['us_per_step'] / accumulated['us_per_step']:.2f}x (pipelined/plain)")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
