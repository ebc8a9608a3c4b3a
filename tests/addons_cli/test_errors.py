"""Every designed error of `ipu_saved_model_cli`: the library raises the class from
`ipu_keras.errors`, the command prints it as `error: ...` and exits with status 1."""
import json
import os
import pickle

import numpy as np
import pytest

from ipu_keras import errors
from ipu_keras_addons.saved_model_tool import cli, inputs, params, run


def _fails(capsys, *argv):
    assert cli.main(list(argv)) == 1
    return capsys.readouterr().err


def test_missing_directory(capsys, tmp_path):
    err = _fails(capsys, "show", "--dir", str(tmp_path / "nowhere"))
    assert "expected --dir to be an existing SavedModel directory" in err
    (tmp_path / "empty").mkdir()
    err = _fails(capsys, "run", "--dir", str(tmp_path / "empty"), "--tag_set", "serve",
                 "--signature_def", "serving_default", "--input_exprs", "x=[1.0]")
    assert "saved_model.pb" in err


def test_unknown_tag_set_names_the_valid_ones(capsys, mlp_dir):
    err = _fails(capsys, "show", "--dir", mlp_dir, "--tag_set", "train")
    assert "Received: tag_set='train'" in err and "'serve'" in err


def test_unknown_signature_key_names_the_valid_ones(mlp_dir):
    with pytest.raises(errors.SavedModelError, match=r"'serve', 'serving_default'\]"):
        run.run_saved_model(mlp_dir, "serve", "predict", {"features": np.zeros((1, 6))})


def test_unknown_input_key_names_the_valid_ones(mlp_dir):
    with pytest.raises(errors.SavedModelInputError, match=r"among \['features'\].*'image'"):
        run.run_saved_model(mlp_dir, "serve", "serving_default", {"image": np.zeros((1, 6))})


def test_input_dtype_and_shape_mismatch(mlp_dir, int64_dir):
    with pytest.raises(errors.SavedModelInputError, match=r"shape \(None, 6\).*\(2, 5\)"):
        run.run_saved_model(mlp_dir, "serve", "serving_default",
                            {"features": np.zeros((2, 5), np.float32)})
    with pytest.raises(errors.SavedModelInputError, match="expected dtype int64.*float32"):
        run.run_saved_model(int64_dir, "serve", "serving_default",
                            {"ids": np.zeros((1, 3), np.float32),
                             "scale": np.zeros((1, 1), np.float32)})


def test_no_inputs(capsys, mlp_dir):
    err = _fails(capsys, "run", "--dir", mlp_dir, "--tag_set", "serve", "--signature_def",
                 "serving_default")
    assert "at least one of --inputs, --input_exprs or --input_examples" in err


def test_pickle_is_refused(tmp_path):
    path = tmp_path / "features.pkl"
    with open(path, "wb") as f:
        pickle.dump({"features": np.zeros((1, 6))}, f)
    with pytest.raises(errors.SavedModelInputError, match="Pickle files are refused"):
        inputs.parse_inputs(f"features={path}")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(errors.SavedModelInputError, match="needs pickle"):
        inputs.parse_inputs(f"features={tmp_path / 'objects.npy'}")


def test_existing_outputs_need_overwrite(capsys, mlp_dir, tmp_path):
    argv = ["run", "--dir", mlp_dir, "--tag_set", "serve", "--signature_def",
            "serving_default", "--input_exprs", "features=np.ones((1, 6))", "--outdir",
            str(tmp_path)]
    (tmp_path / "output_0.npy").write_bytes(b"")
    assert "Add --overwrite" in _fails(capsys, *argv)
    assert cli.main(argv + ["--overwrite"]) == 0
    assert np.load(tmp_path / "output_0.npy").shape == (1, 3)


def test_convert_into_a_non_empty_directory_needs_overwrite(capsys, mlp_dir, tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    err = _fails(capsys, "convert", "--dir", mlp_dir, "--output_dir", str(tmp_path),
                 "--tag_set", "serve", "ipu")
    assert "Add --overwrite" in err and (tmp_path / "keep.txt").exists()


def test_malformed_json_gives_line_and_column(capsys, mlp_dir, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{\n  "num_ipus": 2,\n  "batch_size": ,\n}')
    err = _fails(capsys, "convert", "--dir", mlp_dir, "--output_dir", str(tmp_path / "o"),
                 "--tag_set", "serve", "ipu", "--config_file", str(config))
    assert "line 3 column 17" in err
    err = _fails(capsys, "convert", "--dir", mlp_dir, "--output_dir", str(tmp_path / "o"),
                 "--tag_set", "serve", "ipu", "--pipeline_cfg", "{'converter': 'auto'}")
    assert "--pipeline_cfg expected valid JSON" in err and "line 1 column 2" in err


def test_config_entry_of_the_wrong_type(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_ipus": "2"}))
    with pytest.raises(errors.ConversionConfigError, match="'num_ipus' expected a JSON int"):
        params.make_params({}, str(config))


@pytest.mark.parametrize("options,message", [
    (["--excluded_nodes", "^no_such_node$"], "excluded_nodes expected each regular"),
    (["--num_ipus", "2", "--manual_sharding", '[["hidden"], ["nothing_here"]]'],
     "manual_sharding[1] expected each regular"),
    (["--precision_mode", "FP16", "--precision_conversion_excluded_nodes", "zzz"],
     "precision_conversion_excluded_nodes expected each regular"),
])
def test_regex_that_matches_nothing(capsys, mlp_dir, tmp_path, options, message):
    err = _fails(capsys, "convert", "--dir", mlp_dir, "--output_dir", str(tmp_path / "o"),
                 "--tag_set", "serve", "ipu", *options)
    assert message in err


@pytest.mark.parametrize("values,message", [
    ({"num_ipus": 2, "manual_sharding": [["a"]]}, "a list of 2 regex lists"),
    ({"pipeline_cfg": {"converter": "auto"}}, "--embedded_runtime_save_config"),
    ({"embedded_runtime_save_config": {"embedded_runtime_exec_cachedir": "e",
                                       "runtime_api_timeout_us": 1}},
     "int64_to_int32_conversion"),
    ({"matmul_amp": 1.5}, r"'matmul_amp' expected a number in \(0, 1\]"),
    ({"gelu_replacement": {"nodes": ["a"]}}, "node_as_gelu_input"),
])
def test_option_validation(values, message):
    with pytest.raises(errors.ConversionConfigError, match=message):
        params.make_params(values)


def test_a_failed_conversion_keeps_the_previous_output(capsys, mlp_dir, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["convert", "--dir", mlp_dir, "--output_dir", str(out), "--tag_set",
                     "serve", "ipu"]) == 0
    before = sorted(os.listdir(out))
    err = _fails(capsys, "convert", "--dir", mlp_dir, "--output_dir", str(out), "--tag_set",
                 "serve", "--overwrite", "ipu", "--pipeline_cfg",
                 json.dumps({"converter": "load", "solution_path": str(tmp_path / "none")}),
                 "--embedded_runtime_save_config", json.dumps(
                     {"embedded_runtime_exec_cachedir": "e", "runtime_api_timeout_us": 1}),
                 "--int64_to_int32_conversion")
    assert "expected a readable JSON file" in err
    assert sorted(os.listdir(out)) == before and not os.path.exists(f"{out}.converting")


def test_malformed_inputs_strings():
    with pytest.raises(errors.SavedModelInputError, match="format is incorrect"):
        inputs.parse_inputs("features")
    with pytest.raises(errors.SavedModelInputError, match="calls np.nope, which is not an allowed constructor"):
        inputs.parse_inputs("", "features=np.nope(3)")


@pytest.mark.parametrize("content, says", [
    (b"\x08\x96\x01garbage\xff\xfe" * 8, "cannot be parsed"),
    (b"", "holds none (an empty or truncated file)"),
], ids=["garbage", "empty"])
@pytest.mark.parametrize("command", ["show", "show --all", "run"])
def test_an_unreadable_saved_model_prints_nothing_but_the_error(capsys, tmp_path, content,
                                                                says, command):
    (tmp_path / "saved_model.pb").write_bytes(content)
    argv = command.split() + ["--dir", str(tmp_path)]
    if command == "run":
        argv += ["--tag_set", "serve", "--signature_def", "serving_default", "--input_exprs",
                 "x=[1.0]"]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert says in captured.err and captured.err.startswith("error: ")


def test_a_truncated_saved_model_is_refused(capsys, tmp_path, mlp_dir):
    data = open(os.path.join(mlp_dir, "saved_model.pb"), "rb").read()
    (tmp_path / "saved_model.pb").write_bytes(data[:len(data) // 2])
    err = _fails(capsys, "show", "--dir", str(tmp_path))
    assert "cannot be parsed" in err


def test_a_saved_model_without_its_variables_is_refused(capsys, tmp_path, mlp_dir):
    import shutil

    copy = tmp_path / "no_variables"
    shutil.copytree(mlp_dir, copy)
    shutil.rmtree(copy / "variables")
    err = _fails(capsys, "run", "--dir", str(copy), "--tag_set", "serve", "--signature_def",
                 "serving_default", "--input_exprs", "features=np.ones((1, 6))")
    assert "failed to load" in err and "save the model again" in err


def test_an_outdir_that_is_a_file_is_refused(capsys, mlp_dir, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    err = _fails(capsys, "run", "--dir", mlp_dir, "--tag_set", "serve", "--signature_def",
                 "serving_default", "--input_exprs", "features=np.ones((1, 6))", "--outdir",
                 str(tmp_path / "file" / "out"))
    assert "expected --outdir to be a directory it can write" in err
    assert "Not a directory" in err


@pytest.mark.parametrize("value", ["3", "0", "-2", "two"])
def test_num_ipus_is_a_power_of_two(capsys, value):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--dir", "x", "--tag_set", "serve", "--signature_def", "s",
                  "--num_ipus", value])
    assert info.value.code == 2
    assert f"expected a power of two (1, 2, 4, 8, ...), the IPU counts a device has. " \
           f"Received: '{value}'" in capsys.readouterr().err


def test_help_does_not_import_tensorflow():
    import subprocess
    import sys

    code = ("import sys\nfrom ipu_keras_addons.saved_model_tool import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "show, run and convert SavedModels" in result.stdout
