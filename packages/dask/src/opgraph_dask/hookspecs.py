"""The hook through which any package lowers its own Ops to dask.array.

A plugin implements it like backend-c's ``opgraph_c_kernels``::

    @hookimpl(optionalhook=True)
    def opgraph_dask_lowerings(table):
        from my_ops.dask_lowering import lower_fancy  # imported only when dask is used

        table.register(FancyOp, lower_fancy)
"""

from __future__ import annotations

from typing import Any

from opgraph.plugins import hookspec


@hookspec(historic=True)
def opgraph_dask_lowerings(table: Any) -> None:
    """Register how your Ops run on dask arrays into opgraph-dask's lowering table.

    Called once, when the ``dask`` linker first needs its table. Call
    ``table.register(OpClass, lower)``, where ``lower(node, inputs)`` receives the node and
    its input values (dask arrays, or NumPy values for small and constant inputs) and
    returns the list of its output values (see :mod:`opgraph_dask.lowering`).

    Parameters
    ----------
    table
        opgraph-dask's :class:`~opgraph_dask.lowering.LoweringTable`.
    """
