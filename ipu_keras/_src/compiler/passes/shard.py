"""The `shard` pass: every equation on one IPU, every crossing an explicit copy.

The user places some equations (`ipu_shard` scopes, pipeline stages); the rest follow
their neighbours, as Graphcore's sharding pass does, so that as few bytes as possible
cross IPUs:

* a read or write of a variable that a placed equation reads or writes runs on that
  variable's IPU (an optimizer's update of a stage's weights stays on the stage's IPU);
* an unplaced equation whose operands are all placed takes the IPU of its largest
  operand (a gradient times a learning rate runs where the gradient is); one with no
  operands (a constant, a read) takes the IPU of its largest placed user;
* repeated until nothing changes; then one sweep places an equation with some
  operands placed by the largest of those, else by its largest placed user, and the
  sweeps go on; what is still unplaced takes the IPU of the control-flow equation
  holding it, else IPU 0.

A variable lives on the IPU of the first equation that reads or writes it, and its
reads and writes run there. A graph input lives on the IPU of its first user; a
sub-graph's inputs and outputs on the IPU of its control-flow equation.

Then each value used on an IPU other than its producer's goes through one
`ipu_copy` equation (placed on the destination) per destination, so after this pass
tile mapping, memory and cost are simply per IPU.

`num_shards(graph)` is (highest IPU + 1) rounded up to a power of two, the number of
IPUs one replica of the graph occupies; `check_device(shards, num_ipus)` applies the
rule that the shards divide the device.
"""
import dataclasses

from ipu_keras.errors import ShardingError
from ipu_keras._src.ir.graph import Equation, Graph, Source, Value
from ipu_keras._src.ops.registry import get_op

STATE_ROLES = ("variable_read", "variable_write")


def shard(graph):
    """Graph -> Graph: all equations placed, crossings made `ipu_copy` equations."""
    if all(eqn.shard is None for eqn in graph.walk()):
        return _on_one_ipu(graph)   # nothing placed: all on IPU 0, nothing crosses
    return _placed_and_copied(graph)


def _placed_and_copied(graph):
    # A variable no placed equation reads or writes takes the IPU of its first access
    # that a first fill could decide; the second fill starts from every variable's
    # home, so what feeds its writes follows it.
    first = _fill(graph, None, _placed_homes(graph), default=None)
    placed = _fill(graph, None, _placed_homes(first))
    placed = _home_state(placed, variable_shards(placed))
    return _insert_copies(placed, None)


def num_shards(graph):
    """IPUs one replica of `graph` uses: (highest shard + 1) rounded up to a power of 2."""
    highest = max((eqn.shard for eqn in graph.walk() if eqn.shard is not None), default=0)
    shards = 1
    while shards < highest + 1:
        shards *= 2
    return shards


def check_device(shards, num_ipus):
    """Raises ShardingError unless `shards` divides the device's `num_ipus`."""
    if num_ipus % shards:
        raise ShardingError(
            f"Trying to compile a graph for an IPU device with {num_ipus} IPUs and {shards} "
            f"shards. The number of shards needs to divide the number of IPUs. Received: "
            f"num_ipus={num_ipus}, shards={shards} (the highest ipu_shard index or pipeline "
            f"device_mapping entry + 1, rounded up to a power of two). Set "
            f"IPUConfig.auto_select_ipus to a multiple of {shards}.")


def variable_shards(graph):
    """Variable index -> the IPU of the first equation that reads or writes it (0 if none)."""
    homes = {}
    for eqn in graph.walk():
        if get_op(eqn.op).role in STATE_ROLES:
            homes.setdefault(eqn.params["var"], eqn.shard or 0)
    return [homes.get(i, 0) for i in range(len(graph.variables))]


def input_shards(graph):
    """The IPU of each top-level graph input: that of its first user (0 if unused)."""
    first = {}
    for eqn in graph.equations:
        for v in eqn.inputs:
            first.setdefault(v.id, eqn.shard or 0)
    return [first.get(v.id, 0) for v in graph.inputs]


# -- filling in ---------------------------------------------------------------------
def _placed_homes(graph):
    """Variable index -> the IPU of the first placed equation that reads or writes it."""
    homes = {}
    for eqn in graph.walk():
        if get_op(eqn.op).role in STATE_ROLES and eqn.shard is not None:
            homes.setdefault(eqn.params["var"], eqn.shard)
    return homes


def _largest(candidates):
    """The IPU of the largest (bytes) of [(value, ipu)], the first on a tie; None if none."""
    best = None
    for value, ipu in candidates:
        if ipu is not None and (best is None or value.type.nbytes > best[0]):
            best = (value.type.nbytes, ipu)
    return None if best is None else best[1]


def _fill(graph, parent, homes, default=0):
    """Places the equations of `graph` (held by an equation on IPU `parent`, None at the
    top); what nothing decides goes on `parent`, else on `default`."""
    eqns = list(graph.equations)
    shards = [e.shard if e.shard is not None or get_op(e.op).role not in STATE_ROLES
              else homes.get(e.params["var"]) for e in eqns]
    producer = {v.id: i for i, e in enumerate(eqns) for v in e.outputs}
    users = {}
    for i, e in enumerate(eqns):
        for v in e.inputs:
            users.setdefault(v.id, []).append(i)

    def from_operands(i, partial):
        operands = [(v, shards[producer[v.id]]) for v in eqns[i].inputs if v.id in producer]
        if not partial and any(s is None for _, s in operands):
            return None
        return _largest(operands)

    def from_users(i):
        return _largest([(v, shards[u]) for v in eqns[i].outputs for u in users.get(v.id, ())])

    partial = False
    while True:
        changed = False
        for i in range(len(eqns)):
            if shards[i] is None:
                shards[i] = from_operands(i, partial)
                changed |= shards[i] is not None
        for i in reversed(range(len(eqns))):
            if shards[i] is None and (partial or not any(v.id in producer
                                                         for v in eqns[i].inputs)):
                shards[i] = from_users(i)
                changed |= shards[i] is not None
        if not changed and partial:
            break
        partial = not changed
    default = default if parent is None else parent
    out = []
    for e, s in zip(eqns, shards):
        s = default if s is None else s
        params = {k: _fill(v, s, homes, default) if k in _sub_keys(e) else v
                  for k, v in e.params.items()}
        out.append(dataclasses.replace(e, shard=s, params=params))
    return graph.replace(equations=out)


def _on_one_ipu(graph):
    """`graph` with every equation, at every level, on IPU 0."""
    return graph.replace(equations=[dataclasses.replace(e, shard=0, params={
        k: _on_one_ipu(v) if isinstance(v, Graph) else v for k, v in e.params.items()})
        for e in graph.equations])


def _sub_keys(eqn):
    return {k for k, v in eqn.params.items() if isinstance(v, Graph)}


def _home_state(graph, homes):
    out = []
    for e in graph.equations:
        params = {k: _home_state(v, homes) if k in _sub_keys(e) else v
                  for k, v in e.params.items()}
        shard_ = homes[e.params["var"]] if get_op(e.op).role in STATE_ROLES else e.shard
        out.append(dataclasses.replace(e, shard=shard_, params=params))
    return graph.replace(equations=out)


# -- copies -------------------------------------------------------------------------
def _insert_copies(graph, parent):
    """Copies for one graph level; `parent` is the IPU of the equation holding it."""
    where = {}
    if parent is None:
        for v, s in zip(graph.inputs, input_shards(graph)):
            where[v.id] = s
    else:
        where.update({v.id: parent for v in graph.inputs})
    copies, out = {}, []

    def on(value, dest, stage):
        source = where.get(value.id, dest)
        if source == dest:
            return value
        key = (value.id, dest)
        if key not in copies:
            copies[key] = Value(value.type, value.name)
            out.append(Equation("ipu_copy", [value], [copies[key]],
                                {"source_ipu": source, "destination_ipu": dest},
                                _copy_source(value, out, graph), dest, stage))
            where[copies[key].id] = dest
        return copies[key]

    for e in graph.equations:
        inputs = [on(v, e.shard, e.stage) for v in e.inputs]
        params = {k: _insert_copies(v, e.shard) if k in _sub_keys(e) else v
                  for k, v in e.params.items()}
        out.append(dataclasses.replace(e, inputs=inputs, params=params))
        where.update({v.id: e.shard for v in e.outputs})
    outputs = graph.outputs if parent is None else [on(v, parent, None) for v in graph.outputs]
    return graph.replace(equations=out, outputs=outputs)


def _copy_source(value, out, graph):
    """The source of a copy: that of the equation producing `value`."""
    for e in reversed(out):
        if any(v is value for v in e.outputs):
            return e.source
    return Source()
