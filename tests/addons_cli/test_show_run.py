"""`show` prints what TensorFlow's saved_model_cli prints; `run` on the simulated IPU gives
what TensorFlow's saved_model_cli run gives on the CPU (called in-process)."""
import numpy as np
import pytest
from tensorflow.python.tools import saved_model_cli as tf_cli

from ipu_keras._src.conformance import tolerances as T
from ipu_keras_addons.saved_model_tool import cli, inputs, run, runner


def _main(capsys, *argv):
    status = cli.main(list(argv))
    out = capsys.readouterr()
    assert status == 0, out.err
    return out.out


@pytest.mark.parametrize("fixture", ["mlp_dir", "cnn_dir"])
def test_show_signature_matches_tensorflow(request, capsys, fixture):
    path = request.getfixturevalue(fixture)
    ours = _main(capsys, "show", "--dir", path, "--tag_set", "serve",
                 "--signature_def", "serving_default")
    tf_cli._show_inputs_outputs(path, "serve", "serving_default")
    assert ours == capsys.readouterr().out
    assert "Method name is: tensorflow/serving/predict" in ours


def test_show_tag_sets_and_keys_match_tensorflow(capsys, cnn_dir):
    ours = _main(capsys, "show", "--dir", cnn_dir)
    tf_cli._show_tag_sets(cnn_dir)
    assert ours == capsys.readouterr().out
    ours = _main(capsys, "show", "--dir", cnn_dir, "--tag_set", "serve")
    tf_cli._show_signature_def_map_keys(cnn_dir, "serve")
    assert ours == capsys.readouterr().out
    everything = _main(capsys, "show", "--dir", cnn_dir, "--all")
    assert "signature_def['serving_default']:" in everything
    assert "inputs['image'] tensor_info:" in everything


def _tf_run(path, feeds, outdir):
    tf_cli.run_saved_model_with_feed_dict(path, "serve", "serving_default", feeds, str(outdir),
                                          True)
    return {p.stem: np.load(p) for p in outdir.iterdir()}


@pytest.mark.parametrize("fixture,key,file_fixture", [
    ("mlp_dir", "features", "features_file"), ("cnn_dir", "image", "image_file")])
def test_run_matches_tensorflow_saved_model_cli(request, capsys, tmp_path, fixture, key,
                                                file_fixture):
    path, data = request.getfixturevalue(fixture), request.getfixturevalue(file_fixture)
    want = _tf_run(path, {key: np.load(data)}, tmp_path / "tf")
    printed = _main(capsys, "run", "--dir", path, "--tag_set", "serve", "--signature_def",
                    "serving_default", "--inputs", f"{key}={data}", "--outdir",
                    str(tmp_path / "ipu"), "--num_ipus", "2")
    for name, array in want.items():
        got = np.load(tmp_path / "ipu" / f"{name}.npy")
        np.testing.assert_allclose(got, array, **T.FLOAT32.kwargs)
        assert f"Result for output key {name}:" in printed
    assert "Simulated device: ipu2, 2 IPU(s)" in printed
    assert "Device time:" in printed and "compute" in printed and "exchange" in printed
    assert "Fullest tile:" in printed


def test_run_input_exprs_and_npz_variable(tmp_path, mlp_dir):
    x = np.arange(12, dtype=np.float32).reshape(2, 6) / 10
    np.savez(tmp_path / "in.npz", a=x, b=x + 1)
    feeds = inputs.parse_inputs(f"features={tmp_path / 'in.npz'}[b]")
    np.testing.assert_array_equal(feeds["features"], x + 1)
    feeds = inputs.parse_inputs("", "features=np.arange(12).reshape(2, 6) / 10")
    result = run.run_saved_model(mlp_dir, "serve", "serving_default", feeds)
    want = _tf_run(mlp_dir, {"features": x}, tmp_path / "tf")
    np.testing.assert_allclose(result.outputs["output_0"], want["output_0"],
                               **T.FLOAT32.kwargs)
    assert result.executions == 1 and sum(result.cycles.values()) > 0


def test_amp_and_partials_options_reach_the_config():
    cfg = runner.IPUOptions(2, 0.3, 0.4, "half", "float").config()
    assert cfg.num_ipus == 2
    assert cfg.matmuls.poplar_options == {"availableMemoryProportion": "0.3",
                                          "partialsType": "half"}
    assert cfg.convolutions.poplar_options["availableMemoryProportion"] == "0.4"
