"""Manual sharding and pipeline stages: matched to nodes, recorded beside the converted model,
re-made under `ipu_shard` / `pipeline_stage` scopes when it runs; `auto` writes a solution
file that `load` reads back."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from ipu_keras import scopes
from ipu_keras_addons.saved_model_tool import cli, convert, model, placement, run, runner
from ipu_keras._src.conformance import tolerances as T

EMBEDDED = json.dumps({"embedded_runtime_exec_cachedir": "exec", "runtime_api_timeout_us": 5000})


def _convert(src, dst, *options):
    assert cli.main(["convert", "--dir", src, "--output_dir", str(dst), "--tag_set", "serve",
                     "ipu", *options]) == 0
    return str(dst)


def _recorded(out):
    with open(os.path.join(out, convert.SIDECAR, "placement.json")) as f:
        return {n: tuple(p) for n, p in json.load(f).items()}


@pytest.fixture
def scope_log(monkeypatch):
    """Node name -> (current_shard(), current_stage()) while the node is imported."""
    log, original = {}, model._import_nodes

    def recording(graph_def, nodes, env):
        for node in nodes:
            log[node.name] = (scopes.current_shard(), scopes.current_stage())
        return original(graph_def, nodes, env)

    monkeypatch.setattr(model, "_import_nodes", recording)
    return log


def test_manual_sharding_over_two_ipus(mlp_dir, features_file, tmp_path, scope_log):
    out = _convert(mlp_dir, tmp_path / "out", "--num_ipus", "2", "--manual_sharding",
                   '[["hidden"], ["logits"]]')
    recorded = _recorded(out)
    assert {s for n, (s, _) in recorded.items() if "logits_1/MatMul" in n} == {1}
    assert {s for n, (s, _) in recorded.items() if "hidden_1/MatMul" in n} == {0}
    x = np.load(features_file)
    result = run.run_saved_model(out, "serve", "serving_default", {"features": x})
    matmul = next(n for n in recorded if n.endswith("logits_1/MatMul"))
    assert scope_log[matmul] == (1, None)  # made inside ipu_shard(1)
    # ...and compiled onto two IPUs: each holds part of the program.
    assert result.target["num_ipus"] == 2
    assert all(used > 0 for used in result.memory["ipu_memory"]), result.memory["ipu_memory"]
    want = run.run_saved_model(mlp_dir, "serve", "serving_default", {"features": x})
    np.testing.assert_allclose(result.outputs["output_0"], want.outputs["output_0"],
                               **T.FLOAT32_FEW_OPS.kwargs)


def test_two_stage_manual_pipeline(mlp_dir, features_file, tmp_path, scope_log):
    cfg = {"converter": "manual", "manual_pipeline_config": [["hidden"], ["logits"]],
           "device_info": [0, 1], "solution_dir": "solution"}
    out = _convert(mlp_dir, tmp_path / "out", "--num_ipus", "2", "--int64_to_int32_conversion",
                   "--embedded_runtime_save_config", EMBEDDED, "--pipeline_cfg", json.dumps(cfg))
    with open(os.path.join(out, "solution", placement.MANUAL_SOLUTION)) as f:
        solution = json.load(f)
    assert solution["device_mapping"] == [0, 1]
    stages = solution["pipeline_mapping"]
    assert {s for n, s in stages.items() if "logits" in n} == {1}
    assert {s for n, s in stages.items() if "hidden" in n} == {0}
    matmul = next(n for n in stages if n.endswith("logits_1/MatMul"))
    assert scope_log[matmul] == (1, 1)  # compiled inside ipu_shard(1), pipeline_stage(1)
    x = np.load(features_file)
    got = run.run_saved_model(out, "serve", "serving_default", {"features": x})
    want = run.run_saved_model(mlp_dir, "serve", "serving_default", {"features": x})
    assert got.embedded  # micro-batches of 1 sum in another order than a batch of 5
    np.testing.assert_allclose(got.outputs["output_0"], want.outputs["output_0"],
                               **T.FLOAT32.kwargs)


def test_auto_pipeline_writes_a_solution_that_load_reads_back(cnn_dir, tmp_path):
    auto = {"converter": "auto", "solution_dir": "solution", "priority": "cycle"}
    out = _convert(cnn_dir, tmp_path / "auto", "--num_ipus", "2", "--int64_to_int32_conversion",
                   "--embedded_runtime_save_config", EMBEDDED, "--pipeline_cfg",
                   json.dumps(auto))
    path = os.path.join(out, "solution", placement.AUTO_SOLUTION)
    with open(path) as f:
        solution = json.load(f)
    assert solution["device_mapping"] == [0, 1]
    stages = list(solution["pipeline_mapping"].values())
    assert stages == sorted(stages) and set(stages) == {0, 1}  # contiguous, program order
    assert _recorded(out) == {n: (s, s) for n, s in solution["pipeline_mapping"].items()}
    load = {"converter": "load", "solution_path": path}
    again = _convert(cnn_dir, tmp_path / "load", "--num_ipus", "2",
                     "--int64_to_int32_conversion", "--embedded_runtime_save_config", EMBEDDED,
                     "--pipeline_cfg", json.dumps(load))
    assert _recorded(again) == _recorded(out)


def test_balanced_split_minimises_the_largest_stage():
    assert placement.balanced_split([5, 1, 1, 1, 1, 1, 5], 2) == [0, 4]
    assert placement.balanced_split([1, 1, 1, 1], 4) == [0, 1, 2, 3]
    starts = placement.balanced_split([3, 3, 3, 9], 2)
    assert starts == [0, 3]


def test_sharding_a_rewritten_graph_keeps_program_order(gelu_dir, tmp_path):
    """GELU calls and inserted casts are sorted in after their inputs, so the per-shard
    runs of nodes import in order."""
    rules = {"nodes": ["intermediate/truediv$", "intermediate/Erf$", "intermediate/add$",
                       "intermediate/mul$", "intermediate/gelu_mul$"],
             "node_as_gelu_input": ["intermediate/BiasAdd$"],
             "node_use_gelu_output": ["output/MatMul$"]}
    out = _convert(gelu_dir, tmp_path / "out", "--gelu_replacement", json.dumps(rules),
                   "--precision_mode", "FP16", "--num_ipus", "2", "--manual_sharding",
                   '[["intermediate"], ["output"]]')
    assert set(p for p, _ in _recorded(out).values()) == {0, 1}
    x = np.random.default_rng(4).normal(size=(2, 5)).astype(np.float32)
    converted = run.run_saved_model(out, "serve", "serving_default", {"x": x}).outputs["y"]
    # The oracle is the original float32 model (TensorFlow's half kernels differ by
    # instruction set); the bound counts the float16 roundings on the path.
    want = tf.saved_model.load(gelu_dir).signatures["serving_default"](x=tf.constant(x))["y"]
    T.MIXED_FP16_GELU.assert_close_at_scale(converted, want.numpy())


def test_node_costs_add_up_to_the_compiled_program(mlp_dir):
    """The stage search reads the same cost rules the compiler charges: per-node cycles,
    plus the program's host transfer (its arguments in and results out, which belong to
    no node), sum to the compiled main program's cycles."""
    sig = model.load_signature(mlp_dir, "serve")
    options = runner.IPUOptions()
    traced = runner.trace_signature(sig, {"features": (4, 6)})
    cycles, nbytes = placement.node_costs(traced.graph, options.config().target(), options)
    executable = runner.compile_signature(sig, {"features": (4, 6)}, options)
    main = executable.blocks[0]
    transfer = sum(sum(row.cycles.values()) for row in main.profile
                   if row.op == "host_transfer")
    assert transfer > 0
    assert sum(cycles.values()) + transfer == sum(main.cycles.values())
    assert any("MatMul" in n and c > 0 for n, c in cycles.items())
    assert all(b >= 0 for b in nbytes.values())
