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
* the TensorFlow op types it is imported from, with `tf_import`;
* and the facts the compiler and the simulator ask the op instead of keeping tables of
  op names (each has a default, so most ops set none):

  - `role` (one of `ROLES`): what the lowering and the engine do with it. "compute" (the
    default): a step that runs its kernel. The engine's own ops: "constant" (a preset
    slot), "variable_read", "variable_write", "stream_in" / "stream_out" (infeed and
    outfeed), "replica_reduce" / "replica_index" (collectives, handed to the runtime),
    "loop" / "branch" (control flow with sub-graphs), "subgraph_call" (inlined before
    lowering), "link_copy" (a compute step whose bytes also cross the IPU-Links),
    "host_call" (a step that runs its kernel on the host: its operands and results
    cross the host link, with an external sync, and no tile computes);
  - `tile_rule` (one of `TILE_RULES`, or a callable `(params) -> one of them`): the strict
    tile mode's dependency rule (`simulator/tile_rules.py`), default "fallback". With
    it: `tile_moves`, for "probe", the operands whose elements the op moves ("all" or
    a tuple of indices); `tile_fill`, the operand that is a fill value (no source in a
    probe, needed by a tile owning an element copied from nowhere); `tile_index`,
    `(operand shapes, params, coords) -> mask` of operand 1, the indices of a lookup;
    `tile_axes`, `(operand shapes, output shape, params) -> axis maps`, the op's own
    axis maps in place of its rule's generic ones (`FULL` for a whole axis);
  - `plan` (one of `PLANS` or None): the planner problem it poses. Default: "matmul" for
    mapping "matmul", else None. `problem`: `(in_types, out_type, params) -> dict` of the
    planner's `Problem` fields (groups, m, k, n, dtype, out_itemsize, scales, ...); None:
    the planner derives one from the cost rule;
  - `exchange` (one of `EXCHANGES`): what tiles receive to run it (`passes/traffic.py`).
    "operands" (default): operands where the outputs are; "rows": the operands' whole
    rows behind the output rows; "tree": a reduction in place, partials through a tree
    (default for mapping "reduce"); "variable": the value where the variable is;
    "none": nothing;
  - `reduced_axes`: `(params, rank) -> sorted axes or None`, the axes a "tree" op reduces
    (None: not known), default from its `axes` or `axis` param (`axes_of_params`);
  - `recompute` (one of `RECOMPUTE`): what recomputation (`IPUConfig.allow_recompute`,
    `compiler/passes/recompute.py`) may do with it. "again" (default for a compute op):
    run it again in the backward pass instead of keeping its outputs; "never": keep its
    outputs (a stateful op: IPU TensorFlow stashes what draws random numbers, Dropout);
    "per_use": a conversion, cloned before each reader when its operand is a parameter
    (IPU TensorFlow's RecomputeCasts); "checkpoint": a recomputation checkpoint, whose
    value is kept and where recomputation starts;
  - `view`: `(in_types, out_types, **params) -> groups per output, or None`, for an op
    whose outputs are views of its operands' elements (Poplar's `Tensor::slice` and
    `poplar::concat` return views, not copies): each output's flat elements as groups
    `(operand, first, pitch, length, count, at, step)` of `count` runs of `length`
    elements, run `j` being the operand's flat elements from `first + j * pitch` and
    the output's from `at + j * step`, covering the output once; None (per equation:
    e.g. a strided slice with steps, or more than `MAX_VIEW_GROUPS` groups) when the
    equation copies. Default None: never a view. The tile map then leaves the elements
    on their operands' tiles, and the memory plan gives the outputs no bytes of their
    own (`compiler/passes/views.py`);
  - `region`: `(in_types, out_types, **params) -> groups`, for an op that computes only
    part of its output, the rest being operand 0's elements where they are (written in
    place: IPU TensorFlow's SliceApply): the runs of the operand that supply the
    computed elements, as `view` groups. The exchange brings those runs to the tiles
    holding their output positions, and the work is spread as they are; strict tile
    mode replays it by its region (its `tile_rule` is "region"). Default None: the op
    computes its whole output;
  - `chain` (one of `CHAINS`): its part in the Conv -> Norm -> non-linearity chain that
    recomputation recomputes outside pipelines (IPU TensorFlow's RecomputeInstructions):
    "norm" (a batch norm of batch statistics), "norm_grad", "nonlinearity" (relu,
    sigmoid), "nonlinearity_grad"; None (default) for no part;
  - `function`: True, or `(in_types, out_types, **params) -> bool` per equation, for an op
    IPU TensorFlow runs as a cached Poplar function (its OutlineInstructions pass wraps
    every dot, convolution, batch norm and PopLibs LSTM or GRU layer:
    graphcore/tensorflow@b2127bb,
    tensorflow/compiler/plugin/poplar/driver/passes/outline_instructions.cc): each call
    copies the operands into the function's own inputs and its outputs out into new
    tensors (ops/map_ops.cc, `CreateFunctionOp`); the memory plan charges the operands'
    copies (`compiler/passes/memory.py`, which says why not the outputs'). Default
    False.

A module may also register, with `register_pair`, one kernel for an op followed by the
only reader of its output (the engine's pairs, `simulator/pairs.py`).

Importers never import TensorFlow: they see a `node` (type, name, attrs, IR input
values, static values of inputs, TensorFlow's inferred output types) and a builder
`b` whose `emit(op, inputs, **params)` appends an equation. See `tracer/node.py`.
"""
import collections
import dataclasses
import sys

import numpy as np

Work = collections.namedtuple("Work", "kind amount steps carried", defaults=(1, 0))
"""What one execution of an op costs: `kind` is one of `WORK_KINDS`, `amount` is
elements for "vector"/"transcendental"/"copy", multiply-accumulates for "amp".

A recurrence is `steps` dependent steps, one after the other, each doing `amount / steps`
spread over the tiles; before each step every working tile receives the `carried` bytes
the previous step produced (an RNN's state), an exchange and a sync per step."""

WORK_KINDS = ("none", "vector", "transcendental", "amp", "copy", "reduce")
MAPPINGS = ("elementwise", "linear", "matmul", "reduce", "single", "engine")
ROLES = ("compute", "constant", "variable_read", "variable_write", "stream_in", "stream_out",
         "replica_reduce", "replica_index", "loop", "branch", "subgraph_call", "link_copy",
         "host_call")
TILE_RULES = ("elementwise", "rows", "reduce", "channel", "window", "conv", "matmul", "probe",
              "region", "fallback")
PLANS = ("matmul", "conv", "gather")
EXCHANGES = ("operands", "rows", "tree", "variable", "none")
RECOMPUTE = ("again", "never", "per_use", "checkpoint")
CHAINS = ("norm", "norm_grad", "nonlinearity", "nonlinearity_grad")
MAX_VIEW_GROUPS = 4096
"""Most groups of runs a `view` gives one output; a view needing more (a slice of a few
rows of each of many matrices) is modelled as the copy it is not: a modelling limit,
not a Poplar one."""
FULL = None
"""In a `tile_axes` axis map: the operand axis is needed whole."""

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
    role: str = "compute"
    tile_rule: object = "fallback"
    tile_moves: object = None
    tile_fill: object = None
    tile_index: object = None
    tile_axes: object = None
    plan: object = None
    problem: object = None
    exchange: str = "operands"
    reduced_axes: object = None
    recompute: str = "again"
    chain: str = None
    view: object = None
    region: object = None
    function: object = False

    def tile_rule_for(self, params):
        """The strict tile rule of one equation of this op (see `tile_rule`)."""
        return self.tile_rule(params) if callable(self.tile_rule) else self.tile_rule

    def runs_as_function(self, in_types, out_types, params):
        """Whether one equation of this op is a cached Poplar function (see `function`)."""
        if callable(self.function):
            return bool(self.function(in_types, out_types, **params))
        return bool(self.function)


_OPS = {}
_IMPORTERS = {}
_PAIRS = {}

Pair = collections.namedtuple("Pair", "name kernel link same")
"""One kernel for op `first` followed by op `second` (`register_pair`)."""


def axes_of_params(params, rank):
    """The default `reduced_axes`: the op's `axes` param, else its `axis`, else None."""
    if "axes" in params:
        return sorted({a % rank for a in np.atleast_1d(params["axes"]).tolist()}) if rank else []
    if "axis" in params:
        return [params["axis"] % rank] if rank else []
    return None


def register_op(name, *, shape, kernel=None, cost, mapping, effect=False, engine=False,
                rowwise=False, role="compute", tile_rule="fallback", tile_moves=None,
                tile_fill=None, tile_index=None, tile_axes=None, plan=None, problem=None,
                exchange=None, reduced_axes=axes_of_params, recompute="again", chain=None,
                view=None, region=None, function=False):
    """Register an IR op. Every rule is required; see the module docstring."""
    if name in _OPS:
        raise ValueError(f"Op '{name}' is registered twice.")
    if mapping not in MAPPINGS:
        raise ValueError(f"Unknown mapping {mapping!r} for op '{name}'.")
    if kernel is None and not engine:
        raise ValueError(f"Op '{name}' needs a kernel unless the engine runs it.")
    if plan is None and mapping == "matmul":
        plan = "matmul"
    if exchange is None:
        exchange = "tree" if mapping == "reduce" else "operands"
    _check_fact(name, "role", role, ROLES)
    _check_fact(name, "plan", plan, PLANS + (None,))
    _check_fact(name, "exchange", exchange, EXCHANGES)
    _check_fact(name, "recompute", recompute, RECOMPUTE)
    _check_fact(name, "chain", chain, CHAINS + (None,))
    if not callable(tile_rule):
        _check_fact(name, "tile_rule", tile_rule, TILE_RULES)
    if not callable(function) and function not in (True, False):
        raise ValueError(f"Op '{name}' has a `function` that is neither a bool nor a "
                         f"callable: {function!r}.")
    for fact, rule in (("view", view), ("region", region)):
        if rule is not None and not callable(rule):
            raise ValueError(f"Op '{name}' has a `{fact}` that is not a callable: {rule!r}.")
    if region is not None and tile_rule == "fallback":
        tile_rule = "region"    # strict mode replays the op by its region
    if (tile_rule == "region") != (region is not None):
        raise ValueError(f"Op '{name}' has the region tile rule without a `region` fact, "
                         f"or a `region` fact with the tile rule {tile_rule!r}.")
    if tile_rule == "probe" and tile_moves is None:
        raise ValueError(f"Op '{name}' has the probe tile rule but no `tile_moves`.")
    module = sys._getframe(1).f_globals.get("__name__", "")
    _OPS[name] = OpDef(name, shape, kernel, cost, mapping, effect, engine, module, rowwise,
                       role, tile_rule, tile_moves, tile_fill, tile_index, tile_axes, plan,
                       problem, exchange, reduced_axes, recompute, chain, view, region,
                       function)
    return _OPS[name]


def _check_fact(name, fact, value, known):
    if value not in known:
        raise ValueError(f"Unknown {fact} {value!r} for op '{name}'.")


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
