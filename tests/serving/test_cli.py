"""`ipu_saved_model_cli show` and `run` understand an `ipu.serving` export: `show` prints
what TensorFlow's saved_model_cli prints, `run` runs the export's own executable (no
recompiling) and gives what TensorFlow gives on the CPU."""
import numpy as np
from tensorflow.python.tools import saved_model_cli as tf_cli

from ipu_keras._src.conformance import tolerances as T
from ipu_keras_addons.saved_model_tool import cli, run


def _main(capsys, *argv):
    status = cli.main(list(argv))
    out = capsys.readouterr()
    assert status == 0, out.err
    return out.out


def test_show_prints_what_tensorflow_prints(capsys, dense_export):
    path, _ = dense_export
    ours = _main(capsys, "show", "--dir", path, "--tag_set", "serve",
                 "--signature_def", "serving_default")
    tf_cli._show_inputs_outputs(path, "serve", "serving_default")
    assert ours == capsys.readouterr().out
    assert "inputs['x'] tensor_info:" in ours and "outputs['output_1']" in ours


def test_run_uses_the_exported_executable(capsys, dense, dense_export, tmp_path):
    path, _ = dense_export
    x = dense.example(9)
    np.save(tmp_path / "x.npy", x)
    out = _main(capsys, "run", "--dir", path, "--tag_set", "serve", "--signature_def",
                "serving_default", "--inputs", f"x={tmp_path / 'x.npy'}", "--outdir",
                str(tmp_path / "out"))
    assert "(embedded executable)" in out and "Device time:" in out
    want = dense.predict_step(x)
    for key, w in zip(("output_0", "output_1"), want):
        T.FLOAT32.assert_close(np.load(tmp_path / "out" / f"{key}.npy"), w.numpy())


def test_run_result_counts_one_execution_on_the_simulated_ipu(dense, dense_export):
    path, _ = dense_export
    result = run.run_saved_model(path, "serve", "serving_default", {"x": dense.example(10)})
    assert result.embedded and result.executions == 1
    assert sum(result.cycles.values()) > 0 and result.target["num_ipus"] == 1
