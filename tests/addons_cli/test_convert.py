"""`convert ipu`: the converted SavedModel still runs in TensorFlow on the CPU, carries the
conversions in its graph, and `run` on it matches TensorFlow."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from ipu_keras_addons.saved_model_tool import cli, convert, model, params, rewrite, run, runner
from ipu_keras._src.conformance import tolerances as T

def _convert(src, dst, *options):
    status = cli.main(["convert", "--dir", src, "--output_dir", str(dst), "--tag_set", "serve",
                       "ipu", *options])
    assert status == 0
    return str(dst)


def _tf(path, **feeds):
    function = tf.saved_model.load(path).signatures["serving_default"]
    return {k: v.numpy() for k, v in function(**{k: tf.constant(v) for k, v in feeds.items()})
            .items()}


def _ops(sig):
    return [(n.name, n.op, n.attr["T"].type) for n in sig.graph_def.node]


@pytest.fixture(scope="module")
def cnn_fp16(cnn_dir, tmp_path_factory):
    return _convert(cnn_dir, tmp_path_factory.mktemp("cnn16") / "out", "--precision_mode",
                    "FP16", "--num_ipus", "2")


def test_fp16_graph_is_half_inside_with_casts_at_the_edges(cnn_fp16):
    sig = convert.load_converted(cnn_fp16)[1]
    counts = rewrite.dtype_counts(sig)
    assert counts.get("float16", 0) > 10
    casts = [n for n in sig.graph_def.node if "CastInsertion_" in n.name]
    assert {(tf.as_dtype(c.attr["SrcT"].type), tf.as_dtype(c.attr["DstT"].type))
            for c in casts} == {(tf.float32, tf.float16), (tf.float16, tf.float32)}
    saved = tf.saved_model.load(cnn_fp16).signatures["serving_default"]
    assert saved.structured_input_signature[1]["image"].dtype == tf.float32
    with open(os.path.join(cnn_fp16, "conversion_params.json")) as f:
        recorded = json.load(f)
    assert recorded["precision_mode"] == "FP16" and recorded["num_ipus"] == 2
    assert len(recorded["saved_model_md5"]) == 32


def test_fp16_run_matches_the_float32_model_within_its_roundings(cnn_fp16, cnn_dir,
                                                                   image_file):
    # Not TensorFlow's float16 run: its half kernels differ by instruction set. The oracle
    # is the original float32 model; the bound counts the float16 roundings on the path.
    x = np.load(image_file)
    float32 = _tf(cnn_dir, image=x)["output_0"]
    result = run.run_saved_model(cnn_fp16, "serve", "serving_default", {"image": x},
                                 runner.IPUOptions(num_ipus=2))
    got = result.outputs["output_0"]
    assert got.dtype == np.float32
    assert np.abs(got - float32).max() > 0  # really computed in half precision
    T.MIXED_FP16_CNN.assert_close_at_scale(got, float32)


def test_precision_conversion_excluded_nodes_stay_float(cnn_dir, tmp_path):
    out = _convert(cnn_dir, tmp_path / "out", "--precision_mode", "FP16",
                   "--precision_conversion_excluded_nodes", "classifier_1/MatMul$")
    sig = convert.load_converted(out)[1]
    kinds = {n.name: tf.as_dtype(n.attr["T"].type) for n in sig.graph_def.node
             if n.name.endswith("MatMul")}
    assert [d for n, d in kinds.items() if "classifier" in n] == [tf.float32]
    assert any(d == tf.float16 for n, d in kinds.items() if "conv" in n) or len(kinds) == 1


def test_int64_conversion_keeps_signature_dtypes(int64_dir, tmp_path):
    out = _convert(int64_dir, tmp_path / "out", "--int64_to_int32_conversion")
    sig = convert.load_converted(out)[1]
    inner = [n for n in sig.graph_def.node if n.op not in ("Placeholder",)
             and not n.name.startswith("Identity")]
    int64 = [n.name for n in inner if "CastInsertion" not in n.name and any(
        a.type == tf.int64.as_datatype_enum for a in n.attr.values())]
    assert int64 == []
    ids = np.array([[1, 2, 9], [0, 0, 3]], np.int64)
    scale = np.array([[2.0], [-1.0]], np.float32)
    want = _tf(int64_dir, ids=ids, scale=scale)
    converted = _tf(out, ids=ids, scale=scale)
    got = run.run_saved_model(out, "serve", "serving_default", {"ids": ids, "scale": scale})
    for key in want:
        np.testing.assert_allclose(converted[key], want[key], **T.FLOAT32_FEW_OPS.kwargs)
        np.testing.assert_allclose(got.outputs[key], want[key], **T.FLOAT32.kwargs)
    assert got.outputs["shifted"].dtype == np.int64


def test_gelu_replacement_from_config_file(gelu_dir, tmp_path):
    rules = {"gelu_replacement": {
        "nodes": ["intermediate/truediv$", "intermediate/Erf$", "intermediate/add$",
                  "intermediate/mul$", "intermediate/gelu_mul$"],
        "node_as_gelu_input": ["intermediate/BiasAdd$"],
        "node_use_gelu_output": ["output/MatMul$"]}}
    config = tmp_path / "config.json"
    config.write_text(json.dumps(rules))
    out = _convert(gelu_dir, tmp_path / "out", "--config_file", str(config))
    sig = convert.load_converted(out)[1]
    ops = [n.op for n in sig.graph_def.node]
    assert "Erf" not in ops and sum(op.startswith(rewrite.GELU_FUNCTION) for op in ops) == 1
    x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    want = _tf(gelu_dir, x=x)["y"]
    np.testing.assert_allclose(_tf(out, x=x)["y"], want, **T.FLOAT32.kwargs)
    got = run.run_saved_model(out, "serve", "serving_default", {"x": x}).outputs["y"]
    np.testing.assert_allclose(got, want, **T.FLOAT32.kwargs)


def test_embedded_runtime_batch_per_step_runs_without_recompiling(mlp_dir, features_file,
                                                                  tmp_path, monkeypatch):
    embedded = json.dumps({"embedded_runtime_exec_cachedir": "exec",
                           "runtime_api_timeout_us": 5000})
    out = _convert(mlp_dir, tmp_path / "out", "--batch_size", "2", "--batch_per_step", "4",
                   "--int64_to_int32_conversion", "--embedded_runtime_save_config", embedded)
    assert os.path.isfile(os.path.join(out, "exec", convert.EXECUTABLE))

    def no_compile(*args, **kwargs):
        raise AssertionError("run recompiled a converted model with an embedded executable")

    monkeypatch.setattr(runner, "compile_signature", no_compile)
    x = np.concatenate([np.load(features_file)] * 2)  # 10 samples: 2 executions of 4 x 2
    result = run.run_saved_model(out, "serve", "serving_default", {"features": x})
    assert result.embedded and result.executions == 2
    np.testing.assert_allclose(result.outputs["output_0"], _tf(mlp_dir, features=x)["output_0"],
                               **T.FLOAT32.kwargs)
    assert result.outputs["output_0"].shape == (10, 3)


@pytest.mark.parametrize("remove", [False, True])
def test_excluded_nodes_run_on_the_host_or_are_removed(mlp_dir, tmp_path, remove):
    options = ["--excluded_nodes", "hidden_1/MatMul$"] + (
        ["--remove_excluded_nodes"] if remove else [])
    out = _convert(mlp_dir, tmp_path / "out", *options)
    x = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    signature = tf.saved_model.load(out).signatures["serving_default"]
    keys = sorted(signature.structured_input_signature[1])
    if not remove:
        assert keys == ["features"]
        want = _tf(mlp_dir, features=x)["output_0"]
        got = run.run_saved_model(out, "serve", "serving_default", {"features": x})
        np.testing.assert_allclose(got.outputs["output_0"], want, **T.FLOAT32.kwargs)
    else:
        assert keys != ["features"] and len(keys) == 1  # the MatMul's output is now fed
        h = np.random.default_rng(2).normal(size=(3, 16)).astype(np.float32)
        want = _tf(out, **{keys[0]: h})["output_0"]
        got = run.run_saved_model(out, "serve", "serving_default", {keys[0]: h})
        np.testing.assert_allclose(got.outputs["output_0"], want, **T.FLOAT32.kwargs)


def test_config_file_overrides_the_command_line(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"num_ipus": 4, "matmul_amp": 0.3, "batch_size": 8}))
    p = params.make_params({"num_ipus": 2, "batch_size": 2, "conv_amp": 0.5}, str(config))
    assert (p.num_ipus, p.matmul_amp, p.batch_size, p.conv_amp) == (4, 0.3, 8, 0.5)


def test_converted_model_keeps_the_tag_set_signature(cnn_fp16):
    assert model.tag_sets(cnn_fp16) == [["serve"]]


def test_no_ipu_placement_runs_on_the_host(mlp_dir, tmp_path):
    out = _convert(mlp_dir, tmp_path / "out", "--no_ipu_placement")
    x = np.ones((2, 6), np.float32)
    result = run.run_saved_model(out, "serve", "serving_default", {"features": x})
    assert result.executions == 0 and "No node is placed on the IPU" in result.summary_lines()[0]
    np.testing.assert_allclose(result.outputs["output_0"], _tf(mlp_dir, features=x)["output_0"],
                               **T.FLOAT32_FEW_OPS.kwargs)


def test_gelu_call_follows_fp16(gelu_dir, tmp_path):
    rules = {"nodes": ["intermediate/truediv$", "intermediate/Erf$", "intermediate/add$",
                       "intermediate/mul$", "intermediate/gelu_mul$"],
             "node_as_gelu_input": ["intermediate/BiasAdd$"],
             "node_use_gelu_output": ["output/MatMul$"]}
    out = _convert(gelu_dir, tmp_path / "out", "--gelu_replacement", json.dumps(rules),
                   "--precision_mode", "FP16")
    sig = convert.load_converted(out)[1]
    assert [n.op for n in sig.graph_def.node if n.op.startswith(rewrite.GELU_FUNCTION)] == [
        rewrite.GELU_FUNCTION + "_float16"]
    x = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
    got = run.run_saved_model(out, "serve", "serving_default", {"x": x}).outputs["y"]
    # Against the original float32 model, not TensorFlow's instruction-set-dependent half
    # kernels: the bound counts the float16 roundings on the path.
    T.MIXED_FP16_GELU.assert_close_at_scale(got, _tf(gelu_dir, x=x)["y"])
