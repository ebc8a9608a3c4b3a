"""TF_POPLAR_FLAGS parsing. No TensorFlow here."""
import warnings

import pytest

from ipu_keras._src import flags


def _parse_quietly(text):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return flags.parse_poplar_flags(text)


def test_parses_the_documented_example():
    text = ("--use_ipu_model --executable_cache_path=/tmp/x --show_progress_bar=false "
            "--log_cycle_count=1 --tensor_map_file_path=f")
    assert _parse_quietly(text) == {
        "use_ipu_model": True,
        "executable_cache_path": "/tmp/x",
        "show_progress_bar": "false",
        "log_cycle_count": "1",
        "tensor_map_file_path": "f",
    }


@pytest.mark.parametrize("text", [None, "", "   "])
def test_empty(text):
    assert _parse_quietly(text) == {}


def test_quotes_empty_values_equals_in_values_and_repeats():
    parsed = _parse_quietly(
        "--executable_cache_path='/tmp/my cache' --tensor_map_file_path= "
        "--save_interval_report=a=b --log_cycle_count=0 --log_cycle_count=2")
    assert parsed == {
        "executable_cache_path": "/tmp/my cache",
        "tensor_map_file_path": "",
        "save_interval_report": "a=b",
        "log_cycle_count": "2",
    }


def test_unknown_flag_warns_with_suggestion_and_is_kept():
    with pytest.warns(UserWarning, match="unknown flag '--use_ipu_modle'.*"
                                         "Did you mean '--use_ipu_model'"):
        parsed = flags.parse_poplar_flags("--use_ipu_modle --use_synthetic_data")
    assert parsed == {"use_ipu_modle": True, "use_synthetic_data": True}


def test_unknown_flag_without_suggestion():
    with pytest.warns(UserWarning, match="unknown flag '--zzz' is ignored by ipu_keras.$"):
        flags.parse_poplar_flags("--zzz=1")


@pytest.mark.parametrize("word", ["use_ipu_model", "-v", "--"])
def test_non_flag_words_warn_and_are_skipped(word):
    with pytest.warns(UserWarning, match=f"ignoring '{word}'"):
        assert flags.parse_poplar_flags(f"{word} --use_ipu_model") == {"use_ipu_model": True}


def test_unbalanced_quotes_do_not_raise():
    parsed = _parse_quietly("--use_ipu_model --executable_cache_path='/tmp/x")
    assert parsed["use_ipu_model"] is True
    assert parsed["executable_cache_path"] == "'/tmp/x"


def test_reads_environment(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model --max_compilation_threads=4")
    assert flags.poplar_flags() == {"use_ipu_model": True, "max_compilation_threads": "4"}
    monkeypatch.delenv("TF_POPLAR_FLAGS")
    assert flags.poplar_flags() == {}
    assert flags.poplar_flags({"TF_POPLAR_FLAGS": "--use_synthetic_data"}) == {
        "use_synthetic_data": True}


def test_get_flag(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--executable_cache_path=/c --bogus")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert flags.get_flag("executable_cache_path") == "/c"
        assert flags.get_flag("show_progress_bar", "auto") == "auto"
        assert flags.get_flag("bogus") is True


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), ("true", True), ("1", True), ("Yes", True), ("on", True),
    ("false", False), ("0", False), ("no", False), (" OFF ", False),
    ("auto", None), (None, None), ("", None),
])
def test_flag_as_bool(value, expected):
    assert flags.flag_as_bool(value, default=None) is expected


def test_known_flags_cover_the_reference():
    for name in ("use_ipu_model", "executable_cache_path", "show_progress_bar",
                 "use_synthetic_data", "log_cycle_count", "tensor_map_file_path"):
        assert name in flags.KNOWN_FLAGS
