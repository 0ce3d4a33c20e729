"""The module behind this package's ``opgraph`` entry point: hook implementations only.

Everything heavier (the Ops, scipy.sparse, the rewrites, the C kernels) is imported inside
the hooks, when opgraph asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opgraph.plugins import hookimpl


def _is_sparse(value: Any) -> bool:
    """True for a scipy.sparse matrix, without importing scipy.sparse when it is not loaded
    (a value cannot be one then)."""
    module = type(value).__module__
    return module.startswith("scipy.sparse") and hasattr(value, "tocsr")


@hookimpl
def opgraph_namespaces() -> Mapping[str, str]:
    """``opgraph.sparse`` is this package's library (Theano's ``theano.sparse``)."""
    return {"opgraph.sparse": "opgraph_sparse.api"}


@hookimpl
def opgraph_shared_constructor(
    value: Any, name: str | None, strict: bool, allow_downcast: bool | None, borrow: bool
) -> Any | None:
    """``opgraph.shared(scipy_matrix)``: a sparse shared variable."""
    if not _is_sparse(value):
        return None
    import opgraph_sparse.api  # noqa: F401  (the variable classes register on SparseType)
    from opgraph_sparse.sharedvar import sparse_constructor

    return sparse_constructor(
        value, name=name, strict=strict, allow_downcast=allow_downcast, borrow=borrow
    )


@hookimpl
def opgraph_as_variable(value: Any, name: str | None) -> Any | None:
    """A scipy.sparse matrix given where a variable is expected becomes a sparse constant."""
    if not _is_sparse(value):
        return None
    import opgraph_sparse.api  # noqa: F401  (the variable classes register on SparseType)
    from opgraph_sparse.basic import constant

    return constant(value, name=name)


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """Install the package's rewrites (``opgraph_sparse.rewrites.rewrites``)."""
    from opgraph_sparse.rewrites import load_rewrites

    load_rewrites().install(optdb)


# Declared by opgraph-backend-c; optionalhook: never called (and no warning) without it, and
# then every sparse Op runs its perform.
@hookimpl(optionalhook=True)
def opgraph_c_kernels(registry: Any) -> None:
    """C kernels for the hot sparse Ops (structured dot, usmm, mul_s_d, ...)."""
    from opgraph_sparse.kernels import register_kernels

    register_kernels(registry)
