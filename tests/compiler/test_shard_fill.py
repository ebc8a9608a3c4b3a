"""The shard pass's placement of unplaced equations: few bytes cross IPUs.

An optimizer's update of a weight that stage 1 reads (a large gradient times a scalar
learning rate read on IPU 0, then a write of the variable) must run on IPU 1 and move
only the scalar; the constant that resets an accumulator follows the accumulator's
write; and a chain with nothing placed but its last user follows that user back. A graph with
nothing placed takes a short cut, which must place it as the general fill does.
"""
import numpy as np

from ipu_keras._src.compiler.passes import shard as shard_pass
from ipu_keras._src.compiler.passes.shard import shard
from ipu_keras._src.ir.graph import VariableSpec
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.builder import Builder, new_input
from tests.graphs import counting_loop

WEIGHT = TensorType((64, 64), "float32")
SCALAR = TensorType((), "float32")


def _by_op(graph):
    found = {}
    for eqn in graph.walk():
        found.setdefault(eqn.op, []).append(eqn)
    return found


def _placement(graph):
    """Each equation, depth first: its op, IPU and the ids of what it reads and writes."""
    return [(e.op, e.shard, [v.id for v in e.inputs], [v.id for v in e.outputs])
            for e in graph.walk()]


def test_an_update_runs_on_its_weights_ipu_and_moves_only_the_scalar():
    b, on1, on0 = Builder(), Builder(shard=1), Builder(shard=0)
    x = new_input((8, 64), "float32")
    weight = on1.emit("read_var", [], var=0, type=WEIGHT)          # the stage's read
    b.equations += on1.equations
    rate = on0.emit("read_var", [], var=1, type=SCALAR)            # placed elsewhere
    b.equations += on0.equations
    y = b.emit("matmul", [x, b.emit("read_var", [], var=0, type=WEIGHT)],
               transpose_a=False, transpose_b=False)
    grad = b.emit("matmul", [x, y], transpose_a=True, transpose_b=False)
    step = b.emit("mul", [grad, rate])
    b.emit("write_var", [b.emit("sub", [weight, step])], var=0, mode="assign")
    b.emit("write_var", [b.const(np.zeros((64, 64), np.float32))], var=2, mode="assign")
    b.emit("write_var", [grad], var=2, mode="add")
    graph = shard(b.graph([x], [], variables=[VariableSpec("w", WEIGHT),
                                              VariableSpec("lr", SCALAR),
                                              VariableSpec("acc", WEIGHT)]))
    ops = _by_op(graph)
    assert {e.shard for e in ops["mul"] + ops["sub"] + ops["write_var"]} == {1}
    assert ops["const"][0].shard == 1
    assert [c.inputs[0].type for c in ops["ipu_copy"]] == [SCALAR]


def test_an_unplaced_chain_follows_its_placed_user_back():
    b = Builder()
    x = new_input((4, 4), "float32")
    h = b.emit("exp", [b.emit("neg", [x])])
    out = Builder(shard=1)
    y = out.emit("add", [h, h])
    b.equations += out.equations
    graph = shard(b.graph([x], [y]))
    assert {e.shard for e in graph.equations} == {1}
    assert "ipu_copy" not in _by_op(graph)


def test_a_graph_with_nothing_placed_is_placed_as_the_general_fill_places_it():
    graph, _ = counting_loop()
    quick = shard(graph)
    assert _placement(quick) == _placement(shard_pass._placed_and_copied(graph))
    assert {e.shard for e in quick.walk()} == {0}
    assert any(e.subgraphs() for e in quick.equations)   # the loop's body was placed too
