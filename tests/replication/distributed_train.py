"""A data-parallel Keras training run, as one instance of a distributed run or alone.

    python tests/replication/distributed_train.py OUT.npz                   # 1 x 4 replicas
    ipu-keras run --num-instances 2 --num-replicas 4 -- \\
        python tests/replication/distributed_train.py OUT.npz               # 2 x 2

The data is the same everywhere (a fixed seed); instance i trains on every I-th batch
(its shard), its replicas dealt those round robin, so each step of either run takes the
same 4 batches. Instance 0 saves the final weights and its replication indices.
"""
import sys

import keras
import numpy as np

import ipu_keras as ipu
from ipu_keras import distributed as popdist

B, BATCHES = 8, 32


def main(out):
    instances, index = popdist.getNumInstances(), popdist.getInstanceIndex()
    cfg = ipu.config.IPUConfig()
    if popdist.isPopdistEnvSet():
        popdist.set_ipu_config(cfg, ipus_per_replica=1)
    else:
        cfg.auto_select_ipus = 4
    cfg.configure_ipu_system()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCHES * B, 12)).astype("float32")
    y = rng.integers(0, 3, BATCHES * B)
    mine = np.arange(BATCHES * B).reshape(BATCHES, B)[index::instances].reshape(-1)
    strategy = popdist.PopDistStrategy() if instances > 1 else ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(1 + index)   # instance 0's initial weights win
        model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(3)])
        model.compile(keras.optimizers.SGD(0.02),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=2)
        model.fit(x[mine], y[mine], batch_size=B, epochs=2, shuffle=False, verbose=0)
    indices = popdist.allgather(popdist.getReplicaIndexOffset())
    if index == 0:
        np.savez(out, *model.get_weights(), offsets=np.array(indices),
                 instances=np.array(instances))


if __name__ == "__main__":
    main(sys.argv[1])
