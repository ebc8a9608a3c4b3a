"""The memory model against Graphcore's published claims: prints one row per case.

The cases (a configuration that fits one IPU or does not, or the bytes Poplar's report
gave for a program), their sources and why they compare, live in
`tests/fidelity/test_memory_fit.py`: `CASES`, which the test checks, and `OPEN_CASES`,
the published claims the simulator does not meet yet (each says why). This script
compiles each workload (no execution) and prints the case, the published claim, ours,
our total / published, our busiest tile's bytes, whether they agree, and the source.

    python bench/memory_fit.py [--fast]     # --fast skips the cases marked slow
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _rows(cases, fast):
    from ipu_keras import config
    from tests.fidelity.test_memory_fit import run_case

    rows = []
    for case, workload in cases:
        if fast and case.slow:
            continue
        rows.append((case, *run_case(case, workload)))
        config.reset_ipu_configuration()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="skip the slow cases")
    args = parser.parse_args(argv)
    from tests.fidelity.test_memory_fit import CASES, OPEN_CASES, agrees, print_table

    passing = _rows(CASES, args.fast)
    print_table(passing, "memory cases (tests/fidelity/test_memory_fit.py)")
    still_open = _rows(OPEN_CASES, args.fast)
    print_table(still_open, "open memory cases (not yet met; each case's text says why)")
    rows = passing + still_open
    agree = [case.name for case, fits, total, tile in rows
             if agrees(case, fits, total, tile)]
    print(f"\n{len(agree)} of {len(rows)} published memory claims agree "
          f"(issue 33's goal: all)")


if __name__ == "__main__":
    main()
