"""`ipu.distributed.popdist_strategy` (SDK 3.0+; `ipu.horovod.popdist_strategy` in 2.4-2.6):
`PopDistStrategy`, the strategy of one instance of a distributed run."""
from ipu_keras._src.runtime.process_group import init
from ipu_keras.config import IPUConfig
from ipu_keras.errors import ConfigurationError, ReplicationError
from ipu_keras.ipu_strategy import IPUStrategy


class PopDistStrategy(IPUStrategy):
    """An `IPUStrategy` for one instance of a distributed run.

    Args:
        ipu_device: Accepted for the original's signature (the device is this instance's
            IPUs, from `set_ipu_config`).
        add_ipu_cross_replica_reductions: Must be True: the replicas' gradients are always
            reduced across every instance.
        enable_dataset_iterators: Accepted for the original's signature.
        enable_keras_extensions: As for `IPUStrategy`.
    """

    def __init__(self, ipu_device="/device:IPU:0", add_ipu_cross_replica_reductions=True,
                 enable_dataset_iterators=True, enable_keras_extensions=True):
        if not add_ipu_cross_replica_reductions:
            raise ReplicationError(
                "PopDistStrategy expected add_ipu_cross_replica_reductions=True: the "
                "simulator always reduces gradients over every replica. Received: False.")
        del ipu_device, enable_dataset_iterators
        init()
        super().__init__(enable_keras_extensions=enable_keras_extensions)

    def update_ipu_config(self, config):
        """Tells `config` about the distributed run, as the original did; returns it.

        The original wrote the instance count and index into the config's
        multi-replica options. Here the process group already knows them (it spans the
        instances the launcher started), so the config is only checked and returned; use
        `ipu_keras.distributed.set_ipu_config` to give the instance its IPUs.

        Args:
            config: The `IPUConfig` to update.
        """
        if not isinstance(config, IPUConfig):
            raise ConfigurationError(
                "PopDistStrategy.update_ipu_config expected an IPUConfig. Received: "
                f"config={config!r}")
        return config
