"""The multi-IPU device and sharding: placement from the scopes, copies, per-IPU memory.

TensorFlow on the CPU is the oracle: the seed tutorial's four-shard graph gives
[4., 14.], and an MLP sharded over two IPUs trains to TensorFlow's weights.
"""
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.driver import executor as _executor
from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes.shard import num_shards, shard
from ipu_keras.errors import ConfigurationError, OutOfTileMemoryError, ShardingError
from ipu_keras._src.simulator import get_target
from ipu_keras._src.tracer.trace import trace
from ipu_keras._src.conformance import tolerances as T

F32 = np.float32


@pytest.fixture
def four_ipus():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 4
    cfg.ipu_model.tiles_per_ipu = 16
    cfg.configure_ipu_system()
    yield cfg
    ipu.config.reset_ipu_configuration()


def sharded_graph(pa, pb, pc):
    """The seed tutorial's graph (section "Sharding a graph")."""
    with ipu.scopes.ipu_shard(0):
        o1 = pa + pb
    with ipu.scopes.ipu_shard(1):
        o2 = pa + pc
    with ipu.scopes.ipu_shard(2):
        o3 = pb + pc
    with ipu.scopes.ipu_shard(3):
        out = o1 + o2 + o3
        return out


SEED_INPUTS = [np.array([1., 1.], F32), np.array([0., 1.], F32), np.array([1., 5.], F32)]


def test_the_seed_four_shard_graph_gives_4_14(four_ipus):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(sharded_graph, SEED_INPUTS)
    assert len(result) == 1
    np.testing.assert_array_equal(result[0], np.array([4., 14.], F32))
    executable = _executor.last_compiled().executable
    assert executable.target["num_ipus"] == 4
    assert len(executable.memory["ipu_memory"]) == 4


def test_crossings_become_copies_placed_on_their_destination():
    graph = shard(trace(sharded_graph, SEED_INPUTS).graph)
    copies = [(e.params["source_ipu"], e.params["destination_ipu"])
              for e in graph.equations if e.op == "ipu_copy"]
    # a lives on IPU 0 (its first user), c on IPU 1; o1, o2, o3 all go to IPU 3.
    assert sorted(copies) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert all(e.shard == e.params["destination_ipu"] for e in graph.equations
               if e.op == "ipu_copy")
    assert num_shards(graph) == 4


def test_shard_counts_round_up_to_a_power_of_two():
    def three(x):
        with ipu.scopes.ipu_shard(2):
            return x * 2.0

    graph = trace(three, [np.ones(4, F32)]).graph
    assert num_shards(graph) == 4
    with pytest.raises(ShardingError, match="device with 2 IPUs and 4 shards"):
        compile_graph(graph, get_target("ipu2", tiles_per_ipu=4, num_ipus=2))
    exe = compile_graph(graph, get_target("ipu2", tiles_per_ipu=4, num_ipus=8))
    assert exe.target["num_ipus"] == 4


@pytest.mark.parametrize("count", [3, 6, 128])
def test_a_device_size_that_is_not_a_power_of_two_up_to_64_is_refused(count):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = count
    with pytest.raises(ConfigurationError, match=f"could not find an IPU device with {count}"):
        cfg.configure_ipu_system()


def test_spare_ipus_run_replicas_and_say_so_once(caplog):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 8
    cfg.ipu_model.tiles_per_ipu = 8
    cfg.configure_ipu_system()
    try:
        with caplog.at_level(logging.INFO, logger="ipu_keras"):
            for _ in range(2):
                out = ipu.ipu_compiler.compile(sharded_graph, SEED_INPUTS)
        np.testing.assert_array_equal(out[0], [4., 14.])
    finally:
        ipu.config.reset_ipu_configuration()
    said = [r for r in caplog.records if "2 replicas of it run" in r.getMessage()]
    assert len(said) == 1


def test_gradient_ops_follow_their_forward_op_and_bodies_their_loop():
    w = tf.Variable(np.ones((3, 3), F32))

    def step(x):
        with tf.GradientTape() as tape:
            with ipu.scopes.ipu_shard(1):
                y = tf.nn.relu(tf.matmul(x, w))
                y = tf.reduce_sum(tf.math.tanh(y))
            loss = y * 2.0
        grad = tape.gradient(loss, w)
        with ipu.scopes.ipu_shard(1):
            total = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 0.5),
                                  [tf.constant(0), grad])[1]
        return total

    graph = trace(step, [np.ones((2, 3), F32)]).graph
    by_op = {}
    for eqn in graph.equations:
        by_op.setdefault(eqn.op, set()).add(eqn.shard)
    for forward in ("matmul", "relu", "tanh", "relu_grad"):
        assert by_op[forward] == {1}, forward
    loop = next(e for e in graph.equations if e.op == "while")
    assert {e.shard for e in loop.params["body"].walk()} == {1}


def test_sharded_mlp_trains_to_the_weights_of_tensorflow(four_ipus):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 8)).astype(F32)
    y = rng.integers(0, 4, size=16)

    def make():
        keras.utils.set_random_seed(1)
        layers = [keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)]
        for layer, width in zip(layers, (8, 16)):
            layer.build((None, width))
        return layers, keras.optimizers.SGD(0.1)

    def make_step(layers, opt, sharded):
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def step(x, y):
            with tf.GradientTape() as tape:
                h = x
                for i, layer in enumerate(layers):
                    with (ipu.scopes.ipu_shard(i) if sharded else _nothing()):
                        h = layer(h)
                loss = loss_fn(y, h)
            variables = [v for layer in layers for v in layer.trainable_variables]
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss
        return step

    ref_layers, ref_opt = make()
    ref_step = tf.function(make_step(ref_layers, ref_opt, False))
    ref = [ref_step(x, y).numpy() for _ in range(4)]
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        layers, opt = make()
        step = make_step(layers, opt, True)
        got = [strategy.run(step, args=[x, y]) for _ in range(4)]
    np.testing.assert_allclose(np.ravel(got), ref, **T.FLOAT32.kwargs)
    for a, b in zip(layers, ref_layers):
        for wa, wb in zip(a.get_weights(), b.get_weights()):
            np.testing.assert_allclose(wa, wb, **T.FLOAT32.kwargs)
    executable = _executor.last_compiled().executable
    assert executable.target["num_ipus"] == 2
    assert all(b > 0 for b in executable.memory["ipu_memory"])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _mlp_graph(sharded):
    layers = [tf.Variable(np.full((256, 256), 0.01, F32)) for _ in range(4)]

    def forward(x):
        for i, w in enumerate(layers):
            with (ipu.scopes.ipu_shard(i // 2) if sharded else _nothing()):
                x = tf.nn.relu(tf.matmul(x, w))
        return x

    return trace(forward, [np.ones((32, 256), F32)]).graph


def test_memory_per_ipu_falls_when_sharded():
    target = get_target("ipu2", tiles_per_ipu=8, num_ipus=2)
    one = compile_graph(_mlp_graph(False), target)
    two = compile_graph(_mlp_graph(True), target)
    assert len(one.memory["ipu_memory"]) == 1 and len(two.memory["ipu_memory"]) == 2
    # Four 256 KiB weights: all on one IPU, or two per IPU; so each IPU holds at least one
    # weight less than the one IPU did (a product's call also copies its weight in, which
    # sharding does not halve: memory.py).
    weight = 256 * 256 * 4

    def variables_per_ipu(memory):
        return np.reshape(memory["tile_categories"]["variables"], (-1, 8)).sum(axis=1).tolist()

    assert variables_per_ipu(one.memory) == [4 * weight]
    assert variables_per_ipu(two.memory) == [2 * weight, 2 * weight]
    assert max(two.memory["ipu_memory"]) < one.memory["ipu_memory"][0] - weight
    assert one.memory["categories"]["variables"] == two.memory["categories"]["variables"]


def test_out_of_memory_names_the_ipu_and_the_tile():
    big = tf.Variable(np.zeros((1024, 1024), F32))   # 4 MiB on 2 tiles of IPU 1

    def forward(x):
        with ipu.scopes.ipu_shard(0):
            x = x * 2.0
        with ipu.scopes.ipu_shard(1):
            return tf.matmul(x, big)

    graph = trace(forward, [np.ones((4, 1024), F32)]).graph
    with pytest.raises(OutOfTileMemoryError, match=r"Out of memory on tile [23]: .*IPU 1") as e:
        compile_graph(graph, get_target("ipu2", tiles_per_ipu=2, num_ipus=2))
    assert e.value.ipu == 1 and e.value.tile in (2, 3)


def test_enable_sharded_gradient_tape_exists_and_is_harmless():
    ipu.sharding.enable_sharded_gradient_tape()
    ipu.sharding.enable_sharded_gradient_tape()
    test_gradient_ops_follow_their_forward_op_and_bodies_their_loop()
