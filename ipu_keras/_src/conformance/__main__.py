"""`python -m ipu_keras._src.conformance [-j WORKERS] [--name NAME ...] [--json] [NAME_FILTER]`.

Runs every catalogue item whose name contains NAME_FILTER (case-insensitive), or the
items named exactly by `--name` (repeatable), in WORKERS processes (default 1), and
prints one line per item (its section, name, status, margin: the largest difference
over its tolerance, and what differed) and a summary. With `--json` each line is
instead the item's `Result` as a JSON object and there is no summary: what the test
suite reads when it runs the catalogue in a process beside its other tests.
"""
import argparse
import dataclasses
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from ipu_keras._src.conformance.catalogue import catalogue  # noqa: E402
from ipu_keras._src.conformance.runner import run_items  # noqa: E402


def _line(result):
    margin = "" if result.margin is None else f"{result.margin:6.3f}"
    return (f"{result.group:24s} {result.name:52s} {result.status:10s} {margin:6s} "
            f"{result.detail}")


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m ipu_keras._src.conformance")
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("-j", "--workers", type=int, default=1)
    parser.add_argument("--name", action="append", default=[],
                        help="run the item of exactly this name (repeatable)")
    parser.add_argument("--json", action="store_true", help="a JSON object per result")
    args = parser.parse_args(argv)
    by_name = {item.name: item for item in catalogue()}
    unknown = [name for name in args.name if name not in by_name]
    if unknown:
        parser.error(f"no catalogue item named {unknown[0]!r}")
    items = [by_name[name] for name in args.name] or [
        item for name, item in by_name.items() if args.filter.lower() in name.lower()]
    results = []
    for _, result in run_items(items, args.workers):
        results.append(result)
        print(json.dumps(dataclasses.asdict(result)) if args.json else _line(result),
              flush=True)
    if not args.json:
        matching = sum(r.status == "ok" for r in results)
        print(f"{matching}/{len(results)} catalogue items match TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
