"""GpuArray: a strided n-d view of device memory, the value of a GpuArrayType variable.

Like a NumPy array it has a ``shape``, byte ``strides`` (0 for a broadcast dimension,
negative for a reversed one), a ``dtype`` and an address (``ptr``, of element ``[0, ..., 0]``);
views (transposes, slices, dimshuffles) share the allocation they came from. ``get()`` and
``np.asarray`` copy it to the host; ``GpuArray.from_host`` copies a host array to the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph_cuda.runtime import DeviceBuffer, Runtime, get_runtime
from opgraph_cuda.strided import copy_into

__all__ = ["GpuArray", "c_strides"]


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array of ``shape``."""
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


class GpuArray:
    """An n-d array in device memory (see the module's docstring).

    Build one with :meth:`empty`, :meth:`zeros` or :meth:`from_host`, or as a :meth:`view`
    of another.
    """

    __slots__ = ("buffer", "dtype", "ptr", "runtime", "shape", "strides")
    __array_priority__ = 100  # ndarray <op> GpuArray defers to us (and fails clearly)

    def __init__(
        self,
        runtime: Runtime,
        buffer: DeviceBuffer,
        shape: Sequence[int],
        dtype: Any,
        strides: Sequence[int] | None = None,
        offset: int = 0,
    ) -> None:
        self.runtime = runtime
        self.buffer = buffer
        self.dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)  # type: ignore[comparison-overlap]
        self.shape = tuple(map(int, shape))
        self.strides = (
            c_strides(self.shape, self.dtype.itemsize) if strides is None else tuple(strides)
        )
        self.ptr = buffer.ptr + int(offset)

    # ---- construction

    @classmethod
    def empty(cls, shape: Sequence[int], dtype: Any, runtime: Runtime | None = None) -> GpuArray:
        """An uninitialised C-contiguous array."""
        runtime = runtime or get_runtime()
        dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)  # type: ignore[comparison-overlap]
        shape = tuple(map(int, shape))
        if shape and min(shape) < 0:
            raise ValueError(f"negative dimension in shape {shape}")
        return cls(runtime, runtime.alloc(math.prod(shape) * dtype.itemsize), shape, dtype)

    @classmethod
    def zeros(cls, shape: Sequence[int], dtype: Any, runtime: Runtime | None = None) -> GpuArray:
        """A C-contiguous array of zeros."""
        out = cls.empty(shape, dtype, runtime)
        out.runtime.to_device(out.ptr, np.zeros(out.shape, out.dtype))
        return out

    @classmethod
    def from_host(cls, value: Any, dtype: Any = None, runtime: Runtime | None = None) -> GpuArray:
        """A device copy of a host array (or anything ``np.asarray`` takes)."""
        host = np.asarray(value, dtype=dtype, order="C")
        out = cls.empty(host.shape, host.dtype, runtime)
        out.runtime.to_device(out.ptr, host)
        return out

    # ---- what it is

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        """True when the elements lie in C order without gaps (length-1 dims ignored)."""
        expected = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if n == 0:
                return True
            if n != 1:
                if s != expected:
                    return False
                expected *= n
        return True

    @property
    def elem_strides(self) -> tuple[int, ...]:
        """The strides in elements (what kernels take)."""
        return tuple(s // self.itemsize for s in self.strides)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d GpuArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"GpuArray({self.get()!r}, on {self.runtime.device_name})"

    # ---- to the host

    def get(self) -> np.ndarray:
        """A host copy (a fresh C-contiguous ndarray)."""
        src = self if self.is_c_contiguous else self.copy()
        host = np.empty(self.shape, self.dtype)
        self.runtime.to_host(host, src.ptr)
        return host

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype, copy=False)

    # ---- views and copies

    def view(self, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> GpuArray:
        """A view of the same memory: ``offset`` bytes from this array's first element."""
        return GpuArray(
            self.runtime,
            self.buffer,
            shape,
            self.dtype,
            strides,
            self.ptr - self.buffer.ptr + offset,
        )

    def transpose(self, axes: Sequence[int] | None = None) -> GpuArray:
        """A view with the axes permuted (reversed by default)."""
        axes = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} are not a permutation of {self.ndim} dimensions")
        return self.view([self.shape[a] for a in axes], [self.strides[a] for a in axes])

    @property
    def T(self) -> GpuArray:
        return self.transpose()

    def copy(self) -> GpuArray:
        """A C-contiguous copy on the device."""
        out = GpuArray.empty(self.shape, self.dtype, self.runtime)
        if self.is_c_contiguous:
            self.runtime.copy(out.ptr, self.ptr, self.nbytes)
        elif self.size:
            copy_into(out, self)
        return out

    def astype(self, dtype: Any) -> GpuArray:
        """A C-contiguous copy converted to ``dtype``."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self.copy()
        out = GpuArray.empty(self.shape, dtype, self.runtime)
        if self.size:
            copy_into(out, self)
        return out

    def reshape(self, shape: Sequence[int]) -> GpuArray:
        """The same elements in ``shape`` (one -1 allowed): a view when contiguous."""
        shape = list(int(n) for n in shape)
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension (-1)")
        if -1 in shape:
            known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape an array of size {self.size} into {tuple(shape)}")
            shape[shape.index(-1)] = self.size // known
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape an array of size {self.size} into {tuple(shape)}")
        src = self if self.is_c_contiguous else self.copy()
        return src.view(shape, c_strides(shape, self.itemsize))

    def fill(self, value: Any) -> None:
        """Set every element to ``value`` (on a contiguous array through one host copy of
        the value broadcast; on a view through the copy kernel)."""
        host = np.full(self.shape, value, dtype=self.dtype)
        if self.is_c_contiguous:
            self.runtime.to_device(self.ptr, host)
        else:
            copy_into(self, GpuArray.from_host(host, runtime=self.runtime))

    def __getitem__(self, index: Any) -> GpuArray:
        """Basic indexing (ints, slices, ``None``, ``...``): a view, as in NumPy."""
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            at = next(k for k, i in enumerate(index) if i is Ellipsis)
            fill = self.ndim - (len(index) - 1 - sum(i is None for i in index))
            index = index[:at] + (slice(None),) * fill + index[at + 1 :]
        shape: list[int] = []
        strides: list[int] = []
        offset = 0
        dim = 0
        for item in index:
            if item is None:
                shape.append(1)
                strides.append(0)
                continue
            if dim >= self.ndim:
                raise IndexError(f"too many indices for an array of {self.ndim} dimensions")
            n, s = self.shape[dim], self.strides[dim]
            if isinstance(item, slice):
                start, stop, step = item.indices(n)
                count = len(range(start, stop, step))
                shape.append(count)
                strides.append(s * step)
                offset += start * s if count else 0
            elif isinstance(item, int | np.integer):
                k = int(item) + (n if item < 0 else 0)
                if not 0 <= k < n:
                    raise IndexError(f"index {item} is out of bounds for axis {dim} with size {n}")
                offset += k * s
            else:
                raise IndexError(
                    f"GpuArray supports basic indexing only (ints, slices, None, ...), got {item!r}"
                )
            dim += 1
        shape += self.shape[dim:]
        strides += self.strides[dim:]
        return self.view(shape, strides, offset)
