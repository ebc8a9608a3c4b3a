"""Generated graphs as data, and the builder the op families draw them with.

A `Graph` is a list of steps, each defining one value `v<i>`: an `Input` (a numpy array
fed to the function) or an `Op` (a registered fuzz op applied to earlier values with
static parameters). Its repr is a small program, so a failing example prints readably,
and hypothesis shrinks it like any other data. `build` turns a graph into a Python
function of its inputs made of TensorFlow calls; the test runs that function eagerly
in TensorFlow and compiled on the simulator.

`Builder` is what an op family sees while drawing: the facts (`tests.fuzz.facts`) of
the values so far, operand selection (an earlier value that fits, or a fresh input of
a given shape) and `emit` to append an op.
"""
import dataclasses

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.fuzz.facts import FLOATS, Facts, input_grid

# name -> (draw(builder) -> value index or None, build(*tensors, **params) -> tensor)
REGISTRY = {}


def fuzz_op(name, build):
    """Registers the decorated draw function as fuzz op `name` built by `build`."""

    def wrap(draw_fn):
        assert name not in REGISTRY, name
        REGISTRY[name] = (draw_fn, build)
        return draw_fn

    return wrap


@dataclasses.dataclass(frozen=True, eq=False)
class Input:
    array: np.ndarray

    def __repr__(self):
        a = self.array
        values = np.array2string(a.ravel(), separator=",", threshold=64).replace("\n", "")
        return f"input({a.dtype.name}{list(a.shape)}, {values})"


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    args: tuple
    params: tuple

    def __repr__(self):
        parts = [f"v{i}" for i in self.args] + [f"{k}={v!r}" for k, v in self.params]
        return f"{self.name}({', '.join(parts)})"


class Graph:
    """Steps (inputs and ops), the facts of each value, and the indices returned."""

    def __init__(self, steps, facts, outputs):
        self.steps, self.facts, self.outputs = steps, facts, outputs

    def __repr__(self):
        lines = [f"  v{i} = {s!r}" for i, s in enumerate(self.steps)]
        lines.append("  return " + ", ".join(f"v{i}" for i in self.outputs))
        return "Graph(\n" + "\n".join(lines) + "\n)"

    def arrays(self):
        return [s.array for s in self.steps if isinstance(s, Input)]


def build(graph):
    """A Python function of the graph's input arrays that computes its outputs with TF."""

    @tf.autograph.experimental.do_not_convert
    def fn(*arrays):
        feed = iter(arrays)
        values = []
        for step in graph.steps:
            if isinstance(step, Input):
                values.append(next(feed))
            else:
                values.append(REGISTRY[step.name][1](*[values[i] for i in step.args],
                                                     **dict(step.params)))
        return [values[i] for i in graph.outputs]

    fn.__name__ = "fuzz_graph"
    return fn


# Size-0 dims are one draw in ten: any of them empties everything downstream.
_DIMS = (2, 1, 3, 4, 2, 3, 1, 0, 4, 2)
_RANGES = {"grid": (-16, 16), "nonzero": (4, 16)}


def _elements(dtype, kind, high):
    """Element strategy and declared (lo, hi, nz) of a fresh input of `kind`."""
    if dtype == "bool":
        return st.booleans(), (0, 1, 0.0)
    if dtype == "int32":
        if kind == "index":
            return st.integers(0, high - 1), (0, high - 1, 0.0)
        if kind == "nonzero":
            return st.integers(1, 5).flatmap(lambda k: st.sampled_from([k, -k])), (-5, 5, 1.0)
        return st.integers(-5, 5), (-5, 5, 0.0)
    sign = st.sampled_from([1.0, -1.0])
    if kind == "rough":
        width = 16 if dtype == "float16" else 32
        magnitude = st.floats(1 / 16, 2.0, width=width)
        nonzero = st.tuples(sign, magnitude).map(lambda t: t[0] * t[1])
        return st.one_of(st.just(0.0), nonzero), (-2.0, 2.0, 0.0)
    lo, hi = _RANGES[kind]
    if kind == "nonzero":
        steps = st.tuples(sign, st.integers(lo, hi)).map(lambda t: t[0] * t[1] / 8)
        return steps, (-2.0, 2.0, 0.5)
    return st.integers(lo, hi).map(lambda k: k / 8), (-2.0, 2.0, 0.0)


class Builder:
    """Draws a graph step by step for the op families (see module docstring)."""

    def __init__(self, draw):
        self.draw = draw
        self.steps = []
        self.facts = []

    # -- random choices
    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def flag(self):
        return self.draw(st.booleans())

    def draw_permutation(self, items):
        return self.draw(st.permutations(list(items)))

    def dim(self):
        return self.choice(_DIMS)

    def shape(self, min_rank=0, max_rank=3):
        rank = self.integer(min_rank, max_rank)
        return tuple(self.dim() for _ in range(rank))

    def float_dtype(self):
        return self.choice(FLOATS)

    # -- values
    def candidates(self, pred):
        return [i for i, f in enumerate(self.facts) if not f.terminal and pred(f)]

    def pick(self, pred):
        """An earlier value satisfying `pred`, or None if there is none."""
        found = self.candidates(pred)
        return self.choice(found) if found else None

    def pick_or_fresh(self, shape, dtype, pred=lambda f: True, kind=None):
        """An earlier value of this shape and dtype satisfying `pred`, or a fresh input."""
        found = self.candidates(lambda f: f.shape == shape and f.dtype == dtype and pred(f))
        if found and self.flag():
            return self.choice(found)
        return self.fresh(shape, dtype, kind)

    def fresh(self, shape, dtype, kind=None, high=None):
        """A new input. kind: "grid" (default), "rough" (floats), "nonzero" or "index"."""
        if kind is None:
            kind = self.choice(["grid", "rough"]) if dtype in FLOATS else "grid"
        elements, (lo, hi, nz) = _elements(dtype, kind, high)
        # fill=nothing: draw every element, rather than mostly one repeated fill value.
        array = self.draw(hnp.arrays(np.dtype(dtype), shape, elements=elements,
                                     fill=st.nothing()))
        facts = Facts(tuple(shape), dtype, lo, hi, 0.0, input_grid(dtype, kind), nz)
        return self.add_input(array, facts)

    def add_input(self, array, facts):
        self.steps.append(Input(array))
        self.facts.append(facts)
        return len(self.steps) - 1

    def emit(self, name, args, facts, **params):
        """Appends op `name`; None (and nothing appended) if its result would overflow."""
        if facts is None or not facts.within_limit():
            return None
        self.steps.append(Op(name, tuple(args), tuple(sorted(params.items()))))
        self.facts.append(facts)
        return len(self.steps) - 1

    def graph(self):
        outputs = tuple(i for i, s in enumerate(self.steps) if isinstance(s, Op))
        return Graph(tuple(self.steps), tuple(self.facts), outputs)
