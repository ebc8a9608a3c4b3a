"""The bad-input battery (issue 30): what a careless or hostile user gives the public API.

Each case goes through a public entry point (Keras methods, the low-level IPU API, the
command-line tools, the environment's flags) and is one of:

* "clear error": a designed error of the stated class whose message names the offending
  value, and the state it could have touched unchanged (a model's weights and step
  count, a config's options, the files in a directory);
* "same as Keras": input Keras on the CPU accepts, with Keras' result (and the weights of
  a failed call unchanged);
* "accepted": input the original accepted too, with a warning that names the value.

The counts by class are the `KIND` column; `test_the_battery_is_large_enough` keeps it at
60 cases or more.
"""
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras import errors
from ipu_keras._src.conformance import tolerances as T
from ipu_keras_addons.saved_model_tool import cli as saved_model_cli

CLASSES = 3
X = np.random.default_rng(0).random((16, 4), dtype=np.float32)
Y = np.arange(16, dtype=np.int32) % CLASSES


def _model(base=ipu):
    keras.utils.set_random_seed(3)
    model = base.Sequential([keras.Input((4,)), keras.layers.Dense(CLASSES, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", steps_per_execution=2)
    return model


def _labels(value):
    y = Y.copy()
    y[5] = value
    return y


# -- Keras methods: (id, call(model), error class, text the message must hold) --------------
KERAS = [
    ("fit label too large", lambda m: m.fit(X, _labels(3), verbose=0),
     errors.IndexOutOfRangeError, "label=3"),
    ("fit label negative", lambda m: m.fit(X, _labels(-1), verbose=0),
     errors.IndexOutOfRangeError, "label=-1"),
    ("fit label NaN cast to int", lambda m: m.fit(X, _labels(np.iinfo(np.int32).min), verbose=0),
     errors.IndexOutOfRangeError, "label=-2147483648"),
    ("evaluate label too large", lambda m: m.evaluate(X, _labels(7), verbose=0),
     errors.IndexOutOfRangeError, "label=7"),
    ("fit wrong feature size", lambda m: m.fit(np.zeros((8, 5), np.float32), Y[:8], verbose=0),
     ValueError, "(8, 5)"),
    ("predict wrong feature size", lambda m: m.predict(np.zeros((8, 6), np.float32), verbose=0),
     ValueError, "(8, 6)"),
    ("predict wrong rank", lambda m: m.predict(np.zeros((8, 4, 2), np.float32), verbose=0),
     ValueError, "(8, 4, 2)"),
    ("fit complex64 x", lambda m: m.fit(X.astype(np.complex64), Y, verbose=0),
     errors.UnsupportedDTypeError, "complex64"),
    ("predict complex128 x", lambda m: m.predict(X.astype(np.complex128), verbose=0),
     errors.UnsupportedDTypeError, "complex128"),
    # Keras' data adapter refuses these before they reach the device, as on the CPU.
    ("fit string x", lambda m: m.fit(np.full((16, 4), "a"), Y, verbose=0),
     ValueError, "Invalid dtype: str32"),
    ("fit object x", lambda m: m.fit(X.astype(object), Y, verbose=0),
     ValueError, "Invalid dtype: object"),
    ("fit int64 x beyond int32", lambda m: m.fit(np.full((16, 4), 3_000_000_000), Y, verbose=0),
     errors.FeedError, "3000000000"),
    ("predict of no data", lambda m: m.predict(X[:0], verbose=0),
     errors.FeedError, "no data"),
    ("asynchronous callbacks not a bool", lambda m: m.set_asynchronous_callbacks("yes"),
     ValueError, "'yes'"),
    ("replication reduction unknown", lambda m: m.set_replication_options("BOGUS"),
     ValueError, "'BOGUS'"),
    ("accumulation steps zero",
     lambda m: m.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=0),
     ValueError, "gradient_accumulation_steps_per_replica=0"),
    ("accumulation steps a string",
     lambda m: m.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica="4"),
     ValueError, "gradient_accumulation_steps_per_replica='4'"),
    ("pipelining steps negative",
     lambda m: m.set_pipelining_options(gradient_accumulation_steps_per_replica=-2),
     ValueError, "gradient_accumulation_steps_per_replica=-2"),
]


def _state(model):
    return [w.copy() for w in model.get_weights()] + [int(model.optimizer.iterations.numpy())]


@pytest.mark.parametrize("call, error, text", [c[1:] for c in KERAS], ids=[c[0] for c in KERAS])
def test_keras_methods_refuse_bad_input_and_change_nothing(call, error, text):
    model = _model()
    before = _state(model)
    with pytest.raises(error) as info:
        call(model)
    assert text in str(info.value)
    for got, want in zip(_state(model), before):
        np.testing.assert_array_equal(got, want)


# -- the same as Keras: (id, call(model)) whose result Keras on the CPU gives too -----------
SAME = [
    ("fit of no data", lambda m: m.fit(X[:0], Y[:0], verbose=0).history),
    ("evaluate of no data", lambda m: m.evaluate(X[:0], Y[:0], verbose=0)),
    ("fit of an empty dataset",
     lambda m: m.fit(tf.data.Dataset.from_tensor_slices((X[:0], Y[:0])).batch(4),
                     verbose=0).history),
    ("predict float64 x", lambda m: m.predict(X.astype(np.float64), verbose=0)),
    ("evaluate int64 labels", lambda m: m.evaluate(X, Y.astype(np.int64), verbose=0)),
    ("fit float64 x, int64 labels",
     lambda m: m.fit(X.astype(np.float64), Y.astype(np.int64), shuffle=False,
                     verbose=0).history["loss"]),
]


@pytest.mark.parametrize("call", [c[1] for c in SAME], ids=[c[0] for c in SAME])
def test_input_keras_accepts_gives_keras_result(call):
    ours, theirs = _model(), _model(keras)
    theirs.set_weights(ours.get_weights())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # both sides warn of empty data or 64-bit inputs
        got, want = call(ours), call(theirs)
    if isinstance(want, dict):
        assert got == want
        return
    T.FLOAT32.assert_close(np.asarray(got, np.float32), np.asarray(want, np.float32))


# -- the low-level API: (id, call(), error class, text, state(): unchanged) -----------------
_CONFIG = ipu.config.IPUConfig()


def _config_state():
    return (_CONFIG.auto_select_ipus, _CONFIG.floating_point_behaviour.inv,
            _CONFIG.device_connection.type, _CONFIG.ipu_model.tiles_per_ipu)


def _set(path, value):
    def call():
        *owners, name = path.split(".")
        target = _CONFIG
        for owner in owners:
            target = getattr(target, owner)
        setattr(target, name, value)
    return call


def _undefined_shape_dataset():
    return tf.data.Dataset.from_tensor_slices(X).batch(5)   # a last batch of 1: shape (None, 4)


LOW_LEVEL = [
    ("config: negative IPU count", _set("auto_select_ipus", -1),
     errors.ConfigurationError, "auto_select_ipus=-1"),
    ("config: IPU count a word", _set("auto_select_ipus", "two"),
     errors.ConfigurationError, "auto_select_ipus='two'"),
    ("config: misspelt option", _set("auto_selct_ipus", 1),
     AttributeError, "'auto_selct_ipus'. Did you mean 'auto_select_ipus'?"),
    ("config: trap flag not a bool", _set("floating_point_behaviour.inv", "yes"),
     errors.ConfigurationError, "inv='yes'"),
    ("config: connection type a number", _set("device_connection.type", 7),
     errors.ConfigurationError, "type=7"),
    ("config: negative tiles", _set("ipu_model.tiles_per_ipu", -4),
     errors.ConfigurationError, "tiles_per_ipu=-4"),
    ("infeed of a list", lambda: ipu.ipu_infeed_queue.IPUInfeedQueue([1, 2, 3]),
     errors.FeedError, "type list"),
    ("infeed of undefined shapes", lambda: ipu.ipu_infeed_queue.IPUInfeedQueue(
        _undefined_shape_dataset()), errors.FeedError, "shape=(None, 4)"),
    ("outfeed mode unknown", lambda: ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode="SOME"),
     errors.FeedError, "outfeed_mode='SOME'"),
    ("compile of a number", lambda: ipu.ipu_compiler.compile(5),
     TypeError, "computation=5"),
    ("dropout rate above one", lambda: ipu.rand_ops.dropout(tf.ones(4), rate=1.5),
     errors.AddonsArgumentError, "1.5"),
    ("dropout rate negative", lambda: ipu.rand_ops.dropout(tf.ones(4), rate=-0.1),
     errors.AddonsArgumentError, "-0.1"),
    ("strategy reduce op unknown",
     lambda: ipu.ipu_strategy.IPUStrategy().reduce("MAXX", tf.ones(2), axis=None),
     ValueError, "reduce_op='MAXX'"),
    ("shard index negative", lambda: ipu.scopes.ipu_shard(-1).__enter__(),
     ValueError, "index=-1"),
    ("popdist IPUs per replica zero",
     lambda: ipu.distributed.set_ipu_config(ipu.config.IPUConfig(), ipus_per_replica=0),
     ValueError, "ipus_per_replica=0"),
    ("ALS factor not a power of two",
     lambda: ipu.optimizers.ALSOptimizer(keras.optimizers.SGD(), initial_loss_scaling_factor=3),
     errors.AddonsArgumentError, "initial_loss_scaling_factor=3"),
    ("ALS update frequency zero",
     lambda: ipu.optimizers.ALSOptimizer(keras.optimizers.SGD(), update_frequency=0),
     errors.AddonsArgumentError, "update_frequency=0"),
    ("accumulation optimizer of no batches",
     lambda: ipu.optimizers.GradientAccumulationOptimizerV2(keras.optimizers.SGD(),
                                                            num_mini_batches=0),
     ValueError, "num_mini_batches=0"),
    ("pipeline stage negative", lambda: ipu.keras.PipelineStage(-1).__enter__(),
     ValueError, "stage=-1"),
    ("pipeline of one stage", lambda: ipu.pipelining_ops.pipeline(
        [lambda x: x], gradient_accumulation_count=2), errors.PipelineError,
     "computational_stages=["),
]


@pytest.mark.parametrize("call, error, text", [c[1:] for c in LOW_LEVEL],
                         ids=[c[0] for c in LOW_LEVEL])
def test_the_low_level_api_refuses_bad_input(call, error, text):
    before = _config_state()
    with pytest.raises(error) as info:
        call()
    assert text in str(info.value)
    assert _config_state() == before


# -- the command-line tools: (id, argv, exit status, text on stderr) ------------------------
def _run_argv(expression):
    return ["run", "--dir", "{dir}", "--tag_set", "serve", "--signature_def", "serving_default",
            "--input_exprs", f"x={expression}", "--outdir", "{out}"]


CLI = [
    ("exprs: eval escape", _run_argv("().__class__.__base__.__subclasses__()"), 1,
     "().__class__.__base__.__subclasses__"),
    ("exprs: import", _run_argv("__import__('os').system('true')"), 1, "calls __import__"),
    ("exprs: open a file", _run_argv("open('/etc/passwd')"), 1, "calls open"),
    ("exprs: numpy loader", _run_argv("np.load('x.npy')"), 1, "calls np.load"),
    ("exprs: lambda", _run_argv("lambda: 1"), 1, "lambda: 1"),
    ("exprs: a name", _run_argv("os"), 1, "contains os"),
    ("exprs: a billion elements", _run_argv("np.ones((10 ** 9,))"), 1, "(1000000000,)"),
    ("exprs: a power without end", _run_argv("(10 ** 1024) ** 1024"), 1, "power too large"),
    ("exprs: string arithmetic", _run_argv("'a' * 10 ** 9"), 1, "arithmetic on str 'a'"),
    ("exprs: not Python", _run_argv("1 +"), 1, "'1 +'"),
    ("num_ipus three", ["run", "--dir", "{dir}", "--tag_set", "serve", "--signature_def", "s",
                        "--num_ipus", "3"], 2, "Received: '3'"),
    ("num_ipus zero", ["run", "--dir", "{dir}", "--tag_set", "serve", "--signature_def", "s",
                       "--num_ipus", "0"], 2, "Received: '0'"),
    ("show a missing directory", ["show", "--dir", "{dir}/nowhere"], 1, "nowhere"),
    ("show a garbage model", ["show", "--dir", "{garbage}"], 1, "garbage"),
    ("show an empty model", ["show", "--all", "--dir", "{empty}"], 1, "empty"),
    ("run a pickle input", ["run", "--dir", "{dir}", "--tag_set", "serve", "--signature_def",
                            "serving_default", "--inputs", "x={pickle}"], 1, "x.pkl"),
]


@pytest.mark.parametrize("argv, status, text", [c[1:] for c in CLI], ids=[c[0] for c in CLI])
def test_the_saved_model_tool_refuses_bad_input(argv, status, text, tmp_path, capsys):
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "saved_model.pb").write_bytes(b"\x08\x96\x01garbage" * 4)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "x.pkl").write_bytes(b"\x80\x04K\x01.")
    names = {"dir": tmp_path, "out": tmp_path / "out", "garbage": tmp_path / "garbage",
             "empty": tmp_path / "empty", "pickle": tmp_path / "x.pkl"}
    try:
        code = saved_model_cli.main([a.format(**names) for a in argv])
    except SystemExit as exit_:   # argparse's refusals exit with status 2
        code = exit_.code
    assert code == status
    err = capsys.readouterr().err
    assert text in err
    assert not (tmp_path / "out").exists()    # nothing written


# -- the flags: (id, variable, text, error class or None for a warning, text named) ---------
FLAGS = [
    ("unbalanced quote", "TF_POPLAR_FLAGS", "--executable_cache_path='{dir}/c",
     errors.FlagsError, "Received: TF_POPLAR_FLAGS="),
    ("a word that is not a flag", "TF_POPLAR_FLAGS", "cache={dir}/c", errors.FlagsError,
     "'cache="),
    ("a flag without its value", "TF_POPLAR_FLAGS", "--executable_cache_path {dir}/c",
     errors.FlagsError, "--executable_cache_path="),
    ("cache size a word", "TF_POPLAR_FLAGS",
     "--executable_cache_path={dir}/c --executable_cache_max_size=lots",
     errors.ConfigurationError, "lots"),
    ("engine options not JSON", "POPLAR_ENGINE_OPTIONS", '{"autoReport.all": "true"',
     errors.FlagsError, "POPLAR_ENGINE_OPTIONS="),
    ("engine option of the wrong kind", "POPLAR_ENGINE_OPTIONS", '{"autoReport.all": "maybe"}',
     errors.FlagsError, "autoReport.all='maybe'"),
    ("misspelt cache flag", "TF_POPLAR_FLAGS", "--executable_cache_pth={dir}/c", None,
     "Did you mean '--executable_cache_path'?"),
    ("misspelt engine option", "POPLAR_ENGINE_OPTIONS", '{"autoReport.al": "true"}', None,
     "autoReport.al"),
]


@pytest.mark.parametrize("variable, text, error, named", [c[1:] for c in FLAGS],
                         ids=[c[0] for c in FLAGS])
def test_flags_refuse_malformed_text_and_warn_of_typos(variable, text, error, named, tmp_path,
                                                       monkeypatch):
    from ipu_keras._src import flags

    flags.forget_warnings()
    monkeypatch.setenv(variable, text.replace("{dir}", str(tmp_path)))
    monkeypatch.chdir(tmp_path)
    compute = tf.function(lambda: tf.constant(2.0) * 3.0)
    if error is None:
        with pytest.warns(UserWarning) as caught:
            assert float(ipu.ipu_compiler.compile(compute)[0]) == 6.0
        assert any(named in str(w.message) for w in caught)
    else:
        with pytest.raises(error) as info:
            ipu.ipu_compiler.compile(compute)
        assert named in str(info.value)
    assert not (tmp_path / "c").exists() or error is None   # no cache made from a bad text
    assert not [p for p in os.listdir(tmp_path) if p.startswith("'")]


KIND = {"clear error": len(KERAS) + len(LOW_LEVEL) + len(CLI) + 6, "same as Keras": len(SAME),
        "accepted": 2}


def test_the_battery_is_large_enough():
    assert sum(KIND.values()) == len(KERAS) + len(SAME) + len(LOW_LEVEL) + len(CLI) + len(FLAGS)
    assert sum(KIND.values()) >= 60
