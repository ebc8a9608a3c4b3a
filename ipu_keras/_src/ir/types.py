"""Value types of the IR: a static shape and a numpy dtype name."""
import dataclasses
import functools
import math

import numpy as np

from ipu_keras.errors import UnsupportedDTypeError

DTYPES = (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64",
)


@functools.lru_cache(maxsize=None)
def dtype_name(dtype):
    """numpy's name of a dtype, type or name (`np.dtype(dtype).name`, whose getter is slow
    Python: a compile of ResNet-50 asked it 40,000 times)."""
    return np.dtype(dtype).name


@dataclasses.dataclass(frozen=True)
class TensorType:
    """The static type of an IR value: `shape` is a tuple of ints, `dtype` a numpy name."""

    shape: tuple
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        if self.dtype not in DTYPES:
            raise UnsupportedDTypeError(
                f"The IPU has no {self.dtype} type: a value of the program expected one of "
                f"{', '.join(DTYPES)}. Received: dtype={self.dtype}, shape={self.shape}. "
                "Keep that computation on the host, or cast it to a supported type.")

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def itemsize(self):
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    def __str__(self):
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def type_of(array):
    """The TensorType of a numpy array or scalar."""
    array = np.asarray(array)
    return TensorType(array.shape, array.dtype.name)
