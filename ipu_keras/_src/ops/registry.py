"""The op registry: every IR op and every TensorFlow importer, by name.

An op family module (e.g. `ops/math.py`) registers, next to each other, for each
op it owns:

* `shape`: `(in_types, **params) -> [TensorType, ...]`, the output types;
* `kernel`: `(*arrays, **params) -> array | tuple`, the numpy codelet. Ops run by the
  engine itself (control flow, variables, feeds) have `kernel=None` and `engine=True`;
* `cost`: `(in_types, out_types, **params) -> Work`, the work one execution does,
  which the simulator's cost model turns into cycles per tile;
* `mapping`: the tile-mapping preference (one of `MAPPINGS`);
* `rowwise`: each row of the output (index of its first axis) is computed from the same
  rows of the inputs, numpy-broadcast, alone: the engine may then run a chain of such
  ops a block of rows at a time (`simulator/fusion.py`);
* the TensorFlow op types it is imported from, with `tf_import`.

A module may also register, with `register_pair`, one kernel for an op followed by the
only reader of its output (the engine's pairs, `simulator/pairs.py`).

Importers never import TensorFlow: they see a `node` (type, name, attrs, IR input
values, static values of inputs, TensorFlow's inferred output types) and a builder
`b` whose `emit(op, inputs, **params)` appends an equation. See `tracer/node.py`.
"""
import collections
import dataclasses
import sys

Work = collections.namedtuple("Work", "kind amount steps carried", defaults=(1, 0))
"""What one execution of an op costs: `kind` is one of `WORK_KINDS`, `amount` is
elements for "vector"/"transcendental"/"copy", multiply-accumulates for "amp".

A recurrence is `steps` dependent steps, one after the other, each doing `amount / steps`
spread over the tiles; before each step every working tile receives the `carried` bytes
the previous step produced (an RNN's state), an exchange and a sync per step."""

WORK_KINDS = ("none", "vector", "transcendental", "amp", "copy", "reduce")
MAPPINGS = ("elementwise", "linear", "matmul", "reduce", "single", "engine")

NO_WORK = Work("none", 0)


@dataclasses.dataclass(frozen=True)
class OpDef:
    name: str
    shape: object
    kernel: object
    cost: object
    mapping: str
    effect: bool = False
    engine: bool = False
    module: str = ""
    rowwise: bool = False


_OPS = {}
_IMPORTERS = {}
_PAIRS = {}

Pair = collections.namedtuple("Pair", "name kernel link same")
"""One kernel for op `first` followed by op `second` (`register_pair`)."""


def register_op(name, *, shape, kernel=None, cost, mapping, effect=False, engine=False,
                rowwise=False):
    """Register an IR op. Every rule is required; see the module docstring."""
    if name in _OPS:
        raise ValueError(f"Op '{name}' is registered twice.")
    if mapping not in MAPPINGS:
        raise ValueError(f"Unknown mapping {mapping!r} for op '{name}'.")
    if kernel is None and not engine:
        raise ValueError(f"Op '{name}' needs a kernel unless the engine runs it.")
    module = sys._getframe(1).f_globals.get("__name__", "")
    _OPS[name] = OpDef(name, shape, kernel, cost, mapping, effect, engine, module, rowwise)
    return _OPS[name]


def register_pair(first, second, kernel, *, link, same=()):
    """Register `kernel(*first's operands, **first's params)` as op `second` applied to op
    `first`'s output, which is second's operand `link`; each of second's other operands is
    one of first's (`same`: pairs (second's operand, first's operand)), and second takes
    no params. The engine may run it instead of the two steps when nothing else reads
    first's output (`simulator/pairs.py`): it must give the bits of the two kernels run
    one after the other."""
    for name in (first, second):
        get_op(name)
    if (first, second) in _PAIRS:
        raise ValueError(f"The pair '{first}', '{second}' is registered twice.")
    _PAIRS[first, second] = Pair(f"{first}+{second}", kernel, link, tuple(same))


def get_pair(first, second):
    """The `Pair` registered for op `first` followed by op `second`, or None."""
    return _PAIRS.get((first, second))


def paired_ops():
    """The ops some pair starts with."""
    return {first for first, _ in _PAIRS}


def tf_import(*tf_types):
    """Decorator: register `fn(node, b)` as the importer of the given TensorFlow op types."""

    def wrap(fn):
        for tf_type in tf_types:
            if tf_type in _IMPORTERS:
                raise ValueError(f"TensorFlow op '{tf_type}' has two importers.")
            _IMPORTERS[tf_type] = fn
        return fn

    return wrap


def tf_direct(tf_type, op, **params):
    """Register the common importer: all inputs, in order, to one IR op with fixed params."""

    @tf_import(tf_type)
    def _import(node, b):
        return b.emit(op, node.inputs, **params)

    return _import


def get_op(name):
    try:
        return _OPS[name]
    except KeyError:
        raise KeyError(f"No IR op named '{name}' is registered.") from None


def get_importer(tf_type):
    return _IMPORTERS.get(tf_type)


def all_ops():
    return dict(_OPS)


def supported_tf_ops():
    """The TensorFlow op types the tracer can import, sorted."""
    return sorted(_IMPORTERS)
