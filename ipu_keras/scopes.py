"""Placement scopes: `ipu_scope(device)` and `ipu_shard(index)`."""
import contextlib
import re

_DEVICE = re.compile(r"^/device:IPU:(\d+)$")
_current_shard = [None]


@contextlib.contextmanager
def ipu_scope(device):
    """Places the code inside on the simulated IPU named `device` ("/device:IPU:N")."""
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValueError(
            f"ipu_scope expected a device name like '/device:IPU:0'. Received: device={device!r}"
        )
    yield


@contextlib.contextmanager
def ipu_shard(index):
    """Places the ops created inside on shard `index` (an IPU of a multi-IPU device)."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"ipu_shard expected a non-negative int. Received: index={index!r}")
    previous, _current_shard[0] = _current_shard[0], index
    try:
        yield
    finally:
        _current_shard[0] = previous
