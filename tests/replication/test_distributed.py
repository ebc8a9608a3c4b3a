"""Replicas across processes: 2 MPI instances x 2 replicas train as 1 x 4 replicas.

The test launches `tests/replication/distributed_train.py` itself, once alone (one
process, four replicas) and once through `ipu-keras run --num-instances 2
--num-replicas 4` (two MPI processes of two replicas each, their gradients summed
across the processes), each with a timeout, and compares the final weights: every step
of both runs sums the gradients of the same four batches, so they agree within float32
rounding (the sums are taken in another order). Instance 1 starts from other random
weights, so equal results also show instance 0's weights were broadcast.
"""
import os
import pathlib
import subprocess
import sys

import mpi4py  # noqa: F401 - the test extra installs it (and MPICH): the run needs both
import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "replication" / "distributed_train.py"


def _environment():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("IPU_KERAS_NUM_REPLICAS", None)
    return env


def _run(command, timeout=600):
    done = subprocess.run(command, env=_environment(), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.slow
def test_two_processes_of_two_replicas_train_as_one_process_of_four(tmp_path):
    alone, distributed = tmp_path / "alone.npz", tmp_path / "distributed.npz"
    _run([sys.executable, str(SCRIPT), str(alone)])
    _run([sys.executable, "-m", "ipu_keras", "run", "--num-instances", "2",
          "--num-replicas", "4", "--", sys.executable, str(SCRIPT), str(distributed)])
    one, two = np.load(alone), np.load(distributed)
    assert int(two["instances"]) == 2 and list(two["offsets"]) == [0, 2]
    weights = [k for k in one.files if k.startswith("arr_")]
    assert len(weights) == 4
    for key in weights:
        T.FLOAT32.assert_close(two[key], one[key], err_msg=key)


def test_run_refuses_replicas_the_instances_cannot_share(capsys):
    from ipu_keras._src import cli

    with pytest.raises(SystemExit):
        cli.main(["run", "--num-instances", "3", "--num-replicas", "4", "--", "python", "x"])
    assert "multiple of --num-instances" in capsys.readouterr().err
