"""The precompiled thunk for ``mrg_uniform`` (``MRG_RandomStreams``, core's
``opgraph.sandbox.rng_mrg``).

``mrg_uniform`` float32 and float64 samples get :class:`opgraph_c._rng_mrg.MRGUniformThunk`
(nothing generated or compiled): MRG31k3p in C, bit-identical to ``perform`` and Theano's
C code. float16 samples run ``perform`` on purpose (Theano's C code did not do them either;
their rounding goes through float64).

The multinomial Ops that turn its uniforms into categories (``opgraph.sandbox.multinomial``)
run ``perform`` on purpose: their reason is in :mod:`opgraph_c.kernels.perform`.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.sandbox.rng_mrg import mrg_uniform, mrg_uniform_base
from opgraph.tensor.type import TensorType
from opgraph_c.spec import PERFORM, Precompiled

__all__ = ["RNG_MRG_VERSION", "mrg_uniform_c", "register"]

#: Bump when the thunk's behaviour changes.
RNG_MRG_VERSION = 1
#: Sample dtypes with a C loop (``_rng_mrg.MRGUniformThunk``).
C_DTYPES = ("float32", "float64")
#: Most sample dimensions the thunk handles (``_rng_mrg.MAXDIMS``).
MAX_DIMS = 32


def register(registry: Any, owner: str) -> None:
    """Register the ``mrg_uniform`` thunk."""
    registry.register(mrg_uniform_base, mrg_uniform_c, version=RNG_MRG_VERSION, owner=owner)


def mrg_uniform_c(op: mrg_uniform_base, node: Apply) -> Precompiled | Any:
    """The MRG31k3p draw in C for float32/float64 samples; ``perform`` for float16."""
    sample_type = node.outputs[1].type
    if not isinstance(op, mrg_uniform) or not isinstance(sample_type, TensorType):
        return None
    if sample_type.dtype not in C_DTYPES or sample_type.ndim > MAX_DIMS:
        return PERFORM

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _rng_mrg

        return _rng_mrg.MRGUniformThunk(node, in_cells, out_cells)

    return Precompiled(f"{op} {sample_type.dtype}", make_thunk)
