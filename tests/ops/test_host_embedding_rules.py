"""The rules of op family 'host_embedding', without TensorFlow: shapes, kernels against
numpy, the cost of a host transfer, the table kept out of tile memory, the importers,
and the strict tile mode calling the host once per step."""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.device import cost
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import host_embedding as host
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.ops.registry import get_importer, get_op
from ipu_keras._src.simulator import Engine
from ipu_keras._src.simulator.strict import StrictEngine
from ipu_keras.errors import HostEmbeddingError
from tests.graphs import small_target
from tests.ops.rules import FakeNode

TABLE = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
PARAMS = dict(rows=16, encoding=4, dtype="float32")


def _lookup_graph(n=6, rows=16, encoding=4):
    b = Builder()
    ids = new_input((n,), "int32", "ids")
    out = b.emit("host_embedding_lookup", [ids], embedding_id="t", rows=rows,
                 encoding=encoding, dtype="float32")
    return b.graph([ids], [out])


def test_a_lookup_costs_a_host_transfer_and_no_tile_memory_for_the_table():
    target = small_target(16)
    exe = compile_graph(_lookup_graph(), target, compile_ipu_code=False)
    (row,) = [r for r in exe.blocks[0].profile if r.op == "host_embedding_lookup"]
    # The indices go out to the host (6 x 4 bytes), the rows come back (6 x 4 x 4).
    host_io = cost.host_io_cycles(6 * 4, target, out=True) + cost.host_io_cycles(6 * 16, target)
    assert row.cycles == {"compute": 0, "exchange": 0, "sync": target.external_sync_cycles,
                          "host_io": host_io}
    big = compile_graph(_lookup_graph(rows=4096), target, compile_ipu_code=False)
    assert big.memory["total_bytes"] == exe.memory["total_bytes"]   # the table is not here


def test_the_kernels_read_and_update_the_registered_table_in_place():
    exe = compile_graph(_lookup_graph(), small_target(16), compile_ipu_code=False)
    ids = np.array([3, 0, 3, 15, 20, -1], np.int32)   # out of range: clipped by the host
    with pytest.raises(HostEmbeddingError, match="'t' outside `with embedding.register"):
        Engine(exe).run([ids], [], None)
    table = TABLE.copy()
    host.register_table("t", table)
    try:
        (rows,) = Engine(exe).run([ids], [], None)
        np.testing.assert_array_equal(rows, TABLE[np.clip(ids, 0, 15)])
        zero = get_op("host_embedding_update").kernel(
            ids[:3], np.ones((3, 4), np.float32), embedding_id="t", rows=16, encoding=4,
            dtype="float32")
        assert zero.shape == () and zero == 0
    finally:
        assert host.deregister_table("t") is table
    want = TABLE.copy()
    np.add.at(want, [3, 0, 3], 1.0)                       # duplicates accumulate
    np.testing.assert_array_equal(table, want)


def test_strict_tile_mode_calls_the_host_once_per_step():
    b = Builder()
    ids = new_input((3,), "int32", "ids")
    params = dict(embedding_id="s", rows=16, encoding=4, dtype="float32")
    rows = b.emit("host_embedding_lookup", [ids], **params)
    zero = b.emit("host_embedding_update", [ids, b.emit("neg", [rows])], **params)
    exe = compile_graph(b.graph([ids], [rows, zero]), small_target(4),
                        compile_ipu_code=False)
    table = TABLE.copy()
    host.register_table("s", table)
    try:
        engine = StrictEngine(exe)
        got, _ = engine.run([np.array([2, 5, 2], np.int32)], [], None)
    finally:
        host.deregister_table("s")
    np.testing.assert_array_equal(got, TABLE[[2, 5, 2]])
    want = TABLE.copy()
    np.add.at(want, [2, 5, 2], -TABLE[[2, 5, 2]])   # once, not once per tile
    np.testing.assert_array_equal(table, want)
    rules = {r.op: r.rule for r in engine.steps}
    assert rules["host_embedding_lookup"] == rules["host_embedding_update"] == "skipped"


def test_accumulated_updates_wait_for_the_window():
    update = get_op("host_embedding_update").kernel
    table = np.zeros((4, 2), np.float32)
    host.register_table("ga", table, accumulate=2)
    try:
        kw = dict(embedding_id="ga", rows=4, encoding=2, dtype="float32")
        update(np.array([1]), np.ones((1, 2), np.float32), **kw)
        assert not table.any()
        update(np.array([1]), np.ones((1, 2), np.float32), **kw)
        np.testing.assert_array_equal(table[1], [2.0, 2.0])
        update(np.array([0]), np.ones((1, 2), np.float32), **kw)
    finally:
        host.deregister_table("ga")                       # flushes the open window
    np.testing.assert_array_equal(table[0], [1.0, 1.0])


def test_shape_rules_name_what_they_received():
    lookup, update = get_op("host_embedding_lookup"), get_op("host_embedding_update")
    ids = TensorType((5,), "int32")
    assert lookup.shape([ids], embedding_id="t", **PARAMS) == [TensorType((5, 4), "float32")]
    assert update.shape([ids, TensorType((5, 4), "float32")], embedding_id="t", **PARAMS) \
        == [TensorType((), "float32")]
    with pytest.raises(ValueError, match="int indices of rank 1"):
        lookup.shape([TensorType((5, 2), "int32")], embedding_id="t", **PARAMS)
    with pytest.raises(ValueError, match=r"updates of shape \(5, 4\)"):
        update.shape([ids, TensorType((5, 3), "float32")], embedding_id="t", **PARAMS)


def test_the_importers_emit_the_ops_with_the_marked_params():
    ids = np.array([1, 2], np.int32)
    node = FakeNode(host.TRAINABLE_LOOKUP_TF_TYPE, [np.float32(0), ids])
    _, ops, (eqn,) = _run(node, embedding_id="t", **PARAMS)
    assert ops == ["host_embedding_lookup"] and eqn.inputs == [node.inputs[1]]
    assert eqn.params == dict(embedding_id="t", **PARAMS)
    node = FakeNode(host.UPDATE_TF_TYPE, [ids, np.ones((2, 4), np.float32)])
    _, ops, (eqn,) = _run(node, embedding_id="t", **PARAMS)
    assert ops == ["host_embedding_update"] and eqn.inputs == node.inputs


def _run(node, **params):
    """FakeNode.run, with the params a marked call hands its importer."""
    results = get_importer(node.type)(node, node.builder, **params)
    equations = node.builder.equations[node._first:]
    return results, [e.op for e in equations], equations
