"""Kernel steps written for numpy's vectorized loops (ops/simd.py, the bias kernels) against
the plain numpy calls they replace, on the shapes of the benchmark families.

Each row times both formulations (best of `--repeats` calls, the heap kept as during an
execution, `runtime/host_heap.py`) and checks that they agree: bitwise for `against`,
`select` and the bias add, to float32 rounding for the bias gradient (it sums in
another order).

    python bench/simd_steps.py [--repeats 50]
"""
import argparse
import os
import sys

import numpy as np

from host_cores import best_time   # bench/ is the script's directory


def _cases(rng):
    """(step, shape, plain call, replacement, None for bitwise or the tolerance row)."""
    from ipu_keras._src.conformance import tolerances as T
    from ipu_keras._src.ops import simd
    from ipu_keras._src.ops.registry import get_op

    conv1 = rng.standard_normal((64, 26, 26, 32)).astype(np.float32)
    conv2 = rng.standard_normal((64, 11, 11, 64)).astype(np.float32)
    hidden = rng.standard_normal((16, 128, 1024)).astype(np.float32)
    flat = rng.standard_normal((64, 1600)).astype(np.float32)
    keep = rng.random((64, 1600)) >= 0.5
    zero = np.zeros((), np.float32)
    bias_add, bias_grad = get_op("bias_add").kernel, get_op("bias_add_grad").kernel
    for name, x in (("relu", conv1), ("relu", conv2), ("relu", hidden)):
        yield (name, x.shape, lambda x=x: np.maximum(x, 0),
               lambda x=x: simd.against(np.maximum, x, 0), None)
    yield ("dropout select", flat.shape, lambda: np.where(keep, flat, zero),
           lambda: simd.select(keep, flat, zero), None)
    yield ("select", flat.shape, lambda: np.where(keep, flat, -flat),
           lambda: simd.select(keep, flat, -flat), None)
    slab = rng.standard_normal((4, 4, 4, 256)).astype(np.float32)   # a ResNet-50 conv slab
    pads = ((0, 0), (1, 1), (1, 1), (0, 0))
    yield ("pad", slab.shape, lambda: np.pad(slab, pads), lambda: simd.pad(slab, pads), None)
    for x in (conv1, conv2):
        b = rng.standard_normal(x.shape[-1]).astype(np.float32)
        yield ("bias_add", x.shape, lambda x=x, b=b: np.add(x, b.reshape(1, 1, 1, -1)),
               lambda x=x, b=b: bias_add(x, b), None)
        terms = x.size // x.shape[-1]   # standard normal terms: rms 1
        yield ("bias_add_grad", x.shape, lambda x=x: np.sum(x, axis=(0, 1, 2)),
               lambda x=x: bias_grad(x), T.float32_sum(f"bias gradient of {terms}", terms, 1.0))


def main():
    from ipu_keras._src.runtime.host_heap import keep_freed_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    keep_freed_memory()
    print(f"{'step':>16s} {'shape':>16s} {'numpy ms':>9s} {'simd ms':>9s} {'speed-up':>8s}")
    for name, shape, plain, fast, tolerance in _cases(np.random.default_rng(0)):
        want, got = plain(), fast()
        if tolerance is None:
            assert want.dtype == got.dtype and want.tobytes() == got.tobytes(), name
        else:
            tolerance.assert_close(got, want, name)
        one, two = best_time(plain, args.repeats), best_time(fast, args.repeats)
        print(f"{name:>16s} {'x'.join(map(str, shape)):>16s} {1e3 * one:9.3f} {1e3 * two:9.3f} "
              f"{one / two:7.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
