"""`PopDistStrategy`: the strategy of one instance of a distributed run."""
from ipu_keras._src.runtime.process_group import init
from ipu_keras.errors import ReplicationError
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
