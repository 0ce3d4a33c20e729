"""MRG31k3p random streams with Theano 1.0's numbers: ``MRG_RandomStreams``.

The generator is L'Ecuyer and Touzin's combined multiple recursive generator MRG31k3p
(two order-3 recurrences modulo ``M1 = 2**31 - 1`` and ``M2 = 2**31 - 21069``), with the
stream layout of L'Ecuyer, Simard, Chen and Kelton: streams start ``2**134`` steps apart
and the substreams of one draw ``2**72`` steps apart. Everything Theano 1.0 decided is kept,
so the same seed gives the same numbers as ``theano.sandbox.rng_mrg``:

- an integer seed ``s`` is the state ``[s] * 6``; each random variable takes the streams'
  current state as its first substream, its other substreams ``2**72`` steps apart
  (:meth:`MRG_RandomStreams.get_substream_rstates`), then the streams' state jumps
  ``2**134`` steps (:meth:`MRG_RandomStreams.inc_rstate`);
- a draw of ``size`` uses :func:`guess_n_streams` substreams unless ``nstreams`` is given;
  element ``i`` (C order) comes from substream ``i % n_streams``, which advances one step
  per element;
- a step's value ``k`` in ``[1, M1]`` becomes ``k * 2**-31`` in float64 and
  ``float32(k) * 4.6566126e-10f`` in float32 (Theano's C code, which its ``FAST_RUN`` ran;
  Theano's Python fallback rounded through float64 and differs in the last bit for about
  a quarter of float32 values);
- ``normal`` is Box-Muller on an even number of uniforms (first half radii, second half
  angles), ``binomial`` compares uniforms with ``p``, ``multinomial`` and ``choice`` use
  the Ops of :mod:`opgraph.sandbox.multinomial`.

The state of a random variable is an int32 ``(n_streams, 6)`` shared variable whose
``default_update`` is the draw's new state, so each call of a compiled function draws new
numbers, :meth:`MRG_RandomStreams.seed` restarts them, and a pickled function keeps them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable, shared
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type, grad_undefined
from opgraph.graph.op import Op, OutputStorage
from opgraph.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from opgraph.scalar.type import int_dtypes, upcast
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.extra_ops import nonzero
from opgraph.tensor.gradblock import disconnected_grad
from opgraph.tensor.joining import join
from opgraph.tensor.math import cast, cos, log, sin, sqrt
from opgraph.tensor.random_ops import size_vector
from opgraph.tensor.reduction import prod
from opgraph.tensor.shape import MakeVector, get_vector_length, reshape
from opgraph.tensor.type import TensorType

__all__ = [
    "M1",
    "M2",
    "DotModulo",
    "MRG_RandomStreams",
    "ff_2p72",
    "ff_2p134",
    "guess_n_streams",
    "matVecModM",
    "mrg_next_value",
    "mrg_uniform",
    "mrg_uniform_base",
    "multMatVect",
]

# -- the generator's constants ---------------------------------------------------------------
M1 = 2147483647  #: 2**31 - 1, the first component's modulus
M2 = 2147462579  #: 2**31 - 21069, the second component's modulus
MASK12 = 511  #: 2**9 - 1
MASK13 = 16777215  #: 2**24 - 1
MASK2 = 65535  #: 2**16 - 1
MULT2 = 21069
NORM = 4.656612873077392578125e-10  #: 2**-31: a float64 sample is ``k * NORM``
#: A float32 sample is ``float32(k) * NORM32`` (one float32 ulp below 2**-31, so M1 maps
#: below 1).
NORM32 = np.float32(4.6566126e-10)
#: A float16 sample is ``((k & 0x7fff) + 1) * NORM16``, rounded once to float16.
NORM16 = float(np.float16(3.0458e-05))

#: One step of each component as a matrix acting on ``(x1, x2, x3)`` (newest first).
A1p0 = ((0, 4194304, 129), (1, 0, 0), (0, 1, 0))
A2p0 = ((32768, 0, 32769), (1, 0, 0), (0, 1, 0))

Matrix = tuple[tuple[int, ...], ...]


def _matmul_mod(a: Matrix, b: Matrix, m: int) -> Matrix:
    """``a @ b mod m`` for 3x3 matrices of Python ints (exact)."""
    return tuple(
        tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3)
    )


def _matpow_mod(a: Matrix, e: int, m: int) -> Matrix:
    """``a ** e mod m`` by squaring (``e >= 0``)."""
    result: Matrix = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    while e:
        if e & 1:
            result = _matmul_mod(result, a, m)
        a = _matmul_mod(a, a, m)
        e >>= 1
    return result


#: The jumps between substreams (``2**72`` steps) and between streams (``2**134``).
A1p72 = np.array(_matpow_mod(A1p0, 2**72, M1), dtype="int64")
A2p72 = np.array(_matpow_mod(A2p0, 2**72, M2), dtype="int64")
A1p134 = np.array(_matpow_mod(A1p0, 2**134, M1), dtype="int64")
A2p134 = np.array(_matpow_mod(A2p0, 2**134, M2), dtype="int64")


def matVecModM(A: Any, s: Any, m: int) -> np.ndarray:  # Theano's name
    """``A @ s mod m`` as int32, each product reduced before summing (no int64 overflow)."""
    A = np.asarray(A, dtype="int64")
    s = np.asarray(s, dtype="int64")
    return np.asarray(np.sum((A * s) % m, axis=1) % m, dtype="int32")


def multMatVect(v: Any, A: Any, m1: int, B: Any, m2: int) -> np.ndarray:
    """A stream state ``v`` (6 ints) moved by ``A`` (first half, mod ``m1``) and ``B``
    (second half, mod ``m2``): how a state jumps ahead."""
    v = np.asarray(v)
    return np.concatenate([matVecModM(A, v[:3], m1), matVecModM(B, v[3:], m2)])


class DotModulo(Op):
    """Theano's ``DotModulo``: ``concatenate([A @ s % m, A2 @ s2 % m2])`` in the dtype of
    ``s``, each product reduced before summing as :func:`matVecModM` does.

    It is the jump of a stream state (``A``, ``A2``: int64 jump matrices; ``s``, ``s2``: the
    two halves of the state; ``m``, ``m2``: the moduli) as a graph node. :func:`multMatVect`
    computes the same numbers with NumPy directly: building and calling a function for a
    3x3 product costs more than the product.
    """

    __props__ = ()

    def make_node(self, A: Any, s: Any, m: Any, A2: Any, s2: Any, m2: Any) -> Apply:
        ins = [as_tensor_variable(v) for v in (A, s, m, A2, s2, m2)]
        for name, ndim, v in zip(("A", "s", "m", "A2", "s2", "m2"), (2, 1, 0) * 2, ins):
            if v.type.ndim != ndim or v.type.dtype not in int_dtypes:
                raise TypeError(
                    f"DotModulo: {name} must be a {ndim}-d signed integer tensor, got {v} of "
                    f"type {v.type}. HINT: Theano used lmatrix A, ivector s, iscalar m."
                )
        return Apply(self, ins, [ins[1].type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        A, s, m, A2, s2, m2 = inputs
        for a, v in ((A, s), (A2, s2)):
            if a.shape[1] != v.shape[0]:
                raise ValueError(f"DotModulo: shapes {a.shape} and {v.shape} do not agree")
        out = np.concatenate((matVecModM(A, s, int(m)), matVecModM(A2, s2, int(m2))))
        output_storage[0][0] = out.astype(node.outputs[0].type.dtype, copy=False)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(input_shapes[0][0] + input_shapes[3][0],)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        """Integer in, integer out: no gradient path (disconnected), as Theano's int Ops."""
        return [disconnected_type() for _ in inputs]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[False] for _ in node.inputs]


def ff_2p134(rstate: Any) -> np.ndarray:
    """The state ``2**134`` steps after ``rstate``: the start of the next stream."""
    return multMatVect(rstate, A1p134, M1, A2p134, M2)


def ff_2p72(rstate: Any) -> np.ndarray:
    """The state ``2**72`` steps after ``rstate``: the start of the next substream."""
    return multMatVect(rstate, A1p72, M1, A2p72, M2)


# -- the vectorised generator ---------------------------------------------------------------


def _wrap(v: np.ndarray) -> np.ndarray:
    """int64 values reduced to int32's range modulo 2**32 (C's int32 wraparound)."""
    return ((v + 2**31) & 0xFFFFFFFF) - 2**31


def _reduce(y: np.ndarray, m: int) -> np.ndarray:
    """Theano's ``if (y < 0 || y >= m) y -= m`` in int32 arithmetic."""
    return np.where((y < 0) | (y >= m), _wrap(y - m), y)


def _step(x: np.ndarray) -> np.ndarray:
    """Advance the states ``x`` (int64, shape ``(6, lanes)``, one column per stream) by one
    step in place, with Theano's int32 arithmetic and its wraparound (any int32 values);
    return each lane's ``k`` in ``[1, M1]``."""
    x11, x12, x13, x21, x22, x23 = x
    y1 = _wrap(((x12 & MASK12) << 22) + (x12 >> 9) + ((x13 & MASK13) << 7) + (x13 >> 24))
    y1 = _reduce(_wrap(_reduce(y1, M1) + x13), M1)
    z1 = _reduce(_wrap(((x21 & MASK2) << 15) + MULT2 * (x21 >> 16)), M2)
    y2 = _reduce(_wrap(((x23 & MASK2) << 15) + MULT2 * (x23 >> 16)), M2)
    y2 = _reduce(_wrap(_reduce(_wrap(y2 + x23), M2) + z1), M2)
    x[2], x[1], x[0] = x12, x11, y1
    x[5], x[4], x[3] = x22, x21, y2
    return _wrap(np.where(y1 <= y2, y1 - y2 + M1, y1 - y2))


def _step_valid(x: np.ndarray) -> np.ndarray:
    """:func:`_step` for states of the generator (components in ``[0, M)``): there Theano's
    shifts and conditional subtractions compute ``y1 = (2**22 x12 + 129 x13) mod M1`` and
    ``y2 = (2**15 x21 + 32769 x23) mod M2`` (each sum below ``2 M``, reduced once), and
    ``k = y1 - y2`` brought into ``[1, M1]``: the same values with a third of the work."""
    x11, x12, x13, x21, x22, x23 = x
    y1 = (x12 * 4194304 + x13 * 129) % M1
    y2 = (x21 * 32768 + x23 * 32769) % M2
    x[2], x[1], x[0] = x12, x11, y1
    x[5], x[4], x[3] = x22, x21, y2
    k = y1 - y2
    k -= 1
    k %= M1
    k += 1
    return k


def _to_float(k: np.ndarray, dtype: str) -> np.ndarray:
    """The samples of the step values ``k`` in ``dtype``, as Theano computes them."""
    if dtype == "float64":
        return k * NORM
    if dtype == "float32":
        return k.astype("float32") * NORM32
    return (((k & 0x7FFF) + 1) * NORM16).astype(dtype)


def _jump(x: np.ndarray, mats: tuple[Matrix, Matrix]) -> np.ndarray:
    """States ``x`` (int64 ``(6, lanes)``, valid) moved by the two components' matrices."""
    out = np.empty_like(x)
    for half, (mat, m) in enumerate(zip(mats, (M1, M2), strict=True)):
        part = x[3 * half : 3 * half + 3]
        for i in range(3):
            acc = (mat[i][0] * part[0]) % m + (mat[i][1] * part[1]) % m
            out[3 * half + i] = (acc + (mat[i][2] * part[2]) % m) % m
    return out


def _power(e: int) -> tuple[Matrix, Matrix]:
    """The matrices of ``e`` steps of each component."""
    return _matpow_mod(A1p0, e, M1), _matpow_mod(A2p0, e, M2)


def _square(mats: tuple[Matrix, Matrix]) -> tuple[Matrix, Matrix]:
    return _matmul_mod(mats[0], mats[0], M1), _matmul_mod(mats[1], mats[1], M2)


def _all_valid(x: np.ndarray) -> bool:
    """True if every state is a state of the generator (components in ``[0, M)``)."""
    return bool((x >= 0).all() and (x[:3] < M1).all() and (x[3:] < M2).all() and x.shape[1] > 0)


#: Steps per stream up to which each step runs over the streams side by side.
_PLAIN_STEPS = 64
#: Lanes the jump-ahead path aims for (streams x chunks per stream).
_LANES = 8192


def mrg_fill(rstate: np.ndarray, n_elements: int, dtype: str) -> np.ndarray:
    """Draw ``n_elements`` samples of ``dtype`` from the streams ``rstate`` (int32
    ``(n_streams, 6)``, advanced in place): element ``i`` from stream ``i % n_streams``.

    Every stream advances one step per element it gives, the loop running over streams
    side by side (NumPy int64 arithmetic, int32 wraparound emulated). When the streams
    are few and each gives many elements, each stream's run is cut into chunks whose start
    states are jumped to with the generator's matrices, and the chunks run side by side.
    """
    n = rstate.shape[0]
    out = np.empty(n_elements, dtype=dtype)
    if n_elements == 0:
        return out
    active = min(n, n_elements)
    steps = -(-n_elements // n)
    x = rstate[:active].T.astype("int64")
    valid = _all_valid(x)
    step = _step_valid if valid else _step
    if steps <= _PLAIN_STEPS or active >= _LANES or not valid:
        for t in range(steps):
            lanes = min(active, n_elements - t * n)
            part = x[:, :lanes]
            k = step(part)
            x[:, :lanes] = part
            out[t * n : t * n + lanes] = _to_float(k, dtype)
        rstate[:active] = x.T
        return out
    chunks = min(steps, -(-_LANES // active))
    length = -(-steps // chunks)
    chunks = -(-steps // length)
    # chunk j of stream s starts length * j steps in: double the chunks known so far
    starts = [x]
    have, mats = 1, _power(length)
    while have < chunks:
        starts.append(_jump(np.concatenate(starts, axis=1), mats))
        have *= 2
        mats = _square(mats)
    lanes_x = np.concatenate(starts, axis=1)[:, : chunks * active]
    lane = np.arange(chunks * active)
    base = (lane // active) * length * n + lane % active
    for t in range(length):
        k = _step_valid(lanes_x)
        idx = base + t * n
        valid = idx < n_elements
        out[idx[valid]] = _to_float(k[valid], dtype)
    # each stream ends after the steps it gave: n_elements // n, one more for the first ones
    full, extra = divmod(n_elements, n)
    final = x.copy()
    final[:, :extra] = _jump(x[:, :extra], _power(full + 1))
    final[:, extra:] = _jump(x[:, extra:], _power(full))
    rstate[:active] = final.T
    return out


def mrg_next_value(
    rstate: np.ndarray, new_rstate: np.ndarray, NORM: Any, mask: int, offset: int
) -> float:
    """One step of one stream (Theano's reference): write the next state of ``rstate`` (6
    int32) into ``new_rstate``, return ``((k & mask) + offset) * NORM``."""
    x = np.asarray(rstate, dtype="int64").reshape(6, 1).copy()
    k = int(_step(x)[0])
    new_rstate[...] = x[:, 0]
    return ((k & mask) + offset) * NORM


# -- the Op --------------------------------------------------------------------------------


class mrg_uniform_base(Op):  # Theano's name
    """The common part of MRG uniform Ops: ``(rstate, size) -> [new_rstate, sample]``.

    Parameters
    ----------
    output_type
        The TensorType of the sample (float16, float32 or float64).
    inplace
        Advance ``rstate`` itself (declared in ``destroy_map``) rather than a copy.
    """

    __props__ = ("output_type", "inplace")

    def __init__(self, output_type: TensorType, inplace: bool = False) -> None:
        if not isinstance(output_type, TensorType) or output_type.dtype not in (
            "float16",
            "float32",
            "float64",
        ):
            raise TypeError(
                f"{type(self).__name__}: output_type must be a float16, float32 or float64 "
                f"TensorType, got {output_type!r}"
            )
        self.output_type = output_type
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        mode = "inplace" if self.inplace else "no_inplace"
        return f"{type(self).__name__}{{{self.output_type},{mode}}}"

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [
            grad_undefined(self, k, inp, "No gradient defined through random sampling op")
            for k, inp in enumerate(inputs)
        ]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[Variable | None]:
        return [None for _ in eval_points]

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        """Never: folding would freeze one draw into the graph."""
        return False

    def checked_inputs(self, rstate: Variable, size: Any) -> tuple[Variable, list[bool]]:
        """Check that ``rstate`` (a variable already) holds int32 stream states; return
        ``size`` as an integer vector, checked against the sample's rank where its length is
        known, and the sample's broadcastable pattern (the entries known to be 1)."""
        if rstate.type.ndim != 2 or rstate.type.dtype != "int32":
            raise TypeError(
                f"{self}: rstate must be an int32 matrix of stream states (n_streams, 6), "
                f"got {rstate.type}"
            )
        size = size_vector(size)
        ndim = self.output_type.ndim
        length = get_vector_length(size) if _known_length(size) else None
        if length is not None and length != ndim:
            raise ValueError(
                f"{self}: size must have {ndim} entries (the sample's dimensions), got {length}"
            )
        return size, [s == 1 for s in _static_size(size, ndim)]

    @classmethod
    def new(cls, rstate: Any, ndim: int | None, dtype: str, size: Any) -> list[Variable]:
        """Build the node for a sample of ``dtype`` and ``size`` on ``rstate``; return
        ``[new_rstate, sample]`` (``ndim`` may be None when ``size``'s length is known)."""
        v_size = size_vector(size)
        if ndim is None:
            ndim = get_vector_length(v_size)
        op = cls(TensorType(dtype, (False,) * ndim))
        return op(rstate, v_size, return_list=True)


def _static_size(size: Variable, ndim: int) -> list[int | None]:
    """The entries of the size vector known before running (None where symbolic)."""
    if isinstance(size, Constant):
        return [int(s) for s in np.asarray(size.data).reshape(-1)[:ndim]]
    owner = size.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return [int(i.data) if isinstance(i, Constant) else None for i in owner.inputs]
    return [None] * ndim


class mrg_uniform(mrg_uniform_base):  # Theano's name
    """Uniform samples in ``(0, 1)`` from MRG31k3p streams (Theano's CPU ``mrg_uniform``).

    ``rstate`` is an int32 ``(n_streams, 6)`` matrix of stream states, ``size`` an integer
    vector with one entry per dimension of the sample. Element ``i`` of the sample (C order)
    is the next value of stream ``i % n_streams``; the new states are the first output.
    """

    def make_node(self, rstate: Any, size: Any) -> Apply:
        rstate = as_tensor_variable(rstate)
        size, bcast = self.checked_inputs(rstate, size)
        sample = TensorType(self.output_type.dtype, bcast)()
        return Apply(self, [rstate, size], [rstate.type(), sample])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        rstate, size = inputs
        shape = check_size_value(self, size, self.output_type.ndim)
        n_elements = math.prod(shape)
        if n_elements > M1:
            raise ValueError(f"{self}: rng_mrg does not support more than (2**31 - 1) samples")
        rstate = np.asarray(rstate)
        if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.dtype != np.int32:
            raise ValueError(
                f"{self}: rstate must be an int32 matrix of shape (n_streams, 6), got "
                f"{rstate.dtype} of shape {rstate.shape}"
            )
        if rstate.shape[0] == 0:
            raise ValueError(f"{self}: rstate has no stream (shape {rstate.shape})")
        if not self.inplace:
            rstate = rstate.copy()
        sample = mrg_fill(rstate, n_elements, self.output_type.dtype)
        output_storage[0][0] = rstate
        output_storage[1][0] = sample.reshape(shape)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        size = node.inputs[1]
        ndim = self.output_type.ndim
        return [input_shapes[0], tuple(size[i] for i in range(ndim))]


def _known_length(v: Variable) -> bool:
    try:
        get_vector_length(v)
    except (ValueError, TypeError):
        return False
    return True


def check_size_value(op: Any, size: Any, ndim: int) -> tuple[int, ...]:
    """The run-time ``size`` vector as a shape tuple, or ValueError naming ``size``."""
    shape = tuple(int(s) for s in np.asarray(size).reshape(-1))
    if len(shape) != ndim:
        raise ValueError(f"{op}: size must have length {ndim} (not {len(shape)}): {shape}")
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: size must not have negative entries, got {shape}")
    return shape


# -- the streams ---------------------------------------------------------------------------


def guess_n_streams(size: Any, warn: bool = False) -> int:
    """How many substreams a draw of ``size`` uses when ``nstreams`` is not given.

    Theano's rule: for a tuple or list of Python ints, the number of elements divided by 6
    (when above 6), at most ``60 * 256``; ``60 * 256`` for any other size (with a warning
    when ``warn``).
    """
    if isinstance(size, tuple | list) and all(isinstance(i, int) for i in size):
        r = 1
        for s in size:
            r *= s
        if r > 6:
            r = r // 6
        return min(r, 60 * 256)
    if warn:
        warnings.warn(
            f"MRG_RandomStreams Can't determine #streams from size ({size}), guessing 60*256",
            stacklevel=3,
        )
    return 60 * 256


#: Jump matrices ``(A**(2**72))**(2**j)`` for the doubling in ``get_substream_rstates``.
_SUBSTREAM_JUMPS: list[tuple[Matrix, Matrix]] = []


def _substream_jump(j: int) -> tuple[Matrix, Matrix]:
    while len(_SUBSTREAM_JUMPS) <= j:
        if not _SUBSTREAM_JUMPS:
            _SUBSTREAM_JUMPS.append(
                (
                    tuple(tuple(int(v) for v in row) for row in A1p72),
                    tuple(tuple(int(v) for v in row) for row in A2p72),
                )
            )
        else:
            _SUBSTREAM_JUMPS.append(_square(_SUBSTREAM_JUMPS[-1]))
    return _SUBSTREAM_JUMPS[j]


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _tag(v: Variable) -> Variable:
    """``v`` with its gradient cut, unless it is a constant (Theano's ``undefined_grad``)."""
    return v if isinstance(v, Constant) else disconnected_grad(v)


def _check_probability(name: str, value: Any) -> None:
    """ValueError if the known (non-symbolic) ``value`` has entries outside [0, 1]."""
    if isinstance(value, Variable):
        if not isinstance(value, Constant):
            return
        value = value.data
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric probabilities, got {arr.dtype}")
    if arr.size and not ((arr >= 0) & (arr <= 1)).all():
        raise ValueError(f"{name} must be probabilities in [0, 1], got {value!r}")


def _check_float_dtype(method: str, dtype: Any) -> str:
    if str(dtype) not in ("float16", "float32", "float64"):
        raise TypeError(
            f"MRG_RandomStreams.{method}: dtype must be 'float16', 'float32' or 'float64', "
            f"got {dtype!r}"
        )
    return str(dtype)


def _check_tuple_size(method: str, size: Any) -> None:
    """Theano's checks of a tuple or list size: ints (> 0) or symbolic scalars."""
    for s in size:
        if isinstance(s, Variable):
            if s.type.ndim != 0:
                raise TypeError(
                    f"MRG_RandomStreams.{method}: the entries of size must be scalars, got "
                    f"{s} of type {s.type} in size={size!r}"
                )
        elif not _is_int(s):
            raise TypeError(
                f"MRG_RandomStreams.{method}: size must be a tuple of ints or a symbolic "
                f"integer vector, got the entry {s!r} in size={size!r}"
            )
        elif s <= 0:
            raise ValueError(
                f"MRG_RandomStreams.{method}: the specified size contains a dimension with "
                f"value <= 0: size={size!r}"
            )


def _check_size(size: Any) -> Variable:
    """``normal``'s size (an int, a tuple or list, a scalar or vector) as an int64 vector."""
    if isinstance(size, Variable):
        if size.type.ndim == 1:
            return size_vector(size)
        if size.type.ndim == 0:
            return size_vector((size,))
        raise ValueError(f"MRG_RandomStreams.normal: a symbolic size must be a vector: {size}")
    if _is_int(size):
        size = (size,)
    if not isinstance(size, tuple | list):
        raise TypeError(
            f"MRG_RandomStreams.normal: size must be an int, a tuple or list of ints or a "
            f"symbolic vector, got {size!r}"
        )
    _check_tuple_size("normal", size)
    return size_vector(tuple(size))


class MRG_RandomStreams:  # Theano's name
    """Random variables from MRG31k3p streams, with Theano 1.0's numbers for a seed.

    Parameters
    ----------
    seed
        An int in ``[1, M2)`` (the state ``[seed] * 6``) or 6 ints: the first 3 below
        ``M1`` and not all 0, the last 3 below ``M2`` and not all 0.

    Attributes
    ----------
    rstate
        The int32 state from which the next random variable's streams start.
    state_updates
        ``(shared state, new state, size, nstreams)`` for every random variable so far.
    """

    def __init__(self, seed: int | Sequence[int] = 12345) -> None:
        self.state_updates: list[tuple[SharedVariable, Variable, Any, int | None]] = []
        self.default_instance_seed = seed
        self.set_rstate(seed)

    def updates(self) -> list[tuple[SharedVariable, Variable, Any, int | None]]:
        """The entries of :attr:`state_updates` (a copy of the list, as in Theano)."""
        return list(self.state_updates)

    def set_rstate(self, seed: int | Sequence[int]) -> None:
        """Make ``seed`` the state the next random variable starts from."""
        if _is_int(seed):
            seed = int(seed)  # type: ignore[arg-type]
            if seed == 0:
                raise ValueError("seed should not be 0", seed)
            if seed < 0:
                raise ValueError("seed should be positive", seed)
            if seed >= M2:
                raise ValueError(f"seed should be less than {M2}", seed)
            self.rstate = np.asarray([seed] * 6, dtype="int32")
            return
        if not isinstance(seed, Sequence | np.ndarray) or len(seed) != 6:
            raise TypeError("seed should be 1 integer or 6 integers", seed)
        vals = [int(s) for s in seed]
        if vals[:3] == [0, 0, 0]:
            raise ValueError("The first 3 values of seed should not be all 0", seed)
        if vals[3:] == [0, 0, 0]:
            raise ValueError("The last 3 values of seed should not be all 0", seed)
        if any(v < 0 for v in vals):
            raise ValueError("The values of seed should not be negative", seed)
        if any(v >= M1 for v in vals[:3]):
            raise ValueError(f"The first 3 values of seed should be less than {M1}", seed)
        if any(v >= M2 for v in vals[3:]):
            raise ValueError(f"The last 3 values of seed should be less than {M2}", seed)
        self.rstate = np.asarray(vals, dtype="int32")

    def seed(self, seed: int | Sequence[int] | None = None) -> None:
        """Restart every random variable made so far from ``seed`` (None: the
        constructor's), each getting the substreams it got when it was made."""
        if seed is None:
            seed = self.default_instance_seed
        self.set_rstate(seed)
        for old_r, new_r, size, nstreams in self.state_updates:
            if nstreams is None:
                nstreams = self.n_streams(size)
            rstates = self.get_substream_rstates(nstreams, new_r.owner.outputs[1].dtype)
            old_r.set_value(rstates, borrow=True)

    def inc_rstate(self) -> None:
        """Move :attr:`rstate` ``2**134`` steps forward, to the start of the next stream."""
        self.rstate = ff_2p134(self.rstate)

    def get_substream_rstates(self, n_streams: int, dtype: str, inc_rstate: bool = True) -> Any:
        """An int32 ``(n_streams, 6)`` matrix of states ``2**72`` steps apart, the first
        being :attr:`rstate`; then (``inc_rstate``) move to the next stream."""
        if not _is_int(n_streams) or n_streams <= 0:
            raise ValueError(f"n_streams must be a positive int, got {n_streams!r}")
        n_streams = int(n_streams)
        rows = np.asarray(self.rstate, dtype="int64").reshape(6, 1)
        j = 0
        while rows.shape[1] < n_streams:
            rows = np.concatenate([rows, _jump(rows, _substream_jump(j))], axis=1)
            j += 1
        if inc_rstate:
            self.inc_rstate()
        return np.ascontiguousarray(rows[:, :n_streams].T, dtype="int32")

    def n_streams(self, size: Any) -> int:
        """The substreams a draw of ``size`` uses by default (:func:`guess_n_streams`)."""
        return guess_n_streams(size)

    def pretty_return(
        self,
        node_rstate: SharedVariable,
        new_rstate: Variable,
        sample: Variable,
        size: Any,
        nstreams: int | None,
    ) -> Variable:
        """Record the draw's state update (its ``default_update`` too); return the sample."""
        sample.rstate = node_rstate  # type: ignore[attr-defined]
        sample.update = (node_rstate, new_rstate)  # type: ignore[attr-defined]
        self.state_updates.append((node_rstate, new_rstate, size, nstreams))
        node_rstate.default_update = new_rstate
        return sample

    def uniform(
        self,
        size: Any,
        low: Any = 0.0,
        high: Any = 1.0,
        ndim: int | None = None,
        dtype: str | None = None,
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """Samples of shape ``size``, uniform in ``(low, high)`` (both bounds excluded).

        ``size`` is a tuple of ints or symbolic scalars, or a symbolic integer vector (then
        give ``ndim`` if its length is not known). ``dtype`` defaults to the upcast of
        ``floatX``, ``low`` and ``high``. ``nstreams`` is the number of substreams
        (default :func:`guess_n_streams`). ``target`` places the generator's state, as
        Theano's did (``shared(rstates, target=...)``): ``target="cuda"`` with
        opgraph-backend-cuda keeps it on the GPU, so draws never copy it.
        """
        state_options = {"target": kwargs.pop("target")} if "target" in kwargs else {}
        if kwargs:
            raise TypeError(f"uniform() got unexpected keyword arguments {sorted(kwargs)}")
        low = as_tensor_variable(low)
        high = as_tensor_variable(high)
        if dtype is None:
            dtype = upcast(config.floatX, low.type.dtype, high.type.dtype)
        dtype = _check_float_dtype("uniform", dtype)
        low = _tag(cast(low, dtype))
        high = _tag(cast(high, dtype))
        if isinstance(size, tuple | list):
            _check_tuple_size("uniform", size)
            if ndim is not None and ndim != len(size):
                raise ValueError(f"uniform: ndim={ndim} does not match size={size!r}")
        elif not (
            isinstance(size, Variable)
            and size.type.ndim == 1
            and size.type.dtype[:3] in ("int", "uin")
        ):
            raise TypeError(
                "size must be a tuple of int or a symbolic integer vector, got "
                f"{size!r} of type {type(size).__name__}"
            )
        if nstreams is not None and (not _is_int(nstreams) or nstreams <= 0):
            raise ValueError(f"uniform: nstreams must be a positive int, got {nstreams!r}")
        orig_nstreams = nstreams
        if nstreams is None:
            nstreams = self.n_streams(size)
        rstates = self.get_substream_rstates(nstreams, dtype)
        node_rstate = shared(rstates, **state_options)
        new_rstate, u = mrg_uniform.new(node_rstate, ndim, dtype, size)
        u = self.pretty_return(node_rstate, new_rstate, u, size=size, nstreams=orig_nstreams)
        node_rstate.tag.is_rng = True
        r = u * (high - low) + low
        if u.type.broadcastable != r.type.broadcastable:
            raise ValueError(
                "uniform: low and high broadcast to more dimensions than size; increase size "
                "to match the broadcasting pattern of low and high"
            )
        return r

    def binomial(
        self,
        size: Any = None,
        n: int = 1,
        p: Any = 0.5,
        ndim: int | None = None,
        dtype: str = "int64",
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """Binomial counts of ``n`` trials of probability ``p``: ``cast(uniform < p)`` for
        ``n == 1`` (Theano's draw), the sum of ``n`` such trials otherwise."""
        _check_probability("binomial: p", p)
        if not _is_int(n) or n < 1:
            raise ValueError(f"binomial: n must be a positive int, got {n!r}")
        p = _tag(as_tensor_variable(p))
        if n == 1:
            x = self.uniform(size=size, nstreams=nstreams, ndim=ndim, **kwargs)
            return cast(x < p, dtype)
        if not isinstance(size, tuple | list):
            raise TypeError(f"binomial with n > 1 needs size as a tuple, got {size!r}")
        x = self.uniform(size=(int(n), *size), nstreams=nstreams, **kwargs)
        return cast((x < p).sum(axis=0, dtype="int64"), dtype)

    def multinomial(
        self,
        size: Any = None,
        n: Any = 1,
        pvals: Any = None,
        ndim: int | None = None,
        dtype: str = "int64",
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """Counts of ``n`` draws from each row of ``pvals`` (a matrix; a vector is one row).

        ``size`` and ``ndim`` must stay None (Theano's signature). The values of ``pvals``
        are not checked (rows summing below 1 leave some draws uncounted).
        """
        if pvals is None:
            raise TypeError("multinomial: you have to specify pvals")
        _check_probability("multinomial: pvals", pvals)
        pvals = _tag(as_tensor_variable(pvals))
        if size is not None:
            raise ValueError(
                "Provided a size argument to MRG_RandomStreams.multinomial, which does not "
                "use the size argument."
            )
        if ndim is not None:
            raise ValueError(
                "Provided an ndim argument to MRG_RandomStreams.multinomial, which does not "
                "use the ndim argument."
            )
        if pvals.type.ndim == 1:
            return self.multinomial(None, n, pvals[None, :], None, dtype, nstreams, **kwargs)[0]
        if pvals.type.ndim != 2:
            raise ValueError(f"multinomial: pvals must be a matrix or a vector, got {pvals.type}")
        unis = self.uniform(size=pvals[:, 0].shape * n, ndim=1, nstreams=nstreams, **kwargs)
        return MultinomialFromUniform(dtype)(pvals, unis, as_tensor_variable(n))

    def choice(
        self,
        size: Any = 1,
        a: Any = None,
        replace: bool = True,
        p: Any = None,
        ndim: int | None = None,
        dtype: str = "int64",
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """``size`` indices drawn from each row of the matrix ``p``: shape ``(rows, size)``.

        Without replacement (``replace=False``, what Theano 1.0 implemented) a drawn
        index's probability is zeroed and the row renormalised; with replacement the draws
        are independent. ``a`` must be None (indices run over ``p``'s columns).
        """
        if a is not None:
            raise TypeError(
                "For now, a has to be None in MRG_RandomStreams.choice. Sampled values are "
                "between 0 and p.shape[1]-1"
            )
        if p is None:
            raise TypeError("For now, p has to be specified in MRG_RandomStreams.choice.")
        _check_probability("choice: p", p)
        p = _tag(as_tensor_variable(p))
        if ndim is not None:
            raise ValueError("ndim argument to MRG_RandomStreams.choice is not used.")
        if p.type.ndim != 2:
            raise ValueError(f"choice: p must be a matrix (one row per draw), got {p.type}")
        if _is_int(size) and size < 0:
            raise ValueError(f"choice: size must be non-negative, got {size!r}")
        unis = self.uniform(size=p[:, 0].shape * size, ndim=1, nstreams=nstreams, **kwargs)
        op = ChoiceFromUniform(odtype=dtype, replace=replace)
        return op(p, unis, as_tensor_variable(size))

    def multinomial_wo_replacement(
        self,
        size: Any = None,
        n: Any = 1,
        pvals: Any = None,
        ndim: int | None = None,
        dtype: str = "int64",
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """Deprecated (as in Theano): ``choice(size=n, replace=False, p=pvals)``."""
        warnings.warn(
            "MRG_RandomStreams.multinomial_wo_replacement() is deprecated and will be removed "
            "in the next release of Theano. Please use MRG_RandomStreams.choice() instead.",
            stacklevel=2,
        )
        if size is not None:
            raise ValueError("multinomial_wo_replacement: size must be None (use n)")
        return self.choice(
            size=n,
            a=None,
            replace=False,
            p=pvals,
            ndim=ndim,
            dtype=dtype,
            nstreams=nstreams,
            **kwargs,
        )

    def normal(
        self,
        size: Any,
        avg: Any = 0.0,
        std: Any = 1.0,
        ndim: int | None = None,
        dtype: str | None = None,
        nstreams: int | None = None,
        truncate: bool = False,
        **kwargs: Any,
    ) -> Variable:
        """Normal samples of mean ``avg`` and standard deviation ``std`` (Box-Muller).

        An even number of uniforms is drawn (one more for an odd size): the first half
        gives the radii ``sqrt(-2 log u1)``, the second the angles ``2 pi u2``; the
        cosines fill the first half of the result and the sines the second. With
        ``truncate``, samples beyond 2 standard deviations are drawn again with a radius
        from a second uniform in ``(e**-2, 1)`` and the same angle.
        """
        size = _check_size(size)
        avg = _tag(as_tensor_variable(avg))
        std = _tag(as_tensor_variable(std))
        if dtype is None:
            dtype = upcast(config.floatX, avg.type.dtype, std.type.dtype)
        dtype = _check_float_dtype("normal", dtype)
        avg = cast(avg, dtype)
        std = cast(std, dtype)
        n_odd_samples = prod(size, dtype="int64")
        n_even_samples = n_odd_samples + n_odd_samples % 2
        uniform = self.uniform(
            (n_even_samples,),
            low=0.0,
            high=1.0,
            ndim=1,
            dtype=dtype,
            nstreams=nstreams,
            **kwargs,
        )
        u1 = uniform[: n_even_samples // 2]
        u2 = uniform[n_even_samples // 2 :]
        r = sqrt(-2.0 * log(u1))
        theta = constant(np.array(2.0 * np.pi, dtype=dtype)) * u2
        cos_theta, sin_theta = cos(theta), sin(theta)
        z0 = r * cos_theta
        z1 = r * sin_theta
        if truncate:
            to_fix0 = (z0 < -2.0) | (z0 > 2.0)
            to_fix1 = (z1 < -2.0) | (z1 > 2.0)
            z0_valid = z0[nonzero(~to_fix0)]
            z1_valid = z1[nonzero(~to_fix1)]
            fix0 = nonzero(to_fix0)[0]
            fix1 = nonzero(to_fix1)[0]
            n_fix_samples = fix0.size + fix1.size
            lower = constant(np.array(1.0 / np.e**2, dtype=dtype))
            u_fix = self.uniform(
                (n_fix_samples,),
                low=lower,
                high=1.0,
                ndim=1,
                dtype=dtype,
                nstreams=nstreams,
                **kwargs,
            )
            r_fix = sqrt(-2.0 * log(u_fix))
            z0_fixed = r_fix[: fix0.size] * cos_theta[fix0]
            z1_fixed = r_fix[fix0.size :] * sin_theta[fix1]
            norm_samples = join(0, z0_valid, z0_fixed, z1_valid, z1_fixed)
        else:
            norm_samples = join(0, z0, z1)
        samples = reshape(norm_samples[:n_odd_samples], size, ndim=ndim)
        return samples * std + avg

    def truncated_normal(
        self,
        size: Any,
        avg: Any = 0.0,
        std: Any = 1.0,
        ndim: int | None = None,
        dtype: str | None = None,
        nstreams: int | None = None,
        **kwargs: Any,
    ) -> Variable:
        """Normal samples truncated at 2 standard deviations, rescaled so that their
        standard deviation is ``std`` (:meth:`normal` with ``truncate=True``)."""
        # the standard deviation of a standard normal truncated to [-2, 2]
        std = std / constant(0.87962566103423978)
        return self.normal(
            size=size,
            avg=avg,
            std=std,
            truncate=True,
            ndim=ndim,
            dtype=dtype,
            nstreams=nstreams,
            **kwargs,
        )
