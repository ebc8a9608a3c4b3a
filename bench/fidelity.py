"""The cycle model against Graphcore's published figures: prints one row per case.

The cases, their sources and their conversions to cycles on the IPU measured (one Mk2
unless a case says otherwise) live in `tests/fidelity/test_published.py` (`CASES`); this
script runs them all and prints case, estimate, published, estimate/published, whether
the case is independent of the model's own inputs, and the source.

    python bench/fidelity.py [--fast]     # --fast skips the cases marked slow
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="skip the slow cases")
    args = parser.parse_args(argv)
    from ipu_keras import config
    from tests.fidelity.test_published import CASES, print_table, run_case

    rows = []
    for case, workload in CASES:
        if args.fast and case.slow:
            continue
        estimate, ratio = run_case(case, workload)
        config.reset_ipu_configuration()
        rows.append((case, estimate, ratio))
    print_table(rows)
    outside = [c.name for c, _, r in rows if not 0.5 <= r <= 2.0]
    print(f"\n{len(rows) - len(outside)} of {len(rows)} cases within 2x"
          + (f"; outside: {', '.join(outside)}" if outside else ""))
    independent = [(c, r) for c, _, r in rows if c.independent]
    close = [c.name for c, r in independent if 0.75 <= r <= 1.25]
    print(f"{len(close)} of {len(independent)} independent cases within 25% "
          f"(issue 33's goal: all, and at least 8)")


if __name__ == "__main__":
    main()
