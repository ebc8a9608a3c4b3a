from ipu_keras._src.compiler.passes.dce import eliminate_dead_code
from ipu_keras._src.ops.builder import Builder, new_input
from tests.graphs import counting_loop


def test_unused_pure_equations_are_removed():
    b = Builder()
    x = new_input((2,), "float32")
    b.emit("exp", [x])
    y = b.emit("neg", [x])
    graph = eliminate_dead_code(b.graph([x], [y]))
    assert [e.op for e in graph.equations] == ["neg"]


def test_effects_and_what_they_need_are_kept():
    graph, _ = counting_loop()
    pruned = eliminate_dead_code(graph.replace(outputs=[]))
    assert [e.op for e in pruned.walk()] == [e.op for e in graph.walk()]


def test_dead_code_inside_bodies_is_removed():
    graph, _ = counting_loop()
    body = next(e for e in graph.equations if e.op == "while").params["body"]
    b = Builder()
    b.equations = list(body.equations)
    b.emit("exp", [body.inputs[1]])
    noisy = body.replace(equations=b.equations)
    loop = next(e for e in graph.equations if e.op == "while")
    loop.params["body"] = noisy
    pruned = eliminate_dead_code(graph)
    assert "exp" not in [e.op for e in pruned.walk()]
