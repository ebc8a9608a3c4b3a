import numpy as np

from ipu_keras._src.compiler.passes.inline import inline_calls
from ipu_keras._src.compiler.pipeline import verify
from ipu_keras._src.ops.builder import Builder, new_input


def test_calls_are_spliced_in_and_results_renamed():
    inner = Builder()
    a = new_input((3,), "float32")
    callee = inner.graph([a], [inner.emit("neg", [a]), a])
    b = Builder()
    x = new_input((3,), "float32")
    y, same = b.emit("call", [x], fn=callee)
    z = b.emit("add", [y, same])
    graph = inline_calls(b.graph([x], [z, y]))
    verify(graph)
    assert [e.op for e in graph.equations] == ["neg", "add"]
    assert graph.equations[1].inputs[1] is x
    assert graph.outputs[1] is graph.equations[0].outputs[0]


def test_nested_calls_inside_loop_bodies_are_inlined():
    inner = Builder()
    a = new_input((), "float32")
    callee = inner.graph([a], [inner.emit("add", [a, inner.const(np.float32(1))])])
    body_b = Builder()
    v = new_input((), "float32")
    body = body_b.graph([v], [body_b.emit("call", [v], fn=callee)])
    cond_b = Builder()
    c = new_input((), "float32")
    cond = cond_b.graph([c], [cond_b.emit("less", [c, cond_b.const(np.float32(3))])])
    b = Builder()
    x = new_input((), "float32")
    graph = inline_calls(b.graph([x], [b.emit("while", [x], cond=cond, body=body)]))
    verify(graph)
    assert "call" not in [e.op for e in graph.walk()]
