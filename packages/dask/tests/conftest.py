"""Fixtures for opgraph-dask's tests: one small distributed cluster per test session.

The cluster (2 worker processes, 1 thread and 1 GB each) starts the first time a test asks
for ``client`` and closes at the end of the session. Its Client is *not* the global
default: it is the current client only inside the tests that request ``client``, so the
other tests keep dask's local scheduler (and its callbacks) whatever order they run in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from opgraph.compile.mode import Mode


@pytest.fixture(scope="session")
def dask_cluster_client() -> Iterator[Any]:
    """The session's ``distributed.Client`` on a ``LocalCluster`` (not made the default)."""
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit="1GB",
        dashboard_address=":0",
    )
    client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture
def client(dask_cluster_client: Any) -> Iterator[Any]:
    """The session's cluster Client, current (what ``dask.compute`` uses) for this test.

    Made current with ``Client.as_current()`` only: putting the Client in dask's config
    (``scheduler=client``) would break worker restarts, since a nanny ships the config to
    the new worker process and a Client cannot be pickled.
    """
    with dask_cluster_client.as_current():
        yield dask_cluster_client


@pytest.fixture
def py_mode() -> Mode:
    """The reference: every node runs its ``perform`` (NumPy) after FAST_RUN's rewrites."""
    return Mode(linker="py", optimizer="fast_run")


@pytest.fixture
def dask_mode() -> Mode:
    """The ``dask`` linker after FAST_RUN's rewrites (what ``mode="DASK"`` gives)."""
    return Mode(linker="dask", optimizer="fast_run")
