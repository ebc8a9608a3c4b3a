"""SDK 3.x spellings: `ipu.distributed.popdist_strategy.PopDistStrategy` and
`ipu.utils.IPUConfig` (issue 31, item 7).

Without a launcher the process is one instance holding every replica, so the strategy
runs like an `IPUStrategy` on this instance's IPUs; the multi-instance runs themselves
are tested in `tests/replication/test_distributed.py`.
"""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras.errors import ConfigurationError, ReplicationError


def test_the_sdk3_module_path_holds_the_strategy():
    from ipu_keras.distributed import popdist_strategy

    assert popdist_strategy.__name__ == "ipu_keras.distributed.popdist_strategy"
    assert ipu.distributed.popdist_strategy is popdist_strategy
    assert popdist_strategy.PopDistStrategy is ipu.distributed.PopDistStrategy
    assert issubclass(popdist_strategy.PopDistStrategy, ipu.ipu_strategy.IPUStrategy)


def test_a_single_instance_strategy_runs_on_the_simulated_ipu(executions):
    strategy = ipu.distributed.popdist_strategy.PopDistStrategy()

    @tf.function
    def step(x):
        return tf.reduce_sum(x * 2.0)

    with strategy.scope():
        out = strategy.run(step, args=(np.arange(4, dtype=np.float32),))
    assert float(out) == 12.0 and len(executions) == 1


def test_update_ipu_config_returns_the_config_and_refuses_other_values():
    strategy = ipu.distributed.popdist_strategy.PopDistStrategy()
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2
    assert strategy.update_ipu_config(cfg) is cfg and cfg.auto_select_ipus == 2
    with pytest.raises(ConfigurationError, match="Received: config={'auto_select_ipus': 2}"):
        strategy.update_ipu_config({"auto_select_ipus": 2})


def test_turning_cross_replica_reductions_off_is_refused():
    with pytest.raises(ReplicationError, match="add_ipu_cross_replica_reductions=True"):
        ipu.distributed.popdist_strategy.PopDistStrategy(add_ipu_cross_replica_reductions=False)


def test_utils_ipuconfig_is_the_config_class():
    assert ipu.utils.IPUConfig is ipu.config.IPUConfig
    cfg = ipu.utils.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.ipu_model.tiles_per_ipu = 16
    cfg.configure_ipu_system()
    try:
        from ipu_keras._src.device.config import get_active_config
        assert get_active_config().ipu_model.tiles_per_ipu == 16
    finally:
        ipu.config.reset_ipu_configuration()
