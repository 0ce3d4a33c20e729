"""opgraph's testing kit, shipped for plugin authors: the checks our own tests use.

``verify_grad`` (finite differences), dtype-aware ``assert_allclose``, ``check_infer_shape``,
``check_modes`` (one graph compiled in every mode and linker, compared with a reference)
and the pytest plugin with the ``mode`` and ``rng`` fixtures.
"""

from opgraph.gradient import verify_grad
from opgraph.testing.checks import (
    ALL_MODES,
    assert_allclose,
    check_infer_shape,
    check_modes,
    installed_linkers,
    tolerance,
)

__all__ = [
    "ALL_MODES",
    "assert_allclose",
    "check_infer_shape",
    "check_modes",
    "installed_linkers",
    "tolerance",
    "verify_grad",
]
