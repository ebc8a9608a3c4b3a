"""The `recompute` pass (`IPUConfig.allow_recompute`) on hand-built pipelines and casts.

A two-stage pipeline micro-batch loop of float32 [1024] values (4 KiB each): stage 0
makes a1 = tanh(x), a2 = tanh(a1), h = tanh(a2) from the infeed's x; stage 1 makes
c = tanh(h), y = tanh(c); the backward passes (nodes under `gradient_tape/`) read y, c
and h (stage 1), then a2, a1 and x (stage 0). With recomputation, stage 0's a1 and a2
are not kept for its backward pass: the pass copies their equations before the readers.
The memory plan must drop by exactly their bytes, the cycle tables rise by exactly the
copies' cycles, and the engine compute the same bits.
"""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes.lower import step_cycles
from ipu_keras._src.compiler.passes.memory import CODE_CATEGORIES
from ipu_keras._src.compiler.passes.recompute import recompute, recompute_stages
from ipu_keras._src.compiler.passes.stages import is_recomputed
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras._src.ir import FeedSpec, Graph, TensorType, VariableSpec
from ipu_keras._src.ir.graph import Source
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine
from ipu_keras.errors import PipelineError
from tests.graphs import ListStreams, small_target

N = 1024
VALUE = N * 4
DEPTH = 3
F32 = TensorType((N,), "float32")


def _at(b, stage, node):
    b.stage, b.source = stage, Source(node)


def pipeline_loop(schedule="Sequential", mode="Auto", checkpoint=False):
    """The loop described in the module docstring; `checkpoint`: stage 0 checkpoints a1."""
    cb = Builder()
    ci, cacc = new_input((), "int32"), new_input((N,), "float32")
    cond = cb.graph([ci, cacc], [cb.emit("less", [ci, cb.const(np.int32(DEPTH))])])
    b = Builder()
    i, acc = new_input((), "int32"), new_input((N,), "float32")
    x = b.emit("infeed", [], infeed=0, types=(F32,))
    _at(b, 0, "stage0/a1")
    a1 = b.emit("tanh", [x])
    if checkpoint:
        a1 = b.emit("recomputation_checkpoint", [a1])
    _at(b, 0, "stage0/a2")
    a2 = b.emit("tanh", [a1])
    _at(b, 0, "stage0/h")
    h = b.emit("tanh", [a2])
    _at(b, 1, "stage1/c")
    c = b.emit("tanh", [h])
    _at(b, 1, "stage1/y")
    y = b.emit("tanh", [c])
    _at(b, 1, "gradient_tape/stage1/grad")
    gh = b.emit("mul", [b.emit("mul", [y, c]), h])
    _at(b, 0, "gradient_tape/stage0/grad")
    g0 = b.emit("mul", [b.emit("mul", [b.emit("mul", [gh, a2]), a1]), x])
    _at(b, None, "")
    total = b.emit("add", [acc, g0])
    b.emit("outfeed", [total], outfeed=0)
    body = b.graph([i, acc], [b.emit("add", [i, b.const(np.int32(1))]), total])
    top = Builder()
    start = new_input((N,), "float32", "start")
    _, out = top.emit("while", [top.const(np.int32(0)), start], cond=cond, body=body)
    top.equations[-1].pipeline = {"schedule": schedule, "depth": DEPTH, "recomputation": mode}
    return Graph([start], [out], top.equations, infeeds=[FeedSpec("in", (F32,))],
                 outfeeds=[FeedSpec("out", (F32,))])


def body_of(graph):
    return graph.equations[-1].params["body"]


def run(exe):
    rng = np.random.default_rng(0)
    streams = ListStreams([rng.normal(size=N).astype(np.float32) for _ in range(DEPTH)])
    return Engine(exe).run([np.zeros(N, np.float32)], [], streams) + streams.out


@pytest.fixture(scope="module")
def compiled():
    """(off, on) executables of the Sequential pipeline (mode Auto: interleaved)."""
    graph = pipeline_loop()
    return (compile_graph(graph, small_target(16)),
            compile_graph(graph, small_target(16), allow_recompute=True))


def test_the_backward_pass_reads_copies_of_the_recomputed_activations():
    body = body_of(recompute(pipeline_loop(), allow_recompute=True))
    copies = [e for e in body.equations if is_recomputed(e)]
    assert [e.source.node for e in copies] == ["recomputation/stage0/a1",
                                               "recomputation/stage0/a2"]
    assert all(e.stage == 0 for e in copies)
    # Interleaved: each copy just before its first reader, stage 0's backward pass.
    nodes = [e.source.node for e in body.equations]
    first_backward = nodes.index("gradient_tape/stage0/grad")
    assert nodes[first_backward - 2:first_backward] == [e.source.node for e in copies]
    # The last stage's backward follows its forward: nothing of it is recomputed, and
    # the stage's input (h) and the infeed's x are kept, not recomputed.
    assert not any(e.stage == 1 for e in copies)


def test_off_changes_nothing():
    graph = pipeline_loop()
    assert recompute(graph) is graph


def _y_step(exe):
    """The index of the step making y in the loop body: its fifth tanh (a1, a2, h, c, y;
    the copies come later)."""
    return [i for i, op in enumerate(exe.info["loop_liveness_steps"]) if op == "tanh"][4]


def test_memory_drops_by_the_bytes_of_the_recomputed_activations(compiled):
    off, on = compiled
    live_off, live_on = off.memory["loop_liveness"], on.memory["loop_liveness"]
    # At the end of the forward passes a1 and a2 are no longer live; at the peak (the
    # first backward step) neither, and their copies are made only after it.
    assert live_off[_y_step(off)] - live_on[_y_step(on)] == 2 * VALUE
    assert max(live_off) - max(live_on) == 2 * VALUE
    assert on.memory["peak_not_always_live_bytes"] < off.memory["peak_not_always_live_bytes"]


def test_cycles_rise_by_the_recomputed_forward(compiled):
    off, on = compiled
    (plan_off,), (plan_on,) = off.info["pipelines"], on.info["pipelines"]
    rows_off, rows_on = plan_off["stages"], plan_on["stages"]
    graph = recompute(pipeline_loop(), allow_recompute=True)
    tiles = plan_tile_mapping(graph, small_target(16))
    copies = sum(sum(step_cycles(e, tiles, small_target(16)))
                 for e in body_of(graph).equations if is_recomputed(e))
    assert copies > 0 and rows_on[0]["recompute"] == copies
    assert rows_on[0]["backward"] == rows_off[0]["backward"] + copies
    assert [r["forward"] for r in rows_on] == [r["forward"] for r in rows_off]
    assert rows_on[1] == rows_off[1]
    assert plan_on["makespan_cycles"] == plan_off["makespan_cycles"] + DEPTH * copies


def test_results_are_the_same_bits(compiled):
    for a, b in zip(*(run(exe) for exe in compiled)):
        np.testing.assert_array_equal(a, b)


def test_recompute_then_backpropagate_reruns_the_whole_stage():
    body = body_of(recompute(pipeline_loop("Grouped"), allow_recompute=True))
    copies = [e.source.node for e in body.equations if is_recomputed(e)]
    assert copies == ["recomputation/shared/stage0/a1", "recomputation/shared/stage0/a2",
                      "recomputation/shared/stage0/h"]
    nodes = [e.source.node for e in body.equations]
    at = nodes.index("gradient_tape/stage0/grad")     # the stage, then its backward
    assert nodes[at - 3:at] == copies


def test_only_the_interleaved_copies_have_code_of_their_own():
    # RecomputeThenBackpropagate reruns the forward stage's program; the interleaved
    # mode's copies are new steps with their own vertices and control code.
    def code(schedule, on):
        exe = compile_graph(pipeline_loop(schedule), small_target(16), allow_recompute=on)
        return {k: exe.memory["categories"][k] for k in CODE_CATEGORIES}

    assert code("Grouped", True) == code("Grouped", False)
    grown = code("Sequential", True)
    assert grown["vertex_state"] > code("Sequential", False)["vertex_state"]


def test_a_checkpoint_is_kept_and_recomputation_starts_from_it():
    body = body_of(recompute(pipeline_loop(checkpoint=True), allow_recompute=True))
    assert [e.source.node for e in body.equations if is_recomputed(e)] == [
        "recomputation/stage0/a2"]


@pytest.mark.parametrize("schedule,mode", [
    ("Sequential", "RecomputeThenBackpropagate"),
    ("Interleaved", "RecomputeAndBackpropagateInterleaved")])
def test_a_mode_its_schedule_does_not_support_is_refused(schedule, mode):
    with pytest.raises(PipelineError, match=f"{schedule} pipeline schedule does not support"):
        recompute(pipeline_loop(schedule, mode), allow_recompute=True)


def test_inference_pipelines_are_left_alone():
    body = body_of(pipeline_loop())
    forward = body.replace(equations=[e for e in body.equations
                                      if not e.source.node.startswith("gradient_tape/")])
    assert recompute_stages(forward, "RecomputeThenBackpropagate") is forward


# -- casts outside pipelines -------------------------------------------------------------


def cast_graph():
    """w (float32 variable) cast to float16, read by the first and the last of a chain."""
    b = Builder()
    x = new_input((N,), "float16", "x")
    w = b.emit("read_var", [], var=0, type=F32)
    w16 = b.emit("cast", [w], dtype="float16")
    y = b.emit("mul", [x, w16])
    for _ in range(3):
        y = b.emit("tanh", [y])
    out = b.emit("mul", [y, w16])
    return b.graph([x], [out], variables=[VariableSpec("w", F32)])


@pytest.fixture(scope="module")
def casts():
    graph = cast_graph()
    return graph, [compile_graph(graph, small_target(16), allow_recompute=on)
                   for on in (False, True)]


def test_a_cast_of_a_parameter_is_cloned_before_each_reader(casts):
    graph, _ = casts
    ops = [e.op for e in recompute(graph, allow_recompute=True).equations]
    assert ops == ["read_var", "cast", "mul", "tanh", "tanh", "tanh", "cast", "mul"]


def test_the_cast_is_not_live_between_its_readers(casts):
    _, (off, on) = casts
    half = N * 2
    tanh_off = [s - half for s in off.memory["liveness"][3:6]]
    assert tanh_off == on.memory["liveness"][3:6]
    x = np.linspace(-1, 1, N, dtype=np.float16)
    w = [np.linspace(0.5, 2, N, dtype=np.float32)]
    np.testing.assert_array_equal(Engine(off).run([x], list(w), None)[0],
                                  Engine(on).run([x], list(w), None)[0])
