"""Executables are compiled once per (step kind, batch signature) and reused, and
`model.ipu_report()` describes the last one the model ran.

Each of a model's step functions keeps one compiled program per batch signature
(`model.train_function.programs`); a recompile would show as a new or a replaced
program. Changing only the data or the number of epochs never recompiles; a partial last
batch adds exactly one executable; a remainder execution (fewer steps than
`steps_per_execution`) adds none.
"""
import numpy as np

from tests.keras.common import BATCH, build, compile_model, data

REPORT_KEYS = {"target", "steps", "cycles", "total_cycles", "device_seconds_per_step",
               "max_tile", "max_tile_bytes", "bytes_per_tile"}


def _programs(function):
    """signature -> id of the compiled program (a recompile gives a new object)."""
    return {key: id(program) for key, program in function.programs.items()}


def test_changing_data_or_epochs_never_recompiles():
    model = compile_model(build())
    x, y = data(192)  # 6 full batches: executions of 4 and 2 steps
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    function = model.train_function
    assert len(function.programs) == 1
    programs = _programs(function)
    x2, y2 = data(192, seed=5)
    model.fit(x2, y2, batch_size=BATCH, epochs=3, shuffle=True, verbose=0)
    model.fit(x2[:96], y2[:96], batch_size=BATCH, epochs=2, verbose=0)
    assert model.train_function is function
    assert _programs(function) == programs
    assert int(model.optimizer.iterations.numpy()) == 6 + 18 + 6


def test_a_partial_last_batch_adds_exactly_one_executable():
    model = compile_model(build())
    x, y = data(200)  # 6 full batches and one of 8
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    assert len(model.train_function.programs) == 2
    programs = _programs(model.train_function)
    model.fit(*data(200, seed=3), batch_size=BATCH, epochs=2, verbose=0)
    assert _programs(model.train_function) == programs
    shapes = sorted(key[0][0][0] for key in model.train_function.programs)
    assert shapes == [8, BATCH]


def test_each_step_kind_has_its_own_executables():
    model = compile_model(build())
    x, y = data(64)
    model.fit(x, y, batch_size=BATCH, verbose=0)
    model.evaluate(x, y, batch_size=BATCH, verbose=0)
    model.predict(x, batch_size=BATCH, verbose=0)
    functions = (model.train_function, model.test_function, model.predict_function)
    programs = [_programs(f) for f in functions]
    assert [len(p) for p in programs] == [1, 1, 1]
    model.evaluate(*data(64, seed=2), batch_size=BATCH, verbose=0)
    model.predict(x[::-1], batch_size=BATCH, verbose=0)
    model.fit(x, y, batch_size=BATCH, verbose=0)
    assert [_programs(f) for f in functions] == programs


def test_ipu_report_describes_the_last_execution():
    model = compile_model(build())
    assert model.ipu_report() is None
    x, y = data(192)
    model.fit(x, y, batch_size=BATCH, verbose=0)  # executions of 4 and 2 steps
    report = model.ipu_report()
    assert set(report) == REPORT_KEYS
    assert report["target"] == "ipu2"
    assert report["steps"] == 2
    assert set(report["cycles"]) >= {"compute", "exchange", "sync"}
    assert all(c >= 0 for c in report["cycles"].values())
    assert report["total_cycles"] == sum(report["cycles"].values()) > 0
    assert report["device_seconds_per_step"] > 0
    assert 0 < report["max_tile_bytes"] <= report["bytes_per_tile"]
    assert report["max_tile"] >= 0
    model.evaluate(x[:128], y[:128], batch_size=BATCH, verbose=0)  # one execution of 4
    evaluated = model.ipu_report()
    assert evaluated["steps"] == 4
    assert evaluated["total_cycles"] != report["total_cycles"]
    per_step = evaluated["device_seconds_per_step"]
    assert np.isclose(per_step * 4, evaluated["total_cycles"] / _clock_hz(model))


def _clock_hz(model):
    return model.test_function.last_program.target.clock_hz
