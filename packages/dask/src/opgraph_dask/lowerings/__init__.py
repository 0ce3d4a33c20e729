"""opgraph-dask's lowerings of core's Ops, one module per family; each module's
``register(table)`` is called by :func:`opgraph_dask.lowering.get_table`."""
