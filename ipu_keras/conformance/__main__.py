"""`python -m ipu_keras.conformance [-j WORKERS] [NAME_FILTER]`: the conformance table.

Runs every catalogue item whose name contains NAME_FILTER (case-insensitive), in
WORKERS processes (default 1), and prints one line per item (its section, name, status,
margin: the largest difference over its tolerance, and what differed) and a summary.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from ipu_keras.conformance.catalogue import catalogue  # noqa: E402
from ipu_keras.conformance.runner import run_items  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m ipu_keras.conformance")
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("-j", "--workers", type=int, default=1)
    args = parser.parse_args(argv)
    items = [i for i in catalogue() if args.filter.lower() in i.name.lower()]
    results = []
    for _, result in run_items(items, args.workers):
        results.append(result)
        margin = "" if result.margin is None else f"{result.margin:6.3f}"
        print(f"{result.group:24s} {result.name:52s} {result.status:10s} {margin:6s} "
              f"{result.detail}", flush=True)
    matching = sum(r.status == "ok" for r in results)
    print(f"{matching}/{len(results)} catalogue items match TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
