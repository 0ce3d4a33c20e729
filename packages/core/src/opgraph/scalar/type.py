"""ScalarType: the type of the 0-d values the scalar ops (and Elemwise loops) work on."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.type import Type

__all__ = [
    "ScalarType",
    "all_dtypes",
    "complex_dtypes",
    "continuous_dtypes",
    "discrete_dtypes",
    "float_dtypes",
    "get_scalar_type",
    "int_dtypes",
    "uint_dtypes",
    "upcast",
]

int_dtypes = ("int8", "int16", "int32", "int64")
uint_dtypes = ("uint8", "uint16", "uint32", "uint64")
float_dtypes = ("float16", "float32", "float64")
complex_dtypes = ("complex64", "complex128")
discrete_dtypes = ("bool", *int_dtypes, *uint_dtypes)
continuous_dtypes = (*float_dtypes, *complex_dtypes)
all_dtypes = (*discrete_dtypes, *continuous_dtypes)


def _flag(name: str) -> Any:
    """``config.<name>`` through the hot-path accessor (every Elemwise node built asks)."""
    return config.current(name)


def upcast(dtype: str, *dtypes: str) -> str:
    """Return the dtype NumPy gives when combining values of these dtypes (Theano's rule).

    Under ``cast_policy=numpy+floatX`` with ``floatX=float32``, a float64 result is kept in
    float32 unless one of the dtypes is explicitly float64.
    """
    keep_float32 = _flag("cast_policy") == "numpy+floatX" and _flag("floatX") == "float32"
    key = (keep_float32, dtype, *dtypes)
    try:
        name = _UPCASTS.get(key)
    except TypeError:  # an unhashable dtype description
        key, name = None, None
    if name is not None:
        return name
    result = np.result_type(*(np.dtype(d) for d in (dtype, *dtypes)))
    name = str(result)
    if name == "float64" and keep_float32 and "float64" not in (dtype, *dtypes):
        name = "float32"
    if key is not None:
        if len(_UPCASTS) >= 4096:
            _UPCASTS.clear()
        _UPCASTS[key] = name
    return name


#: ``{(keep_float32, *dtypes): upcast dtype}``: every Elemwise node built asks for one, and a
#: graph has few distinct combinations (NumPy's promotion is not free).
_UPCASTS: dict[tuple[Any, ...], str] = {}


class ScalarType(Type):
    """A 0-d value of one NumPy dtype (``ScalarType('float64')``)."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        dtype = str(np.dtype(dtype)) if dtype != "floatX" else _floatx()
        if dtype not in all_dtypes:
            raise TypeError(f"unsupported scalar dtype {dtype!r}; expected one of {all_dtypes}")
        self.dtype = dtype
        self.numpy_dtype = np.dtype(dtype)

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``data`` as a NumPy scalar of this dtype, or raise TypeError."""
        if isinstance(data, np.ndarray) and data.ndim == 0:
            data = data[()]
        if strict:
            if not isinstance(data, np.generic) or str(data.dtype) != self.dtype:
                raise TypeError(f"{self} expects a numpy {self.dtype} scalar, got {data!r}")
            return data
        try:
            converted = self.numpy_dtype.type(data)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"cannot convert {data!r} to a {self.dtype} scalar: {exc}") from exc
        if not allow_downcast and not _is_lossless(data, converted):
            raise TypeError(
                f"converting {data!r} to {self.dtype} would lose precision. "
                "HINT: cast it explicitly, or pass allow_input_downcast=True."
            )
        return converted

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return bool(np.allclose(a, b, equal_nan=True))

    def __str__(self) -> str:
        return self.dtype

    def get_shape_info(self, obj: Any) -> Any:
        return ()


def _floatx() -> str:
    return str(config.floatX)


def _is_lossless(original: Any, converted: Any) -> bool:
    if isinstance(original, np.generic | np.ndarray):
        src = np.asarray(original).dtype
        if np.can_cast(src, converted.dtype, casting="safe"):
            return True
    try:
        with np.errstate(all="ignore"):
            same = converted == original
            return bool(same) or (bool(np.isnan(converted)) and bool(np.isnan(original)))
    except (TypeError, ValueError):
        return False


_cache: dict[str, ScalarType] = {}


def get_scalar_type(dtype: str) -> ScalarType:
    """Return the (cached) ScalarType of ``dtype``."""
    t = _cache.get(dtype)
    if t is None:
        t = _cache[dtype] = ScalarType(dtype)
    return t
