"""An instance of a distributed run that forgets `set_ipu_config` is told so (issue 30, 10).

`ipu-keras run --num-instances I --num-replicas R` gives each instance R / I replicas;
a script that configures its IPUs by hand (or not at all) runs another number of them,
and the run trains on fewer (or more) replicas than it was launched with. The compile
warns once, naming `ipu_keras.distributed.set_ipu_config`. The process group is made
here from a stand-in communicator, so no MPI process is started.
"""
import subprocess
import sys
import warnings

import pytest

from ipu_keras import config, distributed
from ipu_keras._src.driver import compile as driver
from ipu_keras._src.runtime import process_group
from tests.graphs import counting_loop, dense_step


class _Comm:
    def __init__(self, size, rank):
        self.size, self.rank = size, rank

    def Get_size(self):  # noqa: N802 - mpi4py's spelling
        return self.size

    def Get_rank(self):  # noqa: N802
        return self.rank


@pytest.fixture
def launch(monkeypatch):
    monkeypatch.setattr(driver, "_SAID_INSTANCE", [])

    def launched(replicas, instances, rank=0):
        monkeypatch.setenv(process_group.NUM_REPLICAS_ENV, str(replicas))
        group = process_group.ProcessGroup(_Comm(instances, rank), replicas)
        monkeypatch.setattr(process_group, "_GROUP", [group])

    return launched


def _cfg(ipus=0):
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = 8
    cfg.auto_select_ipus = ipus
    return cfg


def test_an_instance_without_set_ipu_config_is_warned_once(launch):
    launch(replicas=4, instances=2, rank=1)
    with pytest.warns(UserWarning) as said:
        driver.compile_for_ipu(dense_step(), _cfg(), "dense")
        driver.compile_for_ipu(counting_loop()[0], _cfg(), "loop")
    (warning,) = [str(w.message) for w in said]
    assert "instance 1 of 2 of a distributed run of 4 replicas" in warning
    assert "expected to run 2 replicas" in warning and "runs 1 replica" in warning
    assert "Received: device_ipus=1, local_replicas=2" in warning
    assert "ipu_keras.distributed.set_ipu_config(config, ipus_per_replica=1)" in warning
    assert "popdist.tensorflow.set_ipu_config" in warning
    assert "trains on 2 replicas, not 4" in warning


def test_a_single_instance_of_several_replicas_is_warned_too(launch):
    launch(replicas=4, instances=1)
    with pytest.warns(UserWarning, match="expected to run 4 replicas"):
        driver.compile_for_ipu(dense_step(), _cfg(2), "dense")


@pytest.mark.parametrize("instances", [1, 2])
def test_set_ipu_config_is_quiet(launch, instances):
    launch(replicas=4, instances=instances)
    cfg = distributed.set_ipu_config(_cfg())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driver.compile_for_ipu(dense_step(), cfg, "dense")


def test_the_driver_reads_the_launcher_variable():
    assert driver.NUM_REPLICAS_ENV == process_group.NUM_REPLICAS_ENV


def test_a_process_not_launched_is_quiet(monkeypatch):
    monkeypatch.delenv(process_group.NUM_REPLICAS_ENV, raising=False)
    monkeypatch.setattr(driver, "_SAID_INSTANCE", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driver.compile_for_ipu(dense_step(), _cfg(), "dense")
    assert process_group._GROUP == [] or process_group._GROUP[0].size == 1


_FORGETFUL = """
from ipu_keras import config
from ipu_keras._src.driver.compile import compile_for_ipu
from tests.graphs import dense_step

cfg = config.IPUConfig()
cfg.ipu_model.tiles_per_ipu = 8
cfg.configure_ipu_system()   # no set_ipu_config
compile_for_ipu(dense_step(), cfg, "dense")
"""


@pytest.mark.slow
def test_ipu_keras_run_of_a_script_that_forgets_set_ipu_config_warns(tmp_path):
    from tests.replication.test_distributed import ROOT, _environment

    script = tmp_path / "forgetful.py"
    script.write_text(_FORGETFUL)
    done = subprocess.run(
        [sys.executable, "-m", "ipu_keras", "run", "--num-instances", "2", "--num-replicas",
         "4", "--", sys.executable, str(script)], env=_environment(), capture_output=True,
        text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout + done.stderr
    for rank in (0, 1):
        assert said.count(f"This process is instance {rank} of 2") == 1, said[-3000:]
    assert said.count("ipu_keras.distributed.set_ipu_config(config, ipus_per_replica=1)") == 2
