"""numpy's BLAS on one thread against every core, per product size: where widening pays.

The simulator runs BLAS on one thread during an execution and lends it every core for
products of at least `ipu_keras.ops.blas.WIDE_MACS` multiply-accumulates. This prints,
for products of the sizes the benchmark families run (the Keras tutorial CNN's
convolutions as im2col products, Transformer projections, a small Dense), the best time
of each over repeated calls with one thread and with every core, their ratio, and
whether the simulator widens it.

    python bench/blas_threads.py [--repeats 30]
"""
import argparse
import os
import sys
import time

import numpy as np

SHAPES = [  # (m, k, n): a (m, k) @ (k, n) product
    (64, 1600, 10),        # tutorial CNN's Dense, batch 64
    (256, 784, 128),       # MNIST MLP's Dense, batch 32 x 8
    (43264, 9, 32),        # tutorial CNN's first convolution (1 channel in)
    (9, 43264, 32),        # ... its filter gradient
    (7744, 288, 64),       # tutorial CNN's second convolution
    (288, 7744, 64),       # ... its filter gradient
    (7744, 64, 288),       # ... its input gradient
    (2048, 256, 256),      # Transformer attention projection, 16 x 128 tokens
    (2048, 256, 1024),     # Transformer feed-forward up
    (2048, 1024, 256),     # Transformer feed-forward down
]


def best_time(a, b, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    from ipu_keras.ops import blas

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'m x k x n':>20s} {'MMACs':>8s} {'1 thread ms':>11s} {'all cores ms':>12s} "
          f"{'speed-up':>8s} widened")
    with blas.execution():
        cores = blas.wide_threads()
        for m, k, n in SHAPES:
            a = rng.random((m, k), dtype=np.float32)
            b = rng.random((k, n), dtype=np.float32)
            one = best_time(a, b, args.repeats)
            blas.set_threads(cores)
            try:
                every = best_time(a, b, args.repeats)
            finally:
                blas.set_threads(1)
            macs = m * k * n
            print(f"{f'{m} x {k} x {n}':>20s} {macs / 1e6:8.1f} {1e3 * one:11.3f} "
                  f"{1e3 * every:12.3f} {one / every:7.2f}x "
                  f"{'yes' if macs >= blas.WIDE_MACS and cores > 1 else 'no'}")
    print(f"cores lent to a wide product: {cores}; WIDE_MACS = {blas.WIDE_MACS:,}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
