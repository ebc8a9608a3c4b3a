"""The host side: sessions, infeeds and outfeeds, variable sync."""
from ipu_keras._src.runtime.feeds import (
    Infeed, StreamSet, infeed_dataset, infeed_for, set_prefetch_depth,
)
from ipu_keras._src.runtime.session import Session

__all__ = ["Infeed", "Session", "StreamSet", "infeed_dataset", "infeed_for",
           "set_prefetch_depth"]
