"""Random number generation: generator Types, their shared variables, and ``RandomFunction``.

A random state is an ordinary value of the graph: a ``numpy.random.RandomState``
(:class:`RandomStateType`, what Theano's ``RandomStreams`` uses) or a
``numpy.random.Generator`` (:class:`RandomGeneratorType`). A :class:`RandomFunction` node
takes a state, a size and the distribution's parameters; it draws from a *copy* of the
state (never mutating its input, unless built with ``inplace=True``, declared in
``destroy_map``) and returns ``[new_state, sample]``. A shared state whose
``default_update`` is the node's new state advances at every call of a function using
it: that is how ``RandomStreams`` works.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import grad_undefined
from opgraph.graph.op import Op, OutputStorage
from opgraph.graph.type import Type
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.math import cast
from opgraph.tensor.shape import make_vector, vector_elements
from opgraph.tensor.type import TensorType, describe_value

__all__ = [
    "RandomFunction",
    "RandomGeneratorType",
    "RandomStateType",
    "random_generator_type",
    "random_state_type",
]


def _states_equal(a: Any, b: Any) -> bool:
    """Compare two bit-generator states (nested dicts/tuples holding arrays)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_states_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_states_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


class _RandomType(Type):
    """Common part of the two generator Types: filtering, comparison, printing."""

    __props__ = ()
    value_class: type = object
    hint = ""

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``data`` if it is a generator of this Type's class, else raise TypeError."""
        if isinstance(data, self.value_class):
            return data
        raise TypeError(
            f"{self} expects a numpy.random.{self.value_class.__name__}, got "
            f"{describe_value(data)}.\nHINT: {self.hint}"
        )

    def is_valid_value(self, data: Any) -> bool:
        return isinstance(data, self.value_class)

    def values_eq(self, a: Any, b: Any) -> bool:
        """True if both generators are in the same state (they will draw the same numbers)."""
        return _states_equal(self.get_state(a), self.get_state(b))

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return self.values_eq(a, b)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return a is b

    def get_shape_info(self, obj: Any) -> Any:
        return None

    def get_state(self, value: Any) -> Any:
        """The comparable state of a generator value."""
        raise TypeError(f"{self} has no state accessor")

    def __str__(self) -> str:
        return type(self).__name__


class RandomStateType(_RandomType):
    """The Type of ``numpy.random.RandomState`` values (Theano's ``RandomStateType``)."""

    value_class = np.random.RandomState
    hint = "build one with numpy.random.RandomState(seed)."

    def get_state(self, value: Any) -> Any:
        return value.get_state(legacy=False)


class RandomGeneratorType(_RandomType):
    """The Type of ``numpy.random.Generator`` values (``numpy.random.default_rng(seed)``)."""

    value_class = np.random.Generator
    hint = "build one with numpy.random.default_rng(seed)."

    def get_state(self, value: Any) -> Any:
        return value.bit_generator.state


random_state_type = RandomStateType()
random_generator_type = RandomGeneratorType()


# -- draws ----------------------------------------------------------------------------------
# Each takes (generator, *parameter values, size) and returns the sample; ``size`` is None
# when the shape comes from broadcasting the parameters.


def _is_generator(r: Any) -> bool:
    return isinstance(r, np.random.Generator)


def _integers(r: Any, low: Any, high: Any, size: Any, endpoint: bool) -> Any:
    low, high = np.asarray(low, dtype="int64"), np.asarray(high, dtype="int64")
    if _is_generator(r):
        return r.integers(low, high, size=size, endpoint=endpoint)
    return r.randint(low, high + 1 if endpoint else high, size=size)


def random_integers_helper(r: Any, low: Any, high: Any, size: Any) -> Any:
    """Integers uniformly in ``[low, high]`` (both ends included, Theano's semantics)."""
    return _integers(r, low, high, size, endpoint=True)


def integers_helper(r: Any, low: Any, high: Any, size: Any) -> Any:
    """Integers uniformly in ``[low, high)`` (NumPy Generator's semantics)."""
    return _integers(r, low, high, size, endpoint=False)


def choice_helper(r: Any, a: Any, replace: Any, p: Any, size: Any) -> Any:
    """``r.choice(a, size, replace, p)``; an empty ``p`` means uniform probabilities."""
    if np.ndim(a) > 1:
        raise ValueError(f"choice: a must be a scalar or a vector, got {np.ndim(a)} dimensions")
    if np.ndim(p) != 1:
        raise ValueError(f"choice: p must be a vector, got {np.ndim(p)} dimensions")
    probs = None if np.size(p) == 0 else p
    a = a.item() if np.ndim(a) == 0 else a
    return r.choice(a, size=size, replace=bool(replace), p=probs)


def permutation_helper(r: Any, n: Any, size: Any) -> Any:
    """One permutation of ``range(n)`` for each index of ``size`` (stacked on a last axis)."""
    n = int(n)
    shape = () if size is None else tuple(size)
    out = np.empty((*shape, n), dtype="int64")
    for idx in np.ndindex(*shape):
        out[idx] = r.permutation(n)
    return out


def multinomial_helper(r: Any, n: Any, pvals: Any, size: Any) -> Any:
    """Multinomial counts; ``n`` and ``pvals[..., :]`` broadcast against ``size``."""
    n, pvals = np.asarray(n), np.asarray(pvals, dtype="float64")
    if pvals.ndim < 1:
        raise ValueError("multinomial: pvals must have at least one dimension")
    batch = np.broadcast_shapes(n.shape, pvals.shape[:-1])
    shape = batch if size is None else tuple(size)
    n_b = np.broadcast_to(n, shape)
    p_b = np.broadcast_to(pvals, (*shape, pvals.shape[-1]))
    out = np.empty((*shape, pvals.shape[-1]), dtype="int64")
    for idx in np.ndindex(*shape):
        pv = p_b[idx]
        total = pv.sum()
        if 1.0 < total < 1.0 + 1e-5:  # rounding pushed the sum just over 1
            pv = pv * (1.0 - 5e-5)
        out[idx] = r.multinomial(int(n_b[idx]), pv)
    return out


def _method(name: str) -> Callable[..., Any]:
    def draw(r: Any, *args: Any) -> Any:
        *params, size = args
        return getattr(r, name)(*params, size=size)

    draw.__name__ = name
    return draw


#: Draw functions by the name ``RandomFunction`` prints.
DRAWS: dict[str, Callable[..., Any]] = {
    "uniform": _method("uniform"),
    "normal": _method("normal"),
    "binomial": _method("binomial"),
    "poisson": _method("poisson"),
    "random_integers_helper": random_integers_helper,
    "integers_helper": integers_helper,
    "choice_helper": choice_helper,
    "permutation_helper": permutation_helper,
    "multinomial_helper": multinomial_helper,
}


class RandomFunction(Op):
    """Draw from a distribution: ``(state, size, *params) -> [new_state, sample]``.

    Printed ``RandomFunction{uniform}`` (Theano's name). The sample has ``outtype``;
    ``size`` is an integer vector (empty: the shape comes from broadcasting the
    parameters), and ``ndim_added`` dimensions follow it (1 for ``permutation`` and
    ``multinomial``). Random nodes are never constant-folded.

    Parameters
    ----------
    fn
        The name of a draw in :data:`DRAWS` (``'uniform'``, ``'normal'``, ...), or a function
        ``fn(generator, *params, size)``.
    outtype
        The TensorType of the sample.
    inplace
        Advance the input state itself (declared in ``destroy_map``) rather than a copy.
    ndim_added
        Dimensions the draw adds after those of ``size``.
    """

    __props__ = ("fn", "outtype", "inplace", "ndim_added")

    def __init__(
        self,
        fn: str | Callable[..., Any],
        outtype: TensorType,
        inplace: bool = False,
        ndim_added: int = 0,
    ) -> None:
        if isinstance(fn, str) and fn not in DRAWS:
            raise ValueError(f"unknown random draw {fn!r}; known draws are {sorted(DRAWS)}")
        if not isinstance(outtype, TensorType):
            raise TypeError(f"RandomFunction: outtype must be a TensorType, got {outtype!r}")
        self.fn = fn
        self.exec_fn = DRAWS[fn] if isinstance(fn, str) else fn
        self.outtype = outtype
        self.inplace = bool(inplace)
        self.ndim_added = int(ndim_added)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"RandomFunction{{{getattr(self.exec_fn, '__name__', self.fn)}}}"

    def make_node(self, r: Any, shape: Any, *args: Any) -> Apply:
        if not isinstance(r, Variable) or not isinstance(r.type, _RandomType):
            raise TypeError(
                f"{self} needs a symbolic random state as first input, got "
                f"{getattr(r, 'type', None) or describe_value(r)}.\nHINT: wrap the generator "
                "in a shared variable: opgraph.shared(numpy.random.RandomState(seed))."
            )
        shape = size_vector(shape)
        params = [as_tensor_variable(a) for a in args]
        return Apply(self, [r, shape, *params], [r.type(), self.outtype()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        r, shape, args = inputs[0], inputs[1], inputs[2:]
        size = None if len(shape) == 0 else tuple(int(s) for s in shape)
        ndim = self.outtype.ndim
        if size is not None and ndim != len(size) + self.ndim_added:
            raise ValueError(
                f"{self}: the size {size} has {len(size)} dimension(s), but the sample's type "
                f"{self.outtype} has {ndim} (of which {self.ndim_added} added by the draw)"
            )
        if not self.inplace:
            r = copy.deepcopy(r)
        sample = np.asarray(self.exec_fn(r, *args, size), dtype=self.outtype.dtype)
        try:
            sample = self.outtype.filter(sample, strict=True)
        except TypeError as exc:
            shapes = [np.shape(a) for a in args]
            raise ValueError(
                f"{self} drew a sample of shape {sample.shape} (parameter shapes {shapes}), "
                f"which does not fit its type: {exc}\nHINT: pass size= with one entry per "
                "dimension, or ndim= when the size is symbolic."
            ) from exc
        output_storage[0][0] = r
        output_storage[1][0] = sample

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        """Never: folding would freeze one draw into the graph."""
        return False

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [
            grad_undefined(self, k, inp, "there is no gradient through a random draw")
            for k, inp in enumerate(inputs)
        ]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        shp = node.inputs[1]
        params, param_shapes = node.inputs[2:], input_shapes[2:]
        ndim = node.outputs[1].type.ndim
        automatic = isinstance(shp, Constant) and np.size(shp.data) == 0
        added: list[Any] = []
        if self.ndim_added:
            added = _added_dims(self.exec_fn, params, param_shapes)
        if not automatic:
            n = ndim - self.ndim_added
            size = vector_elements(shp, n)
            return [None, (*size, *added)]
        if self.exec_fn is choice_helper:
            return [None, ()]
        if self.exec_fn is permutation_helper:
            return [None, tuple(added)]
        batch_params = params
        batch_shapes = list(param_shapes)
        if self.exec_fn is multinomial_helper:
            batch_shapes[1] = tuple(param_shapes[1][:-1])
            batch_params = [params[0], _Dropped(params[1])]
        batch = _broadcast_shape(batch_params, batch_shapes, ndim - self.ndim_added)
        return [None, (*batch, *added)]


class _Dropped:
    """Stands for a parameter whose last dimension is not part of the batch shape."""

    def __init__(self, var: Variable) -> None:
        self.broadcastable = var.type.broadcastable[:-1]


def _added_dims(fn: Any, params: Sequence[Variable], shapes: Sequence[Any]) -> list[Any]:
    if fn is permutation_helper:
        return [cast(params[0], "int64")]
    return [shapes[1][-1]]


def _broadcast_shape(params: Sequence[Any], shapes: Sequence[Any], ndim: int) -> list[Any]:
    """The symbolic shape of broadcasting ``params`` (non-broadcastable dims win)."""
    out: list[Any] = []
    for d in range(ndim):
        dim: Any = 1
        for p, shp in zip(params, shapes, strict=True):
            bcast = p.broadcastable if isinstance(p, _Dropped) else p.type.broadcastable
            k = len(bcast) - ndim + d
            if k >= 0 and not bcast[k]:
                dim = shp[k]
                break
        out.append(dim)
    return out


def size_vector(size: Any) -> Variable:
    """``size`` as an int64 vector: a tuple of ints and scalars, or an integer vector."""
    if size is None:
        return constant(np.zeros(0, dtype="int64"))
    if isinstance(size, list | tuple):
        if not any(isinstance(s, Variable) for s in size):
            return constant(np.asarray(size, dtype="int64").reshape(len(size)))
        return stack_scalars(size)
    v = as_tensor_variable(size)
    if v.type.ndim != 1 or v.type.dtype[:3] not in ("int", "uin"):
        raise TypeError(
            f"the size of a random draw must be an integer vector or a tuple of ints, got "
            f"{v} of type {v.type}"
        )
    return cast(v, "int64")


def stack_scalars(items: Sequence[Any]) -> Variable:
    """An int64 vector (``MakeVector{dtype='int64'}``) of the scalars ``items``."""
    scalars = [
        cast(as_tensor_variable(s), "int64")
        if isinstance(s, Variable)
        else constant(np.int64(int(s)))
        for s in items
    ]
    for s in scalars:
        if s.type.ndim != 0:
            raise TypeError(f"each entry of a random size must be a scalar, got {s.type}")
    return make_vector(*scalars, dtype="int64")
