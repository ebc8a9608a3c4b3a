"""Kernels on one core against a slab per core (ops/cores.py), per size: where splitting pays.

During an execution the simulator runs BLAS on one thread and splits products of at
least `WIDE_MACS` multiply-accumulates and elementwise kernels of at least
`SPLIT_ELEMENTS` outputs into one slab per core. This prints, for the products and
elementwise kernels of the benchmark families (the Keras tutorial CNN's convolutions as
im2col products, Transformer projections and GELU, a small Dense), the best time of each
over repeated calls unsplit and split, their ratio, and whether the simulator splits it.
Memory-bound elementwise kernels (add, mul, relu) are not split: on the two-core machine
this was measured on they were no faster (0.7x-1.2x).

    python bench/host_cores.py [--repeats 20]
"""
import argparse
import os
import sys
import time

import numpy as np

PRODUCTS = [  # (m, k, n): an (m, k) @ (k, n) product
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
ELEMENTWISE = [  # (op, shape): the compute-bound ones, which are split
    ("erfc", (16, 128, 1024)),       # Transformer GELU
    ("exp", (16, 128, 1024)),        # ... its gradient
    ("softmax", (16, 4, 128, 128)),  # attention weights
    ("tanh", (64, 26, 26, 32)),
]


def best_time(fn, repeats):
    """The best of `repeats` timed calls of `fn`, after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _row(name, size, unit, one, split, is_split):
    print(f"{name:>26s} {size:10.1f} {unit:5s} {1e3 * one:9.3f} {1e3 * split:9.3f} "
          f"{one / split:7.2f}x {'yes' if is_split else 'no'}")


def main():
    from ipu_keras._src.ops import cores
    from ipu_keras._src.ops.registry import get_op

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'kernel':>26s} {'size':>10s} {'':5s} {'1 core ms':>9s} {'split ms':>9s} "
          f"{'speed-up':>8s} split")
    with cores.execution():
        count = cores.slabs()
        for m, k, n in PRODUCTS:
            a = rng.random((m, k), dtype=np.float32)
            b = rng.random((k, n), dtype=np.float32)
            one = best_time(lambda: np.matmul(a, b), args.repeats)
            split = best_time(lambda: cores.matmul(a, b), args.repeats)
            _row(f"matmul {m} x {k} x {n}", m * k * n / 1e6, "MMACs", one, split,
                 count > 1 and m * k * n >= cores.WIDE_MACS and m >= cores.MIN_SLAB_ROWS * count)
        for op, shape in ELEMENTWISE:
            xs = [rng.standard_normal(shape).astype(np.float32)]
            kernel = get_op(op).kernel
            split = best_time(lambda: kernel(*xs), args.repeats)
            with cores.execution(widen=False):
                one = best_time(lambda: kernel(*xs), args.repeats)
            _row(f"{op} {'x'.join(map(str, shape))}", np.prod(shape) / 1e6, "M", one, split,
                 count > 1 and np.prod(shape) >= cores.SPLIT_ELEMENTS)
    print(f"slabs per split kernel: {count}; WIDE_MACS = {cores.WIDE_MACS:,}; "
          f"SPLIT_ELEMENTS = {cores.SPLIT_ELEMENTS:,}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
