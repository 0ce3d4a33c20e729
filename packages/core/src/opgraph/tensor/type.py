"""TensorType: an ndarray of one dtype, a number of dimensions, and broadcastable flags."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.type import Type
from opgraph.scalar.type import all_dtypes, get_scalar_type

__all__ = ["TensorType", "describe_value"]

_KIND = {0: "scalar", 1: "vector", 2: "matrix"}


def describe_value(data: Any) -> str:
    """Short description of a runtime value for error messages (dtype and shape)."""
    if isinstance(data, np.ndarray):
        return f"a numpy array of dtype {data.dtype} and shape {data.shape}"
    if isinstance(data, np.generic):
        return f"a numpy {data.dtype} scalar"
    if isinstance(data, list | tuple):
        try:
            arr = np.asarray(data)
            kind = type(data).__name__
            return f"a Python {kind} (as an array: dtype {arr.dtype}, shape {arr.shape})"
        except Exception:
            return f"a Python {type(data).__name__}"
    return f"a {type(data).__name__} ({data!r})"[:200]


class TensorType(Type):
    """The type of ``numpy.ndarray`` values of one ``dtype`` and ``len(broadcastable)`` dims.

    ``broadcastable[i]`` says dimension ``i`` always has length 1 and broadcasts against
    other inputs. Broadcasting is decided from the type, never from runtime shapes: a value
    whose length-1 dimension is not declared broadcastable does not broadcast.
    ``shape`` optionally gives static lengths (``None`` where unknown).
    """

    __props__ = ("dtype", "broadcastable")

    def __init__(
        self,
        dtype: str,
        broadcastable: Sequence[bool] | None = None,
        name: str | None = None,
        shape: Sequence[int | None] | None = None,
    ) -> None:
        if dtype == "floatX":
            dtype = config.floatX
        if type(dtype) is not str or dtype not in all_dtypes:  # a canonical name is kept
            try:
                dtype = str(np.dtype(dtype))
            except TypeError as exc:
                raise TypeError(f"invalid dtype {dtype!r} for TensorType") from exc
        if dtype not in all_dtypes:
            raise TypeError(f"unsupported dtype {dtype!r}; TensorType accepts {all_dtypes}")
        if broadcastable is None:
            if shape is None:
                raise TypeError("TensorType needs broadcastable (or shape)")
            broadcastable = [s == 1 for s in shape]
        if isinstance(broadcastable, str | bytes) or not all(
            isinstance(b, bool | np.bool_) for b in broadcastable
        ):
            raise TypeError(f"broadcastable must be a sequence of booleans, got {broadcastable!r}")
        self.dtype = dtype
        self.broadcastable = tuple(bool(b) for b in broadcastable)
        self.name = name
        self.numpy_dtype = np.dtype(dtype)
        if shape is not None:
            shape = tuple(None if s is None else int(s) for s in shape)
            if len(shape) != len(self.broadcastable):
                raise TypeError("shape and broadcastable must have the same length")
        self.shape = shape or tuple(1 if b else None for b in self.broadcastable)

    @property
    def ndim(self) -> int:
        return len(self.broadcastable)

    #: The classes of the variables and constants this type builds: TensorVariable and
    #: TensorConstant, with NumPy-like operators built from the ops of the tensor library.
    #: :mod:`opgraph.tensor.variable`, which sits above those ops, sets them when imported.
    variable_type: type[Variable] = Variable
    constant_type: type[Constant] = Constant
    #: ``rebroadcast(var, type)``: ``var`` (same dtype and ndim) with ``type``'s broadcastable
    #: flags, for :meth:`convert_variable`. Set by :mod:`opgraph.tensor.basic`, which defines
    #: the ``Rebroadcast`` op above this module.
    rebroadcast: Callable[[Variable, TensorType], Variable]

    def clone(
        self, dtype: str | None = None, broadcastable: Sequence[bool] | None = None
    ) -> TensorType:  # type: ignore[override]
        """Return a TensorType with some of dtype/broadcastable changed."""
        return TensorType(
            dtype or self.dtype, self.broadcastable if broadcastable is None else broadcastable
        )

    #: ``(dtype, ndim, ((dim, length), ...))``, computed on first use: see fast_filter_spec.
    _exact: tuple[np.dtype, int, tuple[tuple[int, int], ...]] | None = None

    def fast_filter_spec(self) -> tuple[np.dtype, int, tuple[tuple[int, int], ...]]:
        """What an ndarray must match for :meth:`filter` to return it unchanged.

        Returns ``(dtype, ndim, ((dim, length), ...))``: an ndarray of exactly this dtype and
        number of dimensions whose listed dimensions have these lengths (1 where
        broadcastable, the static ``shape`` elsewhere) passes as it is, whatever ``strict``
        and ``allow_downcast`` say. Compiled call paths use it to skip calling ``filter``.
        """
        exact = self._exact
        if exact is None:
            fixed = [(i, 1) for i, b in enumerate(self.broadcastable) if b]
            fixed += [(i, s) for i, s in enumerate(self.shape or ()) if s is not None]
            exact = self._exact = (self.numpy_dtype, self.ndim, tuple(dict.fromkeys(fixed)))
        return exact

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``data`` as an ndarray of this type, or raise TypeError naming the problem.

        Python lists and numbers are converted. A NumPy value of another dtype is converted
        only if that loses nothing (int32 to float64) or ``allow_downcast`` is true; Python
        floats may always become floatX (Theano's rule).
        """
        if type(data) is np.ndarray:  # the common case, checked first (same result)
            dtype, ndim, fixed = self._exact or self.fast_filter_spec()
            if data.dtype == dtype and data.ndim == ndim:
                if not fixed:
                    return data
                shape = data.shape
                if all(shape[i] == n for i, n in fixed):
                    return data
        if isinstance(data, np.ndarray) and data.dtype == self.numpy_dtype:
            arr = data
        elif strict:
            raise TypeError(
                f"{self} expects a numpy array of dtype {self.dtype}, got {describe_value(data)}"
            )
        else:
            arr = self._convert(data, allow_downcast)
        if arr.ndim != self.ndim:
            raise TypeError(
                f"{self} expects {self.ndim} dimension(s), got {describe_value(data)} "
                f"with {arr.ndim} dimension(s)"
            )
        for i, (b, n) in enumerate(zip(self.broadcastable, arr.shape, strict=True)):
            if b and n != 1:
                raise TypeError(
                    f"{self}: dimension {i} is broadcastable so must have length 1, got shape "
                    f"{arr.shape}"
                )
        if self.shape is not None:
            for i, (s, n) in enumerate(zip(self.shape, arr.shape, strict=True)):
                if s is not None and s != n:
                    raise TypeError(
                        f"{self}: dimension {i} must have length {s}, got shape {arr.shape}"
                    )
        return arr

    def _convert(self, data: Any, allow_downcast: bool | None) -> np.ndarray:
        if isinstance(data, Variable):
            raise TypeError(
                f"expected a value for {self}, got the symbolic variable {data}. "
                "HINT: symbolic inputs go in the inputs list or in givens, not as call arguments."
            )
        if isinstance(data, np.ndarray | np.generic):
            src = np.asarray(data)
            if allow_downcast or np.can_cast(src.dtype, self.numpy_dtype, casting="safe"):
                return src.astype(self.numpy_dtype)
            raise TypeError(
                f"{self} cannot take {describe_value(data)} without losing precision "
                f"({src.dtype} to {self.dtype})"
            )
        try:
            arr = np.asarray(data)
        except Exception as exc:  # ragged lists, odd objects
            raise TypeError(f"{self} cannot convert {describe_value(data)}: {exc}") from exc
        if arr.dtype == object:
            raise TypeError(f"{self} cannot convert {describe_value(data)} to an array of numbers")
        converted = arr.astype(self.numpy_dtype)
        if allow_downcast:
            return converted
        # Python numbers: allowed if the value survives (ints to floats, floats to floatX).
        if (
            arr.dtype.kind == "f"
            and self.numpy_dtype.kind == "f"
            and (self.dtype == config.floatX or np.can_cast(arr.dtype, self.numpy_dtype))
        ):
            return converted
        with np.errstate(all="ignore"):
            same = np.array_equal(converted, arr, equal_nan=arr.dtype.kind in "fc")
        if not same and not np.can_cast(arr.dtype, self.numpy_dtype, casting="safe"):
            raise TypeError(
                f"{self} cannot take {describe_value(data)}: converting it to {self.dtype} "
                "would change its values"
            )
        return converted

    def is_valid_value(self, data: Any) -> bool:
        return (
            isinstance(data, np.ndarray)
            and data.dtype == self.numpy_dtype
            and data.ndim == self.ndim
            and all(n == 1 for b, n in zip(self.broadcastable, data.shape, strict=True) if b)
        )

    def convert_variable(self, var: Variable) -> Variable | None:
        """Accept ``var`` if it has this dtype and ndim and is at least as broadcastable."""
        vt = var.type
        if vt == self:
            return var
        if (
            isinstance(vt, TensorType)
            and vt.dtype == self.dtype
            and vt.ndim == self.ndim
            and all(
                not sb or vb for sb, vb in zip(self.broadcastable, vt.broadcastable, strict=True)
            )
        ):
            return TensorType.rebroadcast(var, self)
        return None

    def values_eq(self, a: Any, b: Any) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )

    def values_eq_approx(
        self, a: Any, b: Any, rtol: float | None = None, atol: float | None = None
    ) -> bool:
        """Equal up to a dtype-aware tolerance (NaN equals NaN, inf equals inf)."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind not in "fc":
            return bool(np.array_equal(a, b))
        tol = {"float16": 1e-3, "float32": 1e-4, "complex64": 1e-4}.get(self.dtype, 1e-8)
        return bool(np.allclose(a, b, rtol=rtol or tol * 10, atol=atol or tol, equal_nan=True))

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and bool(np.may_share_memory(a, b))
        )

    def get_shape_info(self, obj: Any) -> Any:
        return getattr(obj, "shape", None)

    def __str__(self) -> str:
        if self.name:
            return self.name
        b = self.broadcastable
        kinds = {
            (): "scalar",
            (False,): "vector",
            (False, True): "col",
            (True, False): "row",
            (False, False): "matrix",
        }
        kind = kinds.get(b)
        if kind is None:
            kind = str(b) if any(b) else f"{len(b)}D"
        return f"TensorType({self.dtype}, {kind})"

    def __repr__(self) -> str:
        return str(self)

    def scalar_type(self):  # type: ignore[no-untyped-def]
        """The ScalarType of one element."""
        return get_scalar_type(self.dtype)
