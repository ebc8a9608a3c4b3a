"""Data-parallel replicas on the simulator: host time and simulated throughput.

The Keras tutorial's MNIST CNN (Conv32-pool-Conv64-pool-Flatten-Dropout-Dense10, batch
64 per replica, SGD) is trained with `fit` on 1, 2 and 4 IPUs: 1, 2 and 4 replicas, each
taking its own batch per step (`steps_per_execution` 16 per replica), and as 4 replicas
in 2 MPI processes (`ipu-keras run --num-instances 2 --num-replicas 4`, each process
training on its half of the batches). Each configuration runs in its own process(es).
Printed per configuration: host wall time per step (one step = one batch on every
replica), per batch, the simulated device time per step (every replica works at once,
plus the all-reduce of the gradients over the IPU-Links) and the simulated throughput in
samples per second; then the report summary of the 4-replica training executable.

    python bench/replication_speed.py [--steps 64]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BATCH, SPE = 64, 16
REPLICAS = (1, 2, 4)


def _model():
    import keras

    import ipu_keras as ipu

    keras.utils.set_random_seed(0)
    model = ipu.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dropout(0.5),
        keras.layers.Dense(10, activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy", steps_per_execution=SPE)
    return model


def run_one(replicas, steps, reports):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np

    import ipu_keras as ipu
    from ipu_keras import distributed, profiling

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = replicas
    if distributed.isPopdistEnvSet():
        distributed.set_ipu_config(cfg)
    cfg.configure_ipu_system()
    rng = np.random.default_rng(0)
    samples = steps * replicas * BATCH
    x = rng.random((samples, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, samples)
    instances, index = distributed.getNumInstances(), distributed.getInstanceIndex()
    if instances > 1:   # this instance's shard: every other batch
        mine = np.arange(samples).reshape(-1, BATCH)[index::instances].reshape(-1)
        x, y = x[mine], y[mine]
        reports = f"{reports}_{index}"
    model = _model()
    profiling.enable_reports(reports)
    warmup = SPE * replicas * BATCH
    model.fit(x[:warmup], y[:warmup], batch_size=BATCH, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    profiling.write_report()
    device = model.ipu_report()["device_seconds_per_step"]
    if index:
        return None
    return {"replicas": replicas, "instances": instances, "us_per_step": seconds / steps * 1e6,
            "us_per_batch": seconds / (steps * replicas) * 1e6,
            "device_us_per_step": device * 1e6,
            "samples_per_second": replicas * BATCH / device}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64, help="a multiple of 16")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reports", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = run_one(args.one, args.steps, args.reports)
        if result is not None:
            print(json.dumps(result))
        return
    reports = tempfile.mkdtemp(prefix="replication_speed_")
    rows = []
    for replicas in REPLICAS:
        folder = os.path.join(reports, f"r{replicas}")
        out = subprocess.run([sys.executable, __file__, "--one", str(replicas), "--steps",
                              str(args.steps), "--reports", folder],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    out = subprocess.run([sys.executable, "-m", "ipu_keras", "run", "--num-instances", "2",
                          "--num-replicas", "4", "--", sys.executable, __file__, "--one", "4",
                          "--steps", str(args.steps), "--reports",
                          os.path.join(reports, "mpi")], capture_output=True, text=True,
                         check=True)
    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'replicas':>8s} {'host us/step':>13s} {'host us/batch':>14s} "
          f"{'device us/step':>15s} {'simulated samples/s':>20s}")
    for r in rows:
        name = f"{r['replicas']}" if r["instances"] == 1 else f"{r['replicas']} (2x2)"
        print(f"{name:>8s} {r['us_per_step']:13.1f} {r['us_per_batch']:14.1f} "
              f"{r['device_us_per_step']:15.1f} {r['samples_per_second']:20,.0f}")
    base = rows[0]
    for r in rows[1:]:
        host = r["us_per_batch"] / base["us_per_batch"]   # 2x2: as seen by instance 0
        throughput = r["samples_per_second"] / base["samples_per_second"]
        print(f"R={r['replicas']} in {r['instances']} process(es): host time per batch "
              f"{host:.2f}x of R=1; simulated throughput {throughput:.2f}x")
    from ipu_keras._src.reports import summary

    paths = summary.find_reports(os.path.join(reports, f"r{REPLICAS[-1]}"))
    loaded = [summary.load(p) for p in paths]
    train = max(loaded, key=lambda rep: (rep.get("execution") or {}).get("total_cycles", 0))
    print(f"==== report summary of the {REPLICAS[-1]}-replica training executable")
    print(summary.summarise(train))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
