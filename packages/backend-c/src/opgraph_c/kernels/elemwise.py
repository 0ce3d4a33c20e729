"""C kernels for ``opgraph.tensor.elemwise``: Elemwise and fused Composite loops."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.tensor.elemwise import Elemwise
from opgraph_c.codegen.elemwise import assemble, elemwise_part, vector_tail
from opgraph_c.spec import PERFORM, CModule

__all__ = ["ELEMWISE_VERSION", "elemwise_c", "register"]

#: Bump when the generated code changes (it keys the compile cache).
ELEMWISE_VERSION = 2
#: Limits of the precompiled driver (opgraph_c._elemwise): beyond them, perform runs.
MAX_OPERANDS = 32
MAX_DIMS = 32
#: 0-d Elemwise nodes on these dtypes (shape arithmetic) run perform: no module to compile.
_INDEX_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _flag(name: str, default: Any) -> Any:
    from opgraph.configdefaults import config

    return getattr(config, name) if name in config else default


def register(registry: Any, owner: str) -> None:
    """Register the Elemwise kernel (DimShuffle's view thunk is in kernels/structure.py)."""
    registry.register(Elemwise, elemwise_c, version=ELEMWISE_VERSION, owner=owner)


def elemwise_c(op: Elemwise, node: Apply) -> Any:
    """The generated module of an Elemwise node, or None if its scalar op has no C code."""
    nops = len(node.inputs) + len(node.outputs)
    ndim = node.outputs[0].type.ndim
    if not node.inputs or nops > MAX_OPERANDS or ndim > MAX_DIMS:
        return None
    if ndim == 0 and all(v.type.dtype in _INDEX_DTYPES for v in node.inputs + node.outputs):
        # Shape and index arithmetic (n_steps, slice bounds): a few µs once per call in
        # perform, where a generated module would cost a compile (about a second cold).
        return PERFORM
    hoisted = tuple(all(v.type.broadcastable) for v in node.inputs)
    openmp = bool(_flag("openmp", False)) and ndim > 0
    part = elemwise_part(op, node, hoisted, openmp)
    if part is None:
        return None
    dtypes = ", ".join(v.type.dtype for v in node.inputs)
    # Arithmetic alone is bound by memory: its big outputs are streamed (see _elemwise). A
    # loop calling vector math functions is bound by them, and ran 10-15% slower streamed.
    stream = not vector_tail(part.c_code)
    return CModule(
        name=f"{op} ({dtypes})",
        source=assemble([part], [""]),
        make_thunk=_thunk_factory(op, hoisted, stream),
        openmp=openmp,
        part=part,
    )


def _thunk_factory(op: Elemwise, hoisted: tuple[bool, ...], stream: bool) -> Any:
    def make_thunk(
        module: Any, node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]
    ) -> Any:
        from opgraph_c._elemwise import ElemwiseThunk
        from opgraph_c._threads import team_options

        return ElemwiseThunk(
            module,
            module.ELEMWISE_KERNEL,
            node,
            in_cells,
            out_cells,
            [v.type.dtype for v in node.inputs],
            [v.type.dtype for v in node.outputs],
            [v.type.broadcastable for v in node.inputs],
            hoisted,
            dict(op.inplace_pattern),
            stream=stream,
            **team_options("elemwise"),
        )

    return make_thunk
