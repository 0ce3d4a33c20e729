"""Real-input fast Fourier transforms with Theano's layout (Theano's ``tensor.fft``).

``rfft(x)`` transforms every axis of ``x`` but the first (the batch axis) and stores the
complex result as a trailing axis of length 2 (real part, imaginary part)::

    x: (m, ..., n)  ->  rfft(x): (m, ..., n // 2 + 1, 2)

``irfft`` is its inverse; ``is_odd=True`` asks for an odd last output length
``2 * (N - 1) + 1`` instead of ``2 * (N - 1)``. ``norm`` is NumPy's (``None`` scales only the
inverse by ``1 / n``, ``'ortho'`` scales both by ``1 / sqrt(n)``) plus ``'no_norm'`` (no
scaling at all). The Ops compute with :mod:`numpy.fft` and return the input's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import float_dtypes
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.reduction import prod
from opgraph.tensor.shape import integer_dtypes
from opgraph.tensor.subtensor import set_subtensor
from opgraph.tensor.type import TensorType

__all__ = ["IRFFTOp", "RFFTOp", "irfft", "irfft_op", "rfft", "rfft_op"]


def _float_input(op: Op, a: Any, min_ndim: int, what: str) -> Variable:
    """``a`` as a float tensor of at least ``min_ndim`` dimensions, else a TypeError."""
    a = as_tensor_variable(a)
    if a.type.ndim < min_ndim:
        raise TypeError(
            f"{type(op).__name__}: input must have dimension >= {min_ndim}, {what}; "
            f"got {a.type} ({a})"
        )
    if a.type.dtype not in float_dtypes:
        raise TypeError(
            f"{type(op).__name__}: input must be a real float tensor, got {a.type} ({a}). "
            f"Cast it first, e.g. opgraph.tensor.cast(x, 'float64')."
        )
    return a


def _lengths(op: Op, s: Any, ndim: int) -> Variable:
    """The transform lengths ``s``: an integer vector of ``ndim - 1`` entries."""
    s = as_tensor_variable(s)
    if s.type.dtype not in integer_dtypes:
        raise TypeError(
            f"{type(op).__name__}: length of the transformed axis must be of type integer, "
            f"got {s.type} ({s})"
        )
    if s.type.ndim != 1:
        raise TypeError(f"{type(op).__name__}: s must be a vector of lengths, got {s.type}")
    data = getattr(s, "data", None)
    if data is not None and len(data) != ndim - 1:
        raise ValueError(
            f"{type(op).__name__}: s must give one length per non-batch axis "
            f"({ndim - 1}), got {len(data)}"
        )
    return s


def _check_lengths(op: Op, s: np.ndarray, ndim: int) -> tuple[int, ...]:
    """Run-time check of ``s`` (one positive length per transformed axis)."""
    if s.shape != (ndim - 1,) or (s.size and s.min() < 1):
        raise ValueError(
            f"{type(op).__name__}: s must hold {ndim - 1} positive lengths (one per "
            f"non-batch axis), got {s.tolist()}"
        )
    return tuple(int(v) for v in s)


def _half_spectrum_slice(ndim: int, s: Variable) -> tuple[slice, ...]:
    """Index of the frequencies ``1 .. n - 1 - n // 2`` that stand for two in the spectrum.

    Along the second-to-last axis of a half spectrum (``n`` the last transform length),
    excluding the zero frequency and, for even ``n``, the Nyquist frequency.
    """
    last = s[-1]
    return (*[slice(None)] * (ndim - 2), slice(1, last // 2 + last % 2), slice(None))


class RFFTOp(Op):
    """Unnormalised real-to-complex FFT over all axes but the first, as ``(..., 2)`` floats.

    Inputs: ``a`` (a float tensor ``(m, ...)``) and ``s`` (the ``a.ndim - 1`` transform
    lengths; ``a`` is cropped or zero-padded to them, as :func:`numpy.fft.rfftn`). Output:
    ``(m, s[0], ..., s[-1] // 2 + 1, 2)`` of ``a``'s dtype.
    """

    __props__ = ()

    def output_type(self, inp: Variable) -> TensorType:
        """The output type: ``inp``'s dtype with one more (real/imag) axis."""
        return TensorType(inp.type.dtype, [False] * (inp.type.ndim + 1))

    def make_node(self, a: Any, s: Any = None) -> Apply:
        a = _float_input(self, a, 2, "with first dimension batches")
        s = as_tensor_variable(a.shape[1:]) if s is None else _lengths(self, s, a.type.ndim)
        return Apply(self, [a, s], [self.output_type(a)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        a, s = inputs
        lengths = _check_lengths(self, np.asarray(s), a.ndim)
        spectrum = np.fft.rfftn(a, s=lengths, axes=tuple(range(1, a.ndim)))
        out = np.empty((*spectrum.shape, 2), dtype=node.outputs[0].type.dtype)
        out[..., 0] = spectrum.real
        out[..., 1] = spectrum.imag
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        a, s = node.inputs
        n = a.type.ndim - 1
        dims = [s[i] for i in range(n)]
        return [(input_shapes[0][0], *dims[:-1], dims[-1] // 2 + 1, 2)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (gout,) = output_grads
        s = inputs[1]
        # The inverse FFT counts the frequencies that stand for a pair twice: halve them.
        idx = _half_spectrum_slice(gout.type.ndim, s)
        gout = set_subtensor(gout[idx], gout[idx] * 0.5)
        return [irfft_op(gout, s), disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False]]


rfft_op = RFFTOp()


class IRFFTOp(Op):
    """Unnormalised complex-to-real inverse FFT of a ``(..., 2)`` half spectrum.

    Inputs: ``a`` (``(m, ..., n // 2 + 1, 2)`` floats, real and imaginary parts) and ``s``
    (the output's ``a.ndim - 2`` transform lengths; by default ``2 * (N - 1)`` on the last
    axis). Output: ``(m, s[0], ..., s[-1])`` of ``a``'s dtype, *not* divided by ``prod(s)``.
    """

    __props__ = ()

    def output_type(self, inp: Variable) -> TensorType:
        """The output type: ``inp``'s dtype without the real/imag axis."""
        return TensorType(inp.type.dtype, [False] * (inp.type.ndim - 1))

    def make_node(self, a: Any, s: Any = None) -> Apply:
        a = _float_input(self, a, 3, "with first dimension batches and last real/imag parts")
        if s is None:
            s = a.shape[1:-1]
            s = set_subtensor(s[-1], (s[-1] - 1) * 2)
        else:
            s = _lengths(self, s, a.type.ndim - 1)
        return Apply(self, [a, as_tensor_variable(s)], [self.output_type(a)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        a, s = inputs
        if a.shape[-1] != 2:
            raise ValueError(
                f"IRFFTOp: the last axis must hold the real and imaginary parts (length 2), "
                f"got shape {a.shape}"
            )
        lengths = _check_lengths(self, np.asarray(s), a.ndim - 1)
        spectrum = a[..., 0] + 1j * a[..., 1]
        out = np.fft.irfftn(spectrum, s=lengths, axes=tuple(range(1, a.ndim - 1)))
        # Undo NumPy's 1 / prod(s) so that the Op is the plain adjoint-style inverse.
        out *= float(np.prod(lengths))
        output_storage[0][0] = out.astype(node.outputs[0].type.dtype, copy=False)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        a, s = node.inputs
        return [(input_shapes[0][0], *[s[i] for i in range(a.type.ndim - 2)])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (gout,) = output_grads
        s = inputs[1]
        gf = rfft_op(gout, s)
        # Those frequencies stand for a positive and a negative one: count them twice.
        idx = _half_spectrum_slice(gf.type.ndim, s)
        gf = set_subtensor(gf[idx], gf[idx] * 2)
        return [gf, disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False]]


irfft_op = IRFFTOp()


def _unitary(norm: str | None) -> str | None:
    """Check ``norm`` (``None``, ``'ortho'`` or ``'no_norm'``) and return it."""
    if norm not in (None, "ortho", "no_norm"):
        raise ValueError(f"Invalid value {norm} for norm, must be None, 'ortho' or 'no norm'")
    return norm


def rfft(inp: Any, norm: str | None = None) -> Variable:
    """The FFT of the real tensor ``inp`` of shape ``(m, ..., n)`` over all axes but the first.

    Returns ``(m, ..., n // 2 + 1, 2)``: the ``n // 2 + 1`` non-trivial frequencies of each
    of the ``m`` transforms, real and imaginary parts on the last axis. ``norm``: ``None``
    or ``'no_norm'`` (unscaled) or ``'ortho'`` (divided by ``sqrt(prod(inp.shape[1:]))``).
    """
    inp = as_tensor_variable(inp)
    cond_norm = _unitary(norm)
    out = rfft_op(inp)
    if cond_norm == "ortho":
        s = inp.shape[1:]
        out = out / tm.sqrt(prod(s).astype(inp.type.dtype))
    return out


def irfft(inp: Any, norm: str | None = None, is_odd: bool = False) -> Variable:
    """The real inverse FFT of ``inp`` of shape ``(m, ..., N, 2)`` (a half spectrum).

    Returns ``(m, ..., n)`` with ``n = 2 * (N - 1)``, or ``2 * (N - 1) + 1`` when
    ``is_odd``. ``norm``: ``None`` divides by ``prod(output.shape[1:])`` (NumPy's default),
    ``'ortho'`` by its square root, ``'no_norm'`` not at all.
    """
    if is_odd not in (True, False):
        raise ValueError(f"Invalid value {is_odd} for id_odd, must be True or False")
    inp = as_tensor_variable(inp)
    cond_norm = _unitary(norm)
    if inp.type.ndim < 3:
        # Let the Op raise its own message for a too-small input.
        irfft_op(inp)
    s = inp.shape[1:-1]
    s = set_subtensor(s[-1], (s[-1] - 1) * 2 + int(bool(is_odd)))
    out = irfft_op(inp, s)
    if cond_norm is None:
        out = out / prod(s).astype(inp.type.dtype)
    elif cond_norm == "ortho":
        out = out / tm.sqrt(prod(s).astype(inp.type.dtype))
    return out
