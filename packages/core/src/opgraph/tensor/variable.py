"""TensorVariable (NumPy-like operators and methods) and TensorConstant.

The operators and methods are the ops of the tensor library, so this module sits above them
all; it makes :class:`~opgraph.tensor.type.TensorType` build these classes when imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.axes as taxes
import opgraph.tensor.cumulative as tcum
import opgraph.tensor.dot as tdot
import opgraph.tensor.extra_ops as textra
import opgraph.tensor.math as tm
import opgraph.tensor.reduction as tred
import opgraph.tensor.shape as tshape
import opgraph.tensor.sort as tsort
import opgraph.tensor.statistics as tstat
from opgraph.graph.basic import Constant, Variable
from opgraph.tensor.basic import _AsTensorError, transfer
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.subtensor import getitem, take
from opgraph.tensor.type import TensorType

__all__ = ["TensorConstant", "TensorVariable", "_tensor_py_operators"]


class _tensor_py_operators:
    """Operators and NumPy-like methods shared by every tensor variable class."""

    # NumPy must hand ``ndarray + variable`` to our reflected operators.
    __array_priority__ = 1000

    # arithmetic -----------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return _binop(tm.add, self, other)

    def __radd__(self, other: Any) -> Any:
        return _binop(tm.add, other, self)

    def __sub__(self, other: Any) -> Any:
        return _binop(tm.sub, self, other)

    def __rsub__(self, other: Any) -> Any:
        return _binop(tm.sub, other, self)

    def __mul__(self, other: Any) -> Any:
        return _binop(tm.mul, self, other)

    def __rmul__(self, other: Any) -> Any:
        return _binop(tm.mul, other, self)

    def __truediv__(self, other: Any) -> Any:
        return _binop(tm.true_div, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _binop(tm.true_div, other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _binop(tm.floor_div, self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _binop(tm.floor_div, other, self)

    def __mod__(self, other: Any) -> Any:
        return _binop(tm.mod, self, other)

    def __rmod__(self, other: Any) -> Any:
        return _binop(tm.mod, other, self)

    def __pow__(self, other: Any) -> Any:
        return _binop(tm.pow, self, other)

    def __rpow__(self, other: Any) -> Any:
        return _binop(tm.pow, other, self)

    def __neg__(self) -> Any:
        return tm.neg(self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return tm.abs_(self)

    def __invert__(self) -> Any:
        return tm.invert(self)

    def __and__(self, other: Any) -> Any:
        return _binop(tm.and_, self, other)

    def __rand__(self, other: Any) -> Any:
        return _binop(tm.and_, other, self)

    def __or__(self, other: Any) -> Any:
        return _binop(tm.or_, self, other)

    def __ror__(self, other: Any) -> Any:
        return _binop(tm.or_, other, self)

    def __xor__(self, other: Any) -> Any:
        return _binop(tm.xor, self, other)

    def __rxor__(self, other: Any) -> Any:
        return _binop(tm.xor, other, self)

    # comparisons (``==`` stays identity, as in Theano: use ``eq``) ------------------------
    #: Whether ``bool(var)`` is True (Theano 1.0): every variable is truthy, so
    #: ``if not W:`` / ``if persistent:`` work, except the results of ``<``, ``<=``,
    #: ``>``, ``>=``, which raise so that ``a < b < c`` cannot silently mean ``b < c``.
    _is_nonzero = True

    def __lt__(self, other: Any) -> Any:
        return _comparison(_binop(tm.lt, self, other))

    def __le__(self, other: Any) -> Any:
        return _comparison(_binop(tm.le, self, other))

    def __gt__(self, other: Any) -> Any:
        return _comparison(_binop(tm.gt, self, other))

    def __ge__(self, other: Any) -> Any:
        return _comparison(_binop(tm.ge, self, other))

    def __bool__(self) -> bool:
        if self._is_nonzero:
            return True
        raise TypeError(
            "Variables do not support boolean operations. The truth value of the comparison "
            f"{self} is not known until the function runs (and `a < b < c` would mean "
            "`(a < b) and (b < c)`). HINT: use opgraph.tensor.switch / opgraph.ifelse.ifelse "
            "for conditions, and opgraph.tensor.and_ to combine comparisons."
        )

    def __len__(self) -> int:
        raise TypeError(
            f"len() of the symbolic variable {self} is not known until the function runs. "
            "HINT: use x.shape[0]."
        )

    def __iter__(self) -> Any:
        raise TypeError(f"the symbolic variable {self} cannot be iterated over")

    # attributes -----------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.type.ndim  # type: ignore[attr-defined]

    @property
    def dtype(self) -> str:
        """The dtype name, e.g. ``'float64'``."""
        return self.type.dtype  # type: ignore[attr-defined]

    @property
    def broadcastable(self) -> tuple[bool, ...]:
        """Which dimensions are broadcastable (always length 1)."""
        return self.type.broadcastable  # type: ignore[attr-defined]

    @property
    def T(self) -> Any:
        """The transpose (reversed dimensions), named ``x.T`` after a named ``x`` as in Theano."""
        return taxes.transpose(self)

    def dimshuffle(self, *pattern: Any) -> Any:
        """Reorder/add/drop dimensions: ``x.dimshuffle('x', 0)``, ``x.dimshuffle(1, 0)``."""
        if len(pattern) == 1 and isinstance(pattern[0], list | tuple):
            pattern = tuple(pattern[0])
        return DimShuffle(self.broadcastable, pattern)(self)

    def sum(
        self,
        axis: Any = None,
        dtype: str | None = None,
        keepdims: bool = False,
        acc_dtype: str | None = None,
    ) -> Any:
        """Sum over ``axis`` (all axes by default)."""
        return tm.sum(self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype)

    def astype(self, dtype: str) -> Any:
        """Cast to ``dtype``."""
        return tm.cast(self, dtype)

    def __dot__(self, other: Any) -> Any:
        return tdot.dot(self, other)

    def __matmul__(self, other: Any) -> Any:
        return _binop(tdot.matmul, self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _binop(tdot.matmul, other, self)

    def dot(self, other: Any) -> Any:
        """Matrix/vector product with ``other``."""
        return tdot.dot(self, other)

    # indexing and shape (opgraph.tensor.subtensor / opgraph.tensor.shape) ------------
    def __getitem__(self, index: Any) -> Any:
        return getitem(self, index)

    def take(self, indices: Any, axis: int | None = None, mode: str = "raise") -> Any:
        """Elements at ``indices`` along ``axis`` (NumPy's ``take``)."""
        return take(self, indices, axis, mode)

    @property
    def shape(self) -> Any:
        """The symbolic shape: a vector of int64."""
        return tshape.shape(self)

    @property
    def size(self) -> Any:
        """The symbolic number of elements."""
        return tred.prod(self.shape)

    def reshape(self, shape: Any, ndim: int | None = None) -> Any:
        """Same data with another shape (``-1`` infers one dimension)."""
        return tshape.reshape(self, shape, ndim=ndim)

    def flatten(self, ndim: int = 1) -> Any:
        """Collapse the trailing dimensions so the result has ``ndim`` dimensions."""
        return tshape.flatten(self, ndim)

    def squeeze(self, axis: Any = None) -> Any:
        """Drop broadcastable (length-1) dimensions."""
        return tshape.squeeze(self, axis)

    def transpose(self, *axes: Any) -> Any:
        """Permute the dimensions (reverse them when no axes are given)."""
        if len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        return taxes.transpose(self, list(axes) if axes else None)

    def repeat(self, repeats: Any, axis: int | None = None) -> Any:
        """Repeat elements (NumPy's ``repeat``)."""
        return textra.repeat(self, repeats, axis)

    def sort(self, axis: int = -1, kind: str = "quicksort") -> Any:
        """Sorted copy along ``axis``."""
        return tsort.sort(self, axis, kind)

    def argsort(self, axis: int = -1, kind: str = "quicksort") -> Any:
        """Indices that sort along ``axis``."""
        return tsort.argsort(self, axis, kind)

    # reductions (opgraph.tensor.reduction, .statistics, .cumulative) ----------------
    def prod(
        self,
        axis: Any = None,
        dtype: str | None = None,
        keepdims: bool = False,
        acc_dtype: str | None = None,
    ) -> Any:
        """Product over ``axis``."""
        return tred.prod(self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype)

    def mean(
        self,
        axis: Any = None,
        dtype: str | None = None,
        keepdims: bool = False,
        acc_dtype: str | None = None,
    ) -> Any:
        """Mean over ``axis``."""
        return tstat.mean(self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        """Variance over ``axis``."""
        return tstat.var(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        """Standard deviation over ``axis``."""
        return tstat.std(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Maximum over ``axis``."""
        return tred.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Minimum over ``axis``."""
        return tred.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Index of the maximum along ``axis``."""
        return tred.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Index of the minimum along ``axis``."""
        return tred.argmin(self, axis=axis, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False) -> Any:
        """True where every element along ``axis`` is true."""
        return tred.all(self, axis=axis, keepdims=keepdims)

    def any(self, axis: Any = None, keepdims: bool = False) -> Any:
        """True where some element along ``axis`` is true."""
        return tred.any(self, axis=axis, keepdims=keepdims)

    def cumsum(self, axis: int | None = None) -> Any:
        """Cumulative sum along ``axis`` (flattened when None)."""
        return tcum.cumsum(self, axis=axis)

    def cumprod(self, axis: int | None = None) -> Any:
        """Cumulative product along ``axis`` (flattened when None)."""
        return tcum.cumprod(self, axis=axis)

    def norm(self, L: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """The L-norm over ``axis`` (Theano's ``x.norm(2)``)."""
        return tstat.norm(self, L, axis=axis, keepdims=keepdims)

    # elementwise helpers --------------------------------------------------------------
    def clip(self, a_min: Any, a_max: Any) -> Any:
        """Clip to ``[a_min, a_max]``."""
        return tm.clip(self, a_min, a_max)

    def round(self, mode: str = "half_to_even") -> Any:
        """Round to the nearest integer (halves to even by default)."""
        return tm.round(self, mode)

    def fill(self, value: Any) -> Any:
        """``value`` broadcast to this variable's shape."""
        return tm.fill(self, value)

    def zeros_like(self, dtype: str | None = None) -> Any:
        """Zeros of this shape."""
        return tm.zeros_like(self, dtype=dtype)

    def ones_like(self, dtype: str | None = None) -> Any:
        """Ones of this shape."""
        return tm.ones_like(self, dtype=dtype)

    def copy(self, name: str | None = None) -> Any:
        """A symbolic copy (a new variable computing the same value)."""
        out = tm.identity(self)
        out.name = name
        return out

    def transfer(self, target: Any) -> Any:
        """This variable on ``target`` (Theano's method): ``"cpu"``, or a GPU target such as
        ``"cuda"`` with opgraph-backend-cuda. See :func:`opgraph.tensor.basic.transfer`."""
        return transfer(self, target)

    def conj(self) -> Any:
        """Complex conjugate."""
        return tm.conj(self)

    @property
    def real(self) -> Any:
        """Real part."""
        return tm.real(self)

    @property
    def imag(self) -> Any:
        """Imaginary part."""
        return tm.imag(self)

    def nonzero(self, return_matrix: bool = False) -> Any:
        """Indices of the non-zero elements, one vector per dimension."""
        return textra.nonzero(self, return_matrix=return_matrix)


def _comparison(result: Any) -> Any:
    """Mark the result of ``<``/``<=``/``>``/``>=`` as not truthy (see ``__bool__``)."""
    if isinstance(result, Variable):
        result._is_nonzero = False
    return result


def _binop(fn: Any, a: Any, b: Any) -> Any:
    try:
        return fn(a, b)
    except _AsTensorError:
        return NotImplemented


class TensorVariable(_tensor_py_operators, Variable):
    """A symbolic tensor: an input, an intermediate result or an output of a graph."""

    __hash__ = Variable.__hash__


class TensorConstant(_tensor_py_operators, Constant):
    """A constant tensor. Printed as Theano does: ``TensorConstant{2.0}``,
    ``TensorConstant{(1,) of 0.5}`` for an array of one repeated value."""

    __hash__ = Constant.__hash__

    def __init__(self, type: Any, data: Any, name: str | None = None) -> None:
        super().__init__(type, data, name)
        arr = self.data
        self.tag.unique_value = None
        if isinstance(arr, np.ndarray) and arr.ndim > 0 and arr.size:
            flat = arr.ravel()
            if (flat == flat[0]).all():
                self.tag.unique_value = flat[0]

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        unique = getattr(self.tag, "unique_value", None)
        if unique is not None:
            text = f"{self.data.shape} of {unique}"
        else:
            text = str(self.data)
        if len(text) > 20:
            text = text[:10] + ".." + text[-10:]
        return f"TensorConstant{{{text}}}"

    def clone(self, name: str | None = None) -> TensorConstant:
        cp = super().clone(name)
        return cp  # type: ignore[return-value]


TensorType.variable_type = TensorVariable
TensorType.constant_type = TensorConstant


def sequence_of_ints(x: Any) -> Sequence[int] | None:
    """Return ``x`` as a tuple of ints if it is an int or a sequence of ints, else None."""
    if isinstance(x, int | np.integer):
        return (int(x),)
    if isinstance(x, list | tuple) and all(isinstance(i, int | np.integer) for i in x):
        return tuple(int(i) for i in x)
    return None
