import numpy as np

from ipu_keras._src.compiler.passes.fold import fold_constants
from ipu_keras._src.compiler.pipeline import verify
from ipu_keras._src.ops.builder import Builder, new_input


def test_pure_ops_on_constants_become_constants():
    b = Builder()
    x = new_input((2,), "float32")
    k = b.emit("mul", [b.const(np.float32(3)), b.const(np.float32(2))])
    y = b.emit("add", [x, k])
    graph = fold_constants(b.graph([x], [y]))
    verify(graph)
    folded = [e for e in graph.equations if e.op == "const" and e.outputs[0] is k]
    assert folded and folded[0].params["value"] == np.float32(6)
    assert graph.equations[-1].op == "add"


def test_effects_and_variable_reads_are_not_folded():
    from ipu_keras._src.ir import TensorType, VariableSpec

    b = Builder()
    w = b.emit("read_var", [], var=0, type=TensorType((), "float32"))
    b.emit("write_var", [b.const(np.float32(1))], var=0, mode="assign")
    graph = fold_constants(b.graph([], [w], variables=[
        VariableSpec("w", TensorType((), "float32"))]))
    assert [e.op for e in graph.equations] == ["read_var", "const", "write_var"]


def test_large_results_are_left_to_run_time():
    b = Builder()
    big = b.emit("broadcast_to", [b.const(np.float32(1))], shape=(512, 512))
    graph = fold_constants(b.graph([], [big]))
    assert graph.equations[-1].op == "broadcast_to"
