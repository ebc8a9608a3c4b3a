"""Outlined calls without TensorFlow: the inline pass keeps them, the lowering shares one
body block between calls of the same body, the engine runs it per call, and the loader
refuses calls that would run a block from itself."""
import dataclasses

import numpy as np
import pytest

from ipu_keras._src.compiler.passes.inline import inline_calls
from ipu_keras._src.compiler.pipeline import compile_graph
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.device.executable import Executable
from ipu_keras._src.device.steps import Call, Malformed, blocks_from_data
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator.engine import Engine
from ipu_keras.errors import ExecutableFormatError
from tests.graphs import small_target


def body():
    """x -> tanh(x) * 2, as a fresh sub-graph (what the tracer imports per call site)."""
    inner = Builder()
    a = new_input((8,), "float32")
    return inner.graph([a], [inner.emit("mul", [inner.emit("tanh", [a]),
                                                inner.const(np.float32(2))])])


def twice(name="f", second_name="f"):
    b = Builder()
    x = new_input((8,), "float32")
    y = b.emit("call", [x], fn=body(), outlined=name)
    z = b.emit("call", [y], fn=body(), outlined=second_name)
    return b.graph([x], [z])


class _NoStreams:
    pass


def test_the_inline_pass_keeps_outlined_calls():
    graph = inline_calls(twice())
    assert [e.op for e in graph.equations] == ["call", "call"]


def test_a_stateful_body_is_inlined_as_in_the_sdk():
    inner = Builder()
    a = new_input((8,), "float32")
    inner.emit("write_var", [a], var=0, mode="add")
    stateful = inner.graph([a], [inner.emit("neg", [a])])
    b = Builder()
    x = new_input((8,), "float32")
    graph = inline_calls(b.graph([x], [b.emit("call", [x], fn=stateful, outlined="f")]))
    assert [e.op for e in graph.equations] == ["write_var", "neg"]


def test_calls_of_one_body_share_its_block_and_run_it_each_time():
    exe = compile_graph(twice(), small_target(4))
    calls = [s for s in exe.blocks[0].steps if isinstance(s, Call)]
    assert len(calls) == 2 and calls[0].body_block == calls[1].body_block
    assert len(exe.blocks) == 2
    x = np.linspace(-1, 1, 8).astype(np.float32)
    engine = Engine(exe)
    (got,) = engine.run([x], [], _NoStreams())
    T.FLOAT32.assert_close(got, np.tanh(np.tanh(x) * 2) * 2)
    assert engine.counts == [1, 2]


def test_different_functions_get_bodies_of_their_own():
    exe = compile_graph(twice("f", "g"), small_target(4))
    calls = [s for s in exe.blocks[0].steps if isinstance(s, Call)]
    assert [c.name for c in calls] == ["f", "g"]
    assert calls[0].body_block != calls[1].body_block


def test_the_executable_keeps_its_calls_through_save_and_load(tmp_path):
    exe = compile_graph(twice(), small_target(4))
    exe.save(tmp_path / "e")
    loaded = Executable.load(tmp_path / "e")
    assert loaded.blocks[0].steps == exe.blocks[0].steps


def _data(exe):
    return [block.to_data(lambda v: v) for block in exe.blocks]


def test_the_loader_refuses_calls_that_run_a_block_from_itself():
    exe = compile_graph(twice(), small_target(4))
    data = _data(exe)
    call = next(s for s in data[0]["steps"] if s[0] == "call")
    call[2] = 0   # the main block
    with pytest.raises(Malformed, match="a body block in"):
        blocks_from_data(data, lambda v: v, exe.num_slots, 0, 0, 0)
    data = _data(exe)
    data[1]["steps"].append(["call", [], 1, [], [], [], "f"])   # the body calls itself
    data[1]["sources"].append(["", ""])
    data[1]["tiles"] = None
    with pytest.raises(Malformed, match="other than the caller"):
        blocks_from_data(data, lambda v: v, exe.num_slots, 0, 0, 0)


def test_the_loader_refuses_a_cycle_of_calls(tmp_path):
    b = Builder()
    x = new_input((8,), "float32")
    graph = b.graph([x], [b.emit("call", [b.emit("call", [x], fn=body(), outlined="f")],
                                 fn=body(), outlined="g")])
    exe = compile_graph(graph, small_target(4))
    for index, target in ((1, 2), (2, 1)):   # f's body calls g's and g's calls f's
        block = exe.blocks[index]
        exe.blocks[index] = dataclasses.replace(
            block, steps=block.steps + (Call((), target, (), (), (), "loop"),),
            sources=block.sources + (block.sources[0],), tiles=None, profile=())
    exe.save(tmp_path / "cycle")
    with pytest.raises(ExecutableFormatError, match="do not form a cycle"):
        Executable.load(tmp_path / "cycle")
