"""Liveness and the memory plan: bytes per tile and per category, always-live or not.

Always-live (for the whole program): variables, constants, stream buffers (one element of
each host stream on the tiles it lands on or leaves from), vertex state (per vertex) and,
when `compile_ipu_code` is on, code: vertex code (per distinct vertex type on a tile),
control code (per program step, on every tile) and exchange code (per exchange phase, on
each receiving tile); an outlined function's body shared by several calls is counted once
(`walk_once`), and so is a forward stage rerun by RecomputeThenBackpropagate
(`stages.shares_forward_code`). Vertex state is data, not code: Poplar counts it whether
or not the code is compiled. Graphcore's tut4 profile of an IPU Model that does not
compile code (github.com/graphcore/examples @ 3cc8f81,
tutorials/tutorials/poplar/tut4_profiling/screenshots: PopVision_GA_memory.png shows 0 B
of control, vertex and exchange code; PopVision_GA_liveness.png lists
`vertexInstanceState` 271 kB and `vertexFieldData` 222 kB among the always-live variables
of the tutorial's report, whose summary counts 16,877 vertices: about 16 bytes of
instance state each, as `VERTEX_STATE_BYTES`).

Not-always-live ("temporaries"): every other value, live from the step that defines
it to its last use (views such as `reshape` share their source's memory; a view of
parts of several values, a static slice, a split or a concatenation, keeps each of them
alive as long as it lives, `views.py`; and an elementwise step writes its result in
place of an operand it reads last), plus what
a step needs only while it runs: a planned op's temporaries (operand copies and
partials, each tile its own: `Plan.tile_temp_bytes`) or, for other ops, the operand
elements exchanged onto the tile. A control-flow step (a call, a loop, a branch) is
three: it copies its operands into its bodies' own inputs (what is live before it, the
copies and their exchange), runs the bodies (their peak on top of what is live around
it, less the operands it reads last, which died once copied) and copies the bodies'
outputs out into its results. A step whose op IPU TensorFlow runs as a cached Poplar
function (the op's `function` fact: every dot, convolution, batch norm and PopLibs
recurrent layer) is such a call with the op alone for its body: the function's inputs
are copies of all its operands, made on every call, even of an operand the function
itself allocated, which the caller holds as a clone of the function's input
(graphcore/tensorflow@b2127bb,
tensorflow/compiler/plugin/poplar/driver/ops/map_ops.cc, `CreateFunctionOp`, and
visitors/deferred_visitor.cc, `PropagateDeferredAllocations`); the op's temporaries sit
beside the copies and its output, which is never written in place of an operand.
`CreateFunctionOp` also duplicates the output out (`poputil::duplicate`); that copy is
not charged, because Graphcore's figures rule it out where it would be the peak: in
MatMulSizeTest.testTrainingBs1 (size_speed_tests/matmul_size_test.py, 7,738,391 bytes
of all tiles) a weight [50176, 32] float16 (3.2 MB) beside its outer-product gradient
and that gradient's duplicate would already be 9.6 MB. The peak over the program, per
tile, is what the tile must hold at worst; `liveness` lists the not-always-live bytes
(all tiles) during each top-level step; `live_ranges` gives, for reports, the steps
between which each value is live.

Vertex code is counted from poplibs' assembly (`CODELET_INSTRUCTIONS`); the other code
and state sizes are estimates, documented next to their constants.
"""
import dataclasses

import numpy as np

from ipu_keras._src.compiler.passes import traffic
from ipu_keras._src.compiler.passes.outline import body_key, is_outlined
from ipu_keras._src.compiler.passes.stages import shares_forward_code
from ipu_keras._src.flags import engine_options, flag_as_bool
from ipu_keras.errors import OutOfTileMemoryError
from ipu_keras._src.ops.registry import get_op

INSTRUCTION_BYTES = 4
"""Every IPU instruction is 32 bits; a bundle `{a; b}` is two of them."""
CODELET_INSTRUCTIONS = {
    "ConvPartial1x1Out": 86 + 17 + 157,
    "ConvPartialnx1": 268 + 20 + 133,
    "OuterProduct": 107,
    "ReduceAdd": 90 + 21,
    "MultiSlice": 125,
    "BinaryOp1D": 12 + 7 + 12 + 55,
    "NonLinearity1D": 55,
    "Fill": 37,
}
"""Instructions of one instantiation of each poplibs codelet, counted in its assembly at
graphcore/poplibs@7eac0f2 (instruction lines, both arms of every `.if` counted, so
each is an upper bound), files under lib/poplin/codelets/asm and lib/popops/codelets/asm:
ConvPartial1x1Out: conv_partial_1x1_supervisor.S 106-314 (the supervisor macro), its
128-bit 8-engine weight load (16 `ld128putcs` and a store) and
conv_partial_1x1_half_float_8_and_half_half_h16.S 22-469 (the worker); ConvPartialnx1:
conv_partial_nx1_supervisor.S 197-682, its weight load (20) and
conv_partial_nx1_half_float_8_and_half_half_16.S 32-431; OuterProduct: OuterProduct.S;
ReduceAdd: ReduceAdd.S 166-344 (ReduceAdd_Float_Half) and its worker preamble and
division 117-154; MultiSlice: MultiSlice.S 139-406; BinaryOp1D: binaryOps1D.S
103-126, 168-178, 195-269 and 389-487 (entry, vertex state, work division, float
processing); NonLinearity1D: unaryOps1DNonLinearity.S 212-326 (float); Fill: Fill.S
109-181 (half)."""
WORK_CODELETS = {"amp": "ConvPartial1x1Out", "reduce": "ReduceAdd", "vector": "BinaryOp1D",
                 "transcendental": "NonLinearity1D", "copy": "Fill"}
"""The codelet whose code stands for the vertices of an op that is not planned, by its
work kind (`ops/registry.WORK_KINDS`): an elementwise op runs a BinaryOp or UnaryOp
vertex, a transcendental one a non-linearity (exp, tanh, sigmoid are single
instructions on the IPU: no tables), a cast or assignment streams its elements once as
Fill does. Each distinct (codelet, op) on a tile holds its own code."""
VERTEX_STATE_BYTES = 16
"""Fixed bytes of state per vertex (its header and worker partition): tut4's report
(module docstring) has 271 kB of `vertexInstanceState` for 16,877 vertices, about 16."""
EDGE_STATE_BYTES = 8
"""Estimate: bytes of vertex state per operand or result (a 4-byte pointer and size)."""
CONTROL_CODE_BYTES_PER_STEP = 32
"""Estimate: supervisor control code per program step (call, sync, exchange jump)."""
EXCHANGE_CODE_BYTES = 48
"""Estimate: exchange code per exchange phase on each tile that receives data."""

CODE_CATEGORIES = ("vertex_code", "vertex_state", "control_code", "exchange_code")
ALWAYS_LIVE = ("variables", "constants", "stream_buffers") + CODE_CATEGORIES
CATEGORIES = ALWAYS_LIVE + ("temporaries",)



@dataclasses.dataclass
class MemoryPlan:
    always_live: np.ndarray          # bytes per tile
    not_always_live: np.ndarray      # peak bytes per tile
    categories: dict                 # category -> bytes per tile
    liveness: list                   # not-always-live bytes during each top-level step
    loop_liveness: list = dataclasses.field(default_factory=list)  # ... each step of a loop

    @property
    def total(self):
        return self.always_live + self.not_always_live

    def summary(self, bytes_per_tile=None, tiles_per_ipu=None):
        """The executable's `memory` dict (JSON-able; per-tile arrays as lists).

        `ipu_memory` is the bytes of each IPU (`tiles_per_ipu` tiles each, default all).
        """
        total = self.total
        per_ipu = tiles_per_ipu or len(total)
        tile = int(np.argmax(total))
        over = [] if bytes_per_tile is None else np.nonzero(total > bytes_per_tile)[0]
        return {
            "max_tile": tile,
            "max_tile_bytes": int(total[tile]),
            "total_bytes": int(total.sum()),
            "always_live_bytes": int(self.always_live.sum()),
            "peak_not_always_live_bytes": int(self.not_always_live.sum()),
            "tile_memory": total.astype(int).tolist(),
            "categories": {k: int(v.sum()) for k, v in self.categories.items()},
            "tile_categories": {k: v.astype(int).tolist() for k, v in self.categories.items()},
            "always_live": self.always_live.astype(int).tolist(),
            "not_always_live": self.not_always_live.astype(int).tolist(),
            "liveness": self.liveness,
            "peak_liveness_step": int(np.argmax(self.liveness)) if self.liveness else 0,
            "loop_liveness": self.loop_liveness,
            "tiles_out_of_memory": [int(t) for t in over],
            "ipu_memory": [int(b) for b in total.reshape(-1, per_ipu).sum(axis=1)],
            "ipu_max_tile_bytes": [int(b) for b in total.reshape(-1, per_ipu).max(axis=1)],
            "out_of_memory": None,
        }


class _Liveness:
    def __init__(self, tile_map):
        self.map = tile_map
        self.n = tile_map.num_tiles

    def bytes_of(self, value):
        mapping = self.map.values.get(value.id)
        if mapping is None:
            return np.zeros(self.n, np.int64)
        return mapping.elements(value.type.size, self.n) * value.type.itemsize

    def bytes_of_all(self, values):
        """Bytes per tile of `values` together."""
        return sum((self.bytes_of(v) for v in values), np.zeros(self.n, np.int64))

    def step_temporaries(self, eqn):
        """Bytes a step needs only while it runs: plan temporaries or exchanged operands."""
        plan = self.map.plan_of(eqn)
        if plan is None:
            return traffic.received_bytes(eqn, self.map)
        temp = np.zeros(self.n, np.int64)
        temp[(plan.start + np.arange(plan.tiles)) % self.n] = plan.tile_temp_bytes()
        return temp

    def peak(self, graph, trace=None, loop_trace=None):
        last_use = {}
        for i, eqn in enumerate(graph.equations):
            for v in eqn.inputs:
                last_use.update(dict.fromkeys(self.map.roots(v.id), i))
        for v in graph.outputs:
            last_use.update(dict.fromkeys(self.map.roots(v.id), len(graph.equations)))
        owned = {v.id: self.bytes_of(v) for v in graph.inputs}
        live = sum(owned.values(), np.zeros(self.n, np.int64))
        peak = live.copy()
        for i, eqn in enumerate(graph.equations):
            before = live
            function = self._runs_as_function(eqn)
            if get_op(eqn.op).role not in ("constant", "variable_read"):
                for v in eqn.outputs:
                    if self.map.is_view(v.id):
                        continue
                    reused = None if function else self._in_place(eqn, v, owned, last_use, i)
                    if reused is not None:
                        owned[v.id] = owned.pop(reused)
                        continue
                    owned[v.id] = self.bytes_of(v)
                    live = live + owned[v.id]
            temporaries = self.step_temporaries(eqn)
            during = live + temporaries
            bodies = eqn.subgraphs()
            if bodies or function:
                survivors = before - self._dying(eqn, owned, last_use, i)
                during = (self._control_step(eqn, before, live - before, temporaries,
                                             survivors, loop_trace) if bodies
                          else self._function_call(eqn, before, live - before, temporaries,
                                                   survivors))
            peak = np.maximum(peak, during)
            if trace is not None:
                trace.append(int(during.sum()))
            for v in eqn.inputs + eqn.outputs:
                for r in self.map.roots(v.id):
                    if last_use.get(r, -1) <= i and r in owned:
                        live = live - owned.pop(r)
        return peak

    def _runs_as_function(self, eqn):
        return get_op(eqn.op).runs_as_function([v.type for v in eqn.inputs],
                                               [v.type for v in eqn.outputs], eqn.params)

    def _function_call(self, eqn, before, results, temporaries, survivors):
        """The peak of a step that calls its op as a cached Poplar function (module
        docstring): the copies of its operands beside what is live `before` it, then the
        op's `temporaries` beside the copies, its `results` and the `survivors` (what is
        live but the operands it reads last)."""
        copies = self.bytes_of_all(eqn.inputs)
        return np.maximum.reduce([before + copies, survivors + copies + results + temporaries])

    def _control_step(self, eqn, before, results, temporaries, survivors, loop_trace):
        """The peak of a step with bodies (module docstring): it copies its operands into
        the bodies' inputs (beside what is live `before` it, and the copies' exchange),
        runs the bodies beside the `survivors` (what is live but the operands it reads
        last), and copies their outputs out into its `results`."""
        subs = eqn.subgraphs()
        copy_in = np.max([self.bytes_of_all(sub.inputs) for sub in subs], axis=0)
        copy_out = np.max([self.bytes_of_all(sub.outputs) for sub in subs], axis=0)
        inner = np.max([self._inner_peak(eqn, sub, loop_trace, survivors)
                        for sub in subs], axis=0)
        return np.maximum.reduce([before + temporaries + copy_in, survivors + inner,
                                  survivors + results + copy_out])

    def _dying(self, eqn, owned, last_use, i):
        """Bytes of the buffers `eqn` reads last (step `i`), each once."""
        roots = {r for v in eqn.inputs for r in self.map.roots(v.id)
                 if r in owned and last_use.get(r) == i}
        return sum((owned[r] for r in roots), np.zeros(self.n, np.int64))

    def _in_place(self, eqn, out, owned, last_use, i):
        """The operand whose buffer elementwise `eqn` writes `out` into, or None: one of
        `out`'s type and tile mapping, not a view of several values, that this step reads
        last (IPU TensorFlow's `InplaceFinder` makes such an op in place,
        graphcore/tensorflow@b2127bb, tensorflow/compiler/plugin/poplar/driver/passes/
        inplace_finder.cc; a graph's inputs are buffers of its own, a program's streamed
        in, a body's copied in, and are written in place as any other, as a variable's
        update is)."""
        if get_op(eqn.op).mapping != "elementwise":
            return None
        mapping = self.map.values.get(out.id)
        for v in eqn.inputs:
            (root, *more) = self.map.roots(v.id)
            if (not more and v.type == out.type and root in owned
                    and last_use.get(root) == i and self.map.values.get(v.id) == mapping):
                return root
        return None

    def _inner_peak(self, eqn, sub, loop_trace, around):
        """A sub-graph's peak; the first loop body also fills `loop_trace` (once)."""
        if (loop_trace is None or loop_trace or get_op(eqn.op).role != "loop"
                or sub is not eqn.params["body"]):
            return self.peak(sub)
        body = []
        peak = self.peak(sub, body)
        loop_trace.extend(int(around.sum()) + b for b in body)
        return peak


def live_ranges(graph, tile_map):
    """[value id, first step, last step] of each not-always-live value of `graph`'s own
    steps, by the rules of the liveness above (for reports: what is live at a step)."""
    last = {}
    for i, eqn in enumerate(graph.equations):
        for v in eqn.inputs:
            last.update(dict.fromkeys(tile_map.roots(v.id), i))
    for v in graph.outputs:
        last.update(dict.fromkeys(tile_map.roots(v.id), max(0, len(graph.equations) - 1)))
    first = {v.id: 0 for v in graph.inputs}
    for i, eqn in enumerate(graph.equations):
        if get_op(eqn.op).role not in ("constant", "variable_read"):
            first.update((v.id, i) for v in eqn.outputs if not tile_map.is_view(v.id))
    return [[vid, f, max(f, last.get(vid, f))] for vid, f in first.items()
            if vid in tile_map.values]


def _code(graph, live, compile_ipu_code):
    """The code categories (vertex code and state, control code, exchange code); without
    `compile_ipu_code` only the vertex state."""
    n = live.n
    out = {k: np.zeros(n, np.int64) for k in CODE_CATEGORIES}
    vertex_types = {}
    steps = 0
    for eqn in walk_once(graph):
        if get_op(eqn.op).role in ("constant", "variable_read", "loop", "branch",
                                   "subgraph_call") or shares_forward_code(eqn):
            continue
        steps += 1
        received = traffic.received_bytes(eqn, live.map)
        out["exchange_code"] += np.where(received > 0, EXCHANGE_CODE_BYTES, 0)
        for tiles, kind, edges in _vertices(eqn, live):
            out["vertex_state"][tiles] += VERTEX_STATE_BYTES + EDGE_STATE_BYTES * edges
            vertex_types.setdefault(kind, np.zeros(n, bool))[tiles] = True
    if not compile_ipu_code:     # vertex state is data: it stays (module docstring)
        return {k: v if k == "vertex_state" else np.zeros(n, np.int64)
                for k, v in out.items()}
    for vertex_type, present in vertex_types.items():
        codelet = vertex_type.split(":")[0]
        out["vertex_code"] += present * CODELET_INSTRUCTIONS[codelet] * INSTRUCTION_BYTES
    out["control_code"] += steps * CONTROL_CODE_BYTES_PER_STEP
    return out


def walk_once(graph, seen=None):
    """Every equation of `graph` as `Graph.walk` yields them, an outlined function's body
    once however many calls share it (`outline.py`): its code is on the tiles once."""
    seen = set() if seen is None else seen
    for eqn in graph.equations:
        yield eqn
        if not eqn.subgraphs():
            continue
        if is_outlined(eqn):
            key = body_key(eqn)
            if key in seen:
                continue
            seen.add(key)
        for sub in eqn.subgraphs():
            yield from walk_once(sub, seen)


def _vertices(eqn, live):
    """(tiles, vertex type, edges) of the vertices one equation places: a plan's codelets
    (`Plan.vertex_types`, the same code whichever product runs them), or "codelet:op"
    for the codelet of the op's work kind (one instantiation per op)."""
    opdef = get_op(eqn.op)
    if opdef.engine:
        return []
    edges = len(eqn.inputs) + len(eqn.outputs)
    plan = live.map.plan_of(eqn)
    if plan is not None:
        tiles = (plan.start + np.arange(plan.tiles)) % live.n
        return [(tiles, codelet, edges) for codelet in plan.vertex_types]
    work = opdef.cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                      **eqn.params)
    if work.kind == "none":
        return []
    writes = opdef.role == "variable_write"
    anchor = eqn.inputs[0] if writes else eqn.outputs[0]
    mapping = (live.map.variables[eqn.params["var"]] if writes
               else live.map.values.get(anchor.id))
    if mapping is None:
        return []
    tiles = np.nonzero(mapping.elements(anchor.type.size, live.n))[0]
    return [(tiles, f"{WORK_CODELETS[work.kind]}:{eqn.op}", edges)]


def _always_live(graph, live):
    n = live.n
    variables = np.zeros(n, np.int64)
    for spec, mapping in zip(graph.variables, live.map.variables):
        variables += mapping.elements(spec.type.size, n) * spec.type.itemsize
    constants = np.zeros(n, np.int64)
    streams = {}
    for eqn in graph.walk():
        role = get_op(eqn.op).role
        if role == "constant":
            constants += live.bytes_of(eqn.outputs[0])
        elif role in ("stream_in", "stream_out"):
            key = (eqn.op, eqn.params.get(eqn.op))
            values = eqn.outputs if role == "stream_in" else eqn.inputs
            element = live.bytes_of_all(values)
            streams[key] = np.maximum(streams.get(key, 0), element)
    stream_buffers = sum(streams.values(), np.zeros(n, np.int64))
    return {"variables": variables, "constants": constants, "stream_buffers": stream_buffers}


def plan_memory(graph, tile_map, compile_ipu_code=True):
    live = _Liveness(tile_map)
    categories = _always_live(graph, live)
    categories.update(_code(graph, live, compile_ipu_code))
    trace, loop_trace = [], []
    categories["temporaries"] = live.peak(graph, trace, loop_trace)
    always = sum((categories[k] for k in ALWAYS_LIVE), np.zeros(live.n, np.int64))
    return MemoryPlan(always, categories["temporaries"], categories, trace, loop_trace)


def allow_out_of_memory(environ=None):
    """Whether `POPLAR_ENGINE_OPTIONS` sets `debug.allowOutOfMemory` to true."""
    return flag_as_bool(engine_options(environ).get("debug.allowOutOfMemory", False))


def check_memory(plan, graph, tile_map, target, allow=False, ipu_model=False):
    """Raise OutOfTileMemoryError, with the largest tensors on the tile, if a tile overflows.

    With `allow` (Poplar's `debug.allowOutOfMemory`) it returns the error's arguments
    instead, for the engine to raise when the executable is run; None if all fits.
    With `ipu_model` (`--use_ipu_model` in `TF_POPLAR_FLAGS`) it returns None whatever
    the tiles hold: Graphcore's IPU Model reports the tiles out of memory (the
    summary's `tiles_out_of_memory`) but compiles and runs the program. IPU TensorFlow's
    documentation says so of its SavedModel tool, which profiles a model on the IPU Model
    because it "does not generate out of memory errors", and Graphcore's own tests of
    IPU TensorFlow assert busiest tiles beyond a tile's 638,976 bytes on the IPU Model
    they run (graphcore/tensorflow@b2127bb: matmul_graph_caching_test.py 1,732,922,
    functional_ops_test.py testFunctionSerializedLookup 802,278).
    """
    if ipu_model:
        return None
    total = plan.total
    tile = int(np.argmax(total))
    if total[tile] <= target.bytes_per_tile:
        return None
    error = {"tile": tile, "ipu": tile // target.tiles_per_ipu, "bytes_used": int(total[tile]),
             "bytes_available": int(target.bytes_per_tile),
             "details": _advice(graph, tile_map, tile)}
    if allow:
        return error
    raise OutOfTileMemoryError(**error)


def _advice(graph, tile_map, tile):
    n = tile_map.num_tiles
    sizes = []
    for eqn in graph.walk():
        plan = tile_map.plan_of(eqn)
        if plan is not None and (tile - plan.start) % n < plan.tiles:
            sizes.append((plan.temp_bytes, f"{plan.kind} plan temporaries of {eqn.op} "
                                           f"from {eqn.source}"))
        for v in eqn.outputs:
            if v.id in tile_map.values and not tile_map.is_view(v.id):
                nbytes = tile_map.values[v.id].elements(v.type.size, n)[tile] * v.type.itemsize
                sizes.append((int(nbytes), f"{eqn.op} {v.type} from {eqn.source}"))
    for spec, mapping in zip(graph.variables, tile_map.variables):
        nbytes = mapping.elements(spec.type.size, n)[tile] * spec.type.itemsize
        sizes.append((int(nbytes), f"variable '{spec.name}' {spec.type}"))
    largest = sorted(sizes, key=lambda s: -s[0])[:5]
    lines = [f"  {b} bytes: {what}" for b, what in largest if b]
    return (
        "Largest tensors on that tile:\n" + "\n".join(lines) + "\nTry a smaller batch size, a "
        "lower availableMemoryProportion, half partials (partialsType='half'), or spread the "
        "model over more IPUs with sharding or pipelining."
    )
