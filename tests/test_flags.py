"""TF_POPLAR_FLAGS parsing. No TensorFlow here."""
import os
import warnings

import pytest

from ipu_keras._src import flags
from ipu_keras.errors import ConfigurationError, FlagsError


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


def test_reads_environment(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model --max_compilation_threads=4")
    assert flags.poplar_flags() == {"use_ipu_model": True, "max_compilation_threads": "4"}
    monkeypatch.delenv("TF_POPLAR_FLAGS")
    assert flags.poplar_flags() == {}
    assert flags.poplar_flags({"TF_POPLAR_FLAGS": "--use_synthetic_data"}) == {
        "use_synthetic_data": True}


def test_get_flag(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--executable_cache_path=/c --bogus")
    with pytest.warns(UserWarning, match="unknown flag '--bogus'"):
        assert flags.get_flag("executable_cache_path") == "/c"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: later reads stay quiet
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


@pytest.fixture(autouse=True)
def _forget_warnings():
    flags.forget_warnings()
    yield
    flags.forget_warnings()


# -- issue 30, item 7: typos and malformed strings are said, not ignored ----------------------
def test_a_typo_read_through_get_flag_warns_once_with_a_suggestion(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--executable_cache_pth=/tmp/c")
    with pytest.warns(UserWarning) as said:
        assert flags.get_flag("executable_cache_path", "") == ""
        assert flags.get_flag("tensor_map_file_path", "") == ""
    messages = [str(w.message) for w in said]
    assert messages == ["TF_POPLAR_FLAGS: unknown flag '--executable_cache_pth' is ignored by "
                        "ipu_keras. Did you mean '--executable_cache_path'?"]


@pytest.mark.parametrize("text, word, hint", [
    ("use_ipu_model", "use_ipu_model", "Did you mean '--use_ipu_model'?"),
    ("-use_ipu_model --log_cycle_count=1", "-use_ipu_model", "Did you mean '--use_ipu_model'?"),
    ("--", "--", ""),
    ("--=1", "--=1", ""),
    ("--use_ipu_model cache", "cache", ""),
])
def test_a_word_that_is_not_a_flag_is_refused(text, word, hint):
    with pytest.raises(FlagsError) as raised:
        flags.parse_poplar_flags(text)
    message = str(raised.value)
    assert f"'{word}' is not a flag" in message and "expected --name or --name=value" in message
    assert f"Received: TF_POPLAR_FLAGS={text!r}" in message and hint in message
    assert isinstance(raised.value, ConfigurationError)


def test_a_flag_without_its_value_is_refused_with_the_joined_spelling():
    text = "--use_ipu_model --executable_cache_path /tmp/c"
    with pytest.raises(FlagsError, match=r"--executable_cache_path expected a value, as "
                       r"--executable_cache_path=VALUE\. Received: TF_POPLAR_FLAGS=.*"
                       r"Write --executable_cache_path=/tmp/c"):
        flags.parse_poplar_flags(text)
    with pytest.raises(FlagsError, match="--tensor_map_file_path expected a value"):
        flags.parse_poplar_flags("--tensor_map_file_path")


def test_switches_need_no_value():
    assert _parse_quietly("--use_ipu_model --use_synthetic_data --log_cycle_count "
                          "--show_progress_bar --enable_hlo_verifier") == {
        "use_ipu_model": True, "use_synthetic_data": True, "log_cycle_count": True,
        "show_progress_bar": True, "enable_hlo_verifier": True}


def test_an_unbalanced_quote_is_refused():
    text = "--use_ipu_model --executable_cache_path='/tmp/x"
    with pytest.raises(FlagsError, match=r"expected balanced quotes.*Received: "
                                         r"TF_POPLAR_FLAGS=.*'/tmp/x"):
        flags.parse_poplar_flags(text)


def test_engine_options_typo_warns_once_with_a_suggestion():
    environ = {"POPLAR_ENGINE_OPTIONS": '{"autoReport.al": "true", "debug.instrument": "true"}'}
    with pytest.warns(UserWarning) as said:
        assert flags.engine_options(environ) == {"autoReport.al": "true",
                                                 "debug.instrument": "true"}
        flags.engine_options(environ)
    assert [str(w.message) for w in said] == [
        "POPLAR_ENGINE_OPTIONS: unknown option 'autoReport.al' is ignored by ipu_keras. "
        "Did you mean 'autoReport.all'?"]


@pytest.mark.parametrize("text, received", [
    ('{"autoReport.all": "yes please"}', "autoReport.all='yes please'"),
    ('{"debug.allowOutOfMemory": 2}', "debug.allowOutOfMemory=2"),
    ('{"autoReport.directory": ""}', "autoReport.directory=''"),
    ('{"autoReport.directory": 3}', "autoReport.directory=3"),
    ('[1]', "POPLAR_ENGINE_OPTIONS='[1]'"),
    ('{"autoReport.all": "true"', "POPLAR_ENGINE_OPTIONS="),
])
def test_malformed_engine_options_are_refused(text, received):
    with pytest.raises(FlagsError) as raised:
        flags.engine_options({"POPLAR_ENGINE_OPTIONS": text})
    assert "expected" in str(raised.value) and f"Received: {received}" in str(raised.value)


def test_engine_options_that_are_read_or_known_are_quiet():
    text = ('{"autoReport.all": "true", "autoReport.directory": "r", '
            '"debug.allowOutOfMemory": true, "autoReport.outputExecutionProfile": "true"}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(flags.engine_options({"POPLAR_ENGINE_OPTIONS": text})) == 4


# -- the same through a compile: the cache is not silently off ----------------------------
def _cfg():
    from ipu_keras import config

    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = 8
    return cfg


def test_a_cache_flag_typo_warns_at_compile(tmp_path, monkeypatch):
    from ipu_keras._src.driver.compile import compile_for_ipu
    from tests.graphs import dense_step

    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--executable_cache_pth={tmp_path}")
    with pytest.warns(UserWarning, match="Did you mean '--executable_cache_path'"):
        exe = compile_for_ipu(dense_step(), _cfg(), "dense")
    assert exe.info["cache"]["status"] == "off"


@pytest.mark.parametrize("text", ["--executable_cache_path {dir}", "--executable_cache_path",
                                  "--executable_cache_path='{dir}", "cache={dir}"])
def test_a_malformed_cache_flag_fails_the_compile_before_any_work(tmp_path, monkeypatch, text):
    from ipu_keras._src.driver import compile as driver
    from tests.graphs import dense_step

    monkeypatch.setenv("TF_POPLAR_FLAGS", text.format(dir=tmp_path / "c"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(driver, "compile_graph", None)   # no compile may start
    with pytest.raises(FlagsError, match="Received: TF_POPLAR_FLAGS="):
        driver.compile_for_ipu(dense_step(), _cfg(), "dense")
    assert os.listdir(tmp_path) == []   # no directory named after a stray quote
