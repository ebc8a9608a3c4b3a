"""`ipu.config`: `IPUConfig`, the nested, type-checked options of Graphcore's IPU TensorFlow.

`IPUConfig.configure_ipu_system()` (or `configure_ipu_system(config)`) makes a snapshot
of a config the process-wide active one; `get_active_config()` returns it (a default
config if none was set). The option tree and its checks are the device description's
(`ipu_keras/_src/device/config.py`), where the compiler's callers read the active
config. This module imports no TensorFlow or Keras.
"""
from ipu_keras._src.device.config import (
    DeviceConnectionType, IPUConfig, SelectionOrder, configure_ipu_system, get_active_config,
    is_configured, reset_ipu_configuration,
)

__all__ = [
    "DeviceConnectionType", "IPUConfig", "SelectionOrder", "configure_ipu_system",
    "get_active_config", "is_configured", "reset_ipu_configuration",
]
