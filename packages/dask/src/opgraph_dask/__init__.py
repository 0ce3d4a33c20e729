"""opgraph-dask: the same compiled graphs on dask.array and dask.distributed.

``import opgraph`` imports only :mod:`opgraph_dask.plugin` (hooks, cheap); dask itself loads
when a function is compiled with ``linker="dask"`` (``mode="DASK"``).
"""
