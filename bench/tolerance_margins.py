"""Mixed-precision tolerances under TensorFlow's CPU settings: how much of each bound is used.

TensorFlow's float16 kernels take different paths with oneDNN on or off, with more or
fewer intra-op threads, and on processors with other instruction sets. This script runs
every catalogue item with a mixed-precision policy once per setting, each setting in a
fresh process (the variables are read when TensorFlow loads), one setting at a time:

* `default`: the machine as it is;
* `onednn=0`, `onednn=1`: `TF_ENABLE_ONEDNN_OPTS`;
* `threads=1`, `threads=2`: `TF_NUM_INTRAOP_THREADS`;
* `isa=SSE41`, `isa=AVX`, `isa=AVX2`: `ONEDNN_MAX_CPU_ISA` (oneDNN on), the kernel paths
  of older processors.

Per item and setting it prints the margin of the simulator's run (its largest difference
over what its tolerance allows; at most 1 passes) and, for items compared with a float32
twin, TensorFlow's own float16 run measured the same way (reported, not asserted: it shows
how much of the bound a second implementation of the arithmetic uses). With `--ops` each
setting also runs the float16 op tests (`pytest tests/ops -k "float16 or f16"`).

Run from the repository root: `python bench/tolerance_margins.py [--ops] [SETTING ...]`.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = {
    "default": {},
    "onednn=0": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "onednn=1": {"TF_ENABLE_ONEDNN_OPTS": "1"},
    "threads=1": {"TF_NUM_INTRAOP_THREADS": "1"},
    "threads=2": {"TF_NUM_INTRAOP_THREADS": "2"},
    "isa=SSE41": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "isa=AVX": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX"},
    "isa=AVX2": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def _child():
    """Runs the policy items here and prints one JSON line per item."""
    sys.path.insert(0, str(ROOT))
    from ipu_keras._src.conformance.catalogue import catalogue
    from ipu_keras._src.conformance.runner import run_items

    items = [item for item in catalogue() if item.policy]
    for item, result in run_items(items, workers=1):
        print(json.dumps({"name": item.name, "status": result.status,
                          "detail": result.detail, "margin": result.margin,
                          "tensorflow_margin": result.tensorflow_margin,
                          "tolerance": item.tolerance.name}), flush=True)


def _environment(setting):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    for name in ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "ONEDNN_MAX_CPU_ISA"):
        env.pop(name, None)
    env.update(SETTINGS[setting])
    return env


def _run_setting(setting, ops):
    env = _environment(setting)
    out = subprocess.run([sys.executable, __file__, "--child"], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    tests = ""
    if ops:
        done = subprocess.run([sys.executable, "-m", "pytest", "tests/ops", "-q", "-k",
                               "float16 or f16", "-p", "no:cacheprovider"], env=env, cwd=ROOT,
                              capture_output=True, text=True)
        tests = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    return rows, tests


def _number(value):
    return "—" if value is None else f"{value:.3f}"


def main(argv):
    parser = argparse.ArgumentParser(prog="python bench/tolerance_margins.py")
    parser.add_argument("settings", nargs="*", default=list(SETTINGS))
    parser.add_argument("--ops", action="store_true", help="also run the float16 op tests")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child()
        return 0
    failures = 0
    print(f"{'setting':10s} {'item':56s} {'status':8s} {'margin':>7s} {'tf':>7s}  tolerance")
    for setting in args.settings:
        rows, tests = _run_setting(setting, args.ops)
        for row in rows:
            failures += row["status"] != "ok"
            print(f"{setting:10s} {row['name']:56s} {row['status']:8s} "
                  f"{_number(row['margin']):>7s} {_number(row['tensorflow_margin']):>7s}  "
                  f"{row['tolerance']} {row['detail']}", flush=True)
        largest = max((r["margin"] or 0.0) for r in rows)
        print(f"{setting:10s} largest margin {largest:.3f}" + (f"; op tests: {tests}" if
                                                                  tests else ""), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
