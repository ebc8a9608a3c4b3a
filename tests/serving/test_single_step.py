"""`export_single_step`: the export is a real SavedModel; its executable runs on the
simulated IPU (in this process and in a fresh one) and gives what TensorFlow gives on the
CPU for the same function."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from ipu_keras import serving
from ipu_keras._src import compat
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import ServingError, ServingTypeError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _assert_outputs(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        T.FLOAT32.assert_close(np.asarray(g), np.asarray(w))


def test_the_returned_function_runs_the_executable_like_tensorflow(dense, dense_export):
    _, runtime = dense_export
    x = dense.example(1)
    before = runtime.executions
    got = runtime(x)
    assert isinstance(got, list) and runtime.executions == before + 1
    assert sum(runtime.last_cycles.values()) > 0   # the simulated IPU ran it
    _assert_outputs(got, dense.predict_step(x))


def test_the_export_is_a_savedmodel_tensorflow_runs_on_the_cpu(dense, dense_export):
    path, _ = dense_export
    loaded = tf.saved_model.load(path)
    signature = loaded.signatures["serving_default"]
    assert list(signature.structured_input_signature[1]) == ["x"]
    x = dense.example(2)
    got = signature(x=tf.constant(x))
    assert sorted(got) == ["output_0", "output_1"]
    _assert_outputs([got["output_0"], got["output_1"]], dense.predict_step(x))


def test_assets_hold_the_executable_and_the_serving_info(dense_export):
    path, runtime = dense_export
    assets = sorted(os.listdir(os.path.join(path, "assets")))
    assert assets[1] == "ipu_serving.json" and assets[0].startswith("application_")
    assert assets[0].endswith(".ipu_exec") and runtime.info["executable"] == assets[0]
    with open(os.path.join(path, "assets", "ipu_serving.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info["iterations"] == 4 and info["kind"] == "single_step"
    assert [i["name"] for i in info["inputs"]] == ["x"]
    assert info["step_outputs"][0]["shape"] == [3, 4]


def test_variables_are_frozen_at_export_time(dense, dense_export):
    _, runtime = dense_export
    x = dense.example(3)
    want = [t.numpy() for t in dense.predict_step(x)]
    old = dense.w.numpy()
    dense.w.assign(old + 1.0)
    try:
        _assert_outputs(serving.load(dense_export[0])(x), want)
        _assert_outputs(runtime(x), want)
    finally:
        dense.w.assign(old)


@pytest.mark.slow
def test_a_fresh_process_loads_and_runs_the_export_on_the_ipu(dense, dense_export, tmp_path):
    path, _ = dense_export
    x = dense.example(4)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import numpy as np
        from ipu_keras import serving
        runtime = serving.load({path!r})
        outputs = runtime.signatures["serving_default"](x=np.load({str(tmp_path / 'x.npy')!r}))
        np.savez({str(tmp_path / 'out.npz')!r}, **{{k: v.numpy() for k, v in outputs.items()}})
        print("executions", runtime.executions, "cycles", sum(runtime.last_cycles.values()))
    """)
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split()
    assert words[words.index("executions") + 1] == "1" and int(words[-1]) > 0
    with np.load(tmp_path / "out.npz") as out:
        _assert_outputs([out["output_0"], out["output_1"]], dense.predict_step(x))


def test_the_loaded_signature_compiles_inside_ipu_strategy_run(dense, dense_export):
    from ipu_keras import ipu_strategy, profiling

    signature = tf.saved_model.load(dense_export[0]).signatures["serving_default"]
    x = dense.example(5)
    strategy = ipu_strategy.IPUStrategy()
    with strategy.scope():
        got = strategy.run(signature, kwargs={"x": x})
    assert profiling.last_report().total_cycles > 0
    _assert_outputs([got["output_0"], got["output_1"]], dense.predict_step(x))


def test_the_returned_function_can_be_run_by_ipu_strategy(dense, dense_export):
    from ipu_keras import ipu_strategy

    _, runtime = dense_export
    x = dense.example(11)
    strategy = ipu_strategy.IPUStrategy()
    with strategy.scope():
        got = strategy.run(runtime, args=(x,))
    _assert_outputs(got, dense.predict_step(x))


def test_output_names_key_the_results_and_the_signature(one_ipu, dense, tmp_path):
    path = str(tmp_path / "named")
    runtime = serving.export_single_step(dense.predict_step, path, 1,
                                         output_names=["relu", "total"])
    x = dense.example(6)
    got = runtime(x)
    assert sorted(got) == ["relu", "total"]
    _assert_outputs([got["relu"], got["total"]], dense.predict_step(x))
    outputs = tf.saved_model.load(path).signatures["serving_default"].structured_outputs
    assert sorted(outputs) == ["relu", "total"]


def test_the_signature_may_come_from_a_dataset_or_an_argument(one_ipu, dense, tmp_path):
    def plain(features):
        return dense.predict_step(features)[0]

    dataset = tf.data.Dataset.from_tensors(dense.example(7))
    runtime = serving.export_single_step(plain, str(tmp_path / "ds"), 2, input_dataset=dataset)
    assert [s.name for s in runtime.input_signature] == ["features"]
    x = dense.example(8)
    _assert_outputs(runtime(features=x), [plain(x)])
    compat.reset_warnings()
    with pytest.warns(DeprecationWarning, match=r"input_signature="):
        runtime = serving.export_single_step(plain, str(tmp_path / "old"), 2,
                                             input_signature=dense.signature)
    _assert_outputs(runtime(x), [plain(x)])


def test_calls_are_checked_against_the_exported_signature(dense_export):
    _, runtime = dense_export
    with pytest.raises(ServingError, match=r"input 'x' of shape \(3, 6\).*"
                       r"Received: shape \(2, 6\)"):
        runtime(np.zeros((2, 6), np.float32))
    with pytest.raises(ServingError, match=r"expected the inputs \['x'\].*"
                       r"Received: 0 positional and \['y'\]"):
        runtime(y=np.zeros((3, 6), np.float32))
    with pytest.raises(ServingError, match=r"Received: 1 positional and \['x'\]"):
        runtime(np.zeros((3, 6), np.float32), x=np.zeros((3, 6), np.float32))
    with pytest.raises(ServingTypeError, match=r"input 'x' of dtype float32. Received: "
                       r"dtype float64"):
        runtime(np.zeros((3, 6)))
