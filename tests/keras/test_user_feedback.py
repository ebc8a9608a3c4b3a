"""What a user is told: `model.ipu_report()` after `fit` is the training program's, whatever
validation ran after it; the 64-bit conversion warning points at the user's line."""
import inspect
import warnings

import numpy as np

import ipu_keras as ipu
from ipu_keras._src.keras import boundary
from tests.keras.common import BATCH, build, compile_model, data

HERE = __file__


def _steps_and_cycles(program):
    return program.steps_run, sum(program.session.last_cycles.values())


def test_ipu_report_after_fit_is_the_training_one_whatever_validation_ran():
    model = compile_model(build())
    x, y = data(192)   # 6 batches: executions of 4 and 2 steps
    model.fit(x, y, batch_size=BATCH, validation_split=0.25, verbose=0)
    train, test = model.train_function.last_program, model.test_function.last_program
    # The validation program ran last: 48 samples, executions of 2 steps.
    assert test.session.run_index > train.session.run_index
    report = model.ipu_report()
    assert isinstance(report, dict)
    assert (report["steps"], report["total_cycles"]) == _steps_and_cycles(train)
    assert _steps_and_cycles(train) != _steps_and_cycles(test)
    model.evaluate(x[:128], y[:128], batch_size=BATCH, verbose=0)
    assert model.ipu_report()["steps"] == 4   # evaluate's own call: its report
    model.fit(x, y, batch_size=BATCH, validation_data=(x[:64], y[:64]), verbose=0)
    assert model.ipu_report()["total_cycles"] == _steps_and_cycles(
        model.train_function.last_program)[1]
    model.predict(x[:32], batch_size=BATCH, verbose=0)
    assert model.ipu_report()["steps"] == 1


def test_the_64_bit_warning_points_at_the_users_line():
    model = compile_model(build(), steps_per_execution=1)
    x, y = data(64)
    boundary._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        model.fit(x, y.astype(np.int64), batch_size=BATCH, verbose=0)
    said = [w for w in caught if "int64" in str(w.message)]
    assert len(said) == 1
    assert (said[0].filename, said[0].lineno) == (HERE, line)
    assert isinstance(model, ipu.keras.IPUTrainerMixin)
