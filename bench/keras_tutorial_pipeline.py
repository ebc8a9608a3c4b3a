"""The Keras tutorial's CNN pipelined over two IPUs, next to the same model on one IPU.

Graphcore's Keras tutorial (step 7) splits its MNIST CNN (Conv32-pool | Conv64-pool-
Flatten-Dropout-Dense10, batch 64, SGD, categorical cross-entropy) into two pipeline
stages with gradient accumulation 8 (Grouped). Trained here for --steps micro-batches:
  one_ipu     ipu_keras.Model on one IPU, accumulating 8 batches per weight update
  two_ipus    the same model, PipelineStage(0) / PipelineStage(1) on two IPUs, same
              accumulation (the pipeline depth)
  keras_cpu   keras.Model on TensorFlow's CPU (host time only)
Printed per configuration: host wall time per step after a warm-up epoch, the simulated
device time per step, and the report summary of the training executable (memory per
IPU, the pipeline's stages, makespan and per-IPU busy/idle). The reports (report.json,
report.html, timeline.png) are written under --reports.

    python bench/keras_tutorial_pipeline.py [--steps 128] [--reports DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIGS = ("one_ipu", "two_ipus", "keras_cpu")
BATCH, G = 64, 8


def _model(config):
    import contextlib

    import keras

    import ipu_keras as ipu

    keras.utils.set_random_seed(0)
    cls = keras.Model if config == "keras_cpu" else ipu.Model
    stage = ipu.PipelineStage if config == "two_ipus" else lambda _: contextlib.nullcontext()
    inputs = keras.Input((28, 28, 1))
    with stage(0):
        x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
        x = keras.layers.MaxPooling2D(2)(x)
    with stage(1):
        x = keras.layers.Conv2D(64, 3, activation="relu")(x)
        x = keras.layers.MaxPooling2D(2)(x)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dropout(0.5)(x)
        outputs = keras.layers.Dense(10, activation="softmax")(x)
    model = cls(inputs, outputs)
    model.compile("sgd", "categorical_crossentropy", steps_per_execution=G * 8)
    if config == "two_ipus":
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=G)
    elif config == "one_ipu":
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=G)
    return model


def run_one(config, steps, reports):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np

    import ipu_keras as ipu
    from ipu_keras import profiling

    if config != "keras_cpu":
        cfg = ipu.config.IPUConfig()
        cfg.auto_select_ipus = 2 if config == "two_ipus" else 1
        cfg.configure_ipu_system()
    rng = np.random.default_rng(0)
    x = rng.random((steps * BATCH, 28, 28, 1), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, steps * BATCH)]
    model = _model(config)
    if config != "keras_cpu":   # reports are written for executables compiled from now on
        profiling.enable_reports(os.path.join(reports, config))
    warmup = G * 8 * BATCH
    model.fit(x[:warmup], y[:warmup], batch_size=BATCH, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    result = {"config": config, "us_per_step": seconds / steps * 1e6}
    if config != "keras_cpu":
        profiling.write_report()
        report = model.ipu_report()
        result["device_us_per_step"] = report["device_seconds_per_step"] * 1e6
        result["summary"] = _training_summary(os.path.join(reports, config))
    return result


def _training_summary(directory):
    """The summary of the training executable's report (the one with the most cycles)."""
    from ipu_keras._src.reports import summary

    loaded = [summary.load(p) for p in summary.find_reports(directory)]
    report = max(loaded, key=lambda r: (r.get("execution") or {}).get("total_cycles", 0))
    return summary.summarise(report)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=128, help="a multiple of 64")
    parser.add_argument("--reports", default=None, help="directory for the reports")
    parser.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    reports = args.reports or tempfile.mkdtemp(prefix="keras_tutorial_pipeline_")
    if args.one:
        print(json.dumps(run_one(args.one, args.steps, reports)))
        return
    results = {}
    for config in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--one", config, "--steps",
                              str(args.steps), "--reports", reports],
                             capture_output=True, text=True, check=True)
        results[config] = json.loads(out.stdout.strip().splitlines()[-1])
    for r in results.values():
        if "summary" in r:
            print(f"==== {r['config']}: report summary of the training executable")
            print(r["summary"])
    print(f"{'config':10s} {'host us/step':>13s} {'device us/step':>15s}")
    for r in results.values():
        device = f"{r['device_us_per_step']:15.1f}" if "device_us_per_step" in r else " " * 15
        print(f"{r['config']:10s} {r['us_per_step']:13.1f} {device}")
    one, two, cpu = (results[c] for c in CONFIGS)
    print(f"simulated device time two_ipus/one_ipu = "
          f"{two['device_us_per_step'] / one['device_us_per_step']:.2f}x")
    print(f"host time two_ipus/one_ipu = {two['us_per_step'] / one['us_per_step']:.2f}x, "
          f"two_ipus/keras_cpu = {two['us_per_step'] / cpu['us_per_step']:.2f}x")
    print(f"reports (report.html, timeline.png): {reports}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
