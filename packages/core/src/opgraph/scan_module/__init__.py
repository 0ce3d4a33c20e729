"""Theano's symbolic loop: ``scan`` and its views (``map``, ``reduce``, ``foldl``,
``foldr``), ``until``, ``scan_checkpoints`` and the ``Scan`` Op.

``opgraph.scan_module.scan`` is the function (as in Theano); the submodules are
``scan_op``, ``scan_utils``, ``scan_views``, ``scan_grad`` and ``scan_checkpoints``.
``scan_opt`` (Theano's scan rewrites by their names) is opgraph-optimizers', resolved on
first use.
"""

from typing import Any

from opgraph.plugins.namespaces import module_getattr
from opgraph.scan_module import scan_grad, scan_op, scan_utils, scan_views
from opgraph.scan_module.scan import scan
from opgraph.scan_module.scan_checkpoints import scan_checkpoints
from opgraph.scan_module.scan_op import Scan
from opgraph.scan_module.scan_utils import ScanInfo, clone, until
from opgraph.scan_module.scan_views import foldl, foldr, map, reduce

__all__ = [
    "Scan",
    "ScanInfo",
    "clone",
    "foldl",
    "foldr",
    "map",
    "reduce",
    "scan",
    "scan_checkpoints",
    "scan_grad",
    "scan_op",
    "scan_utils",
    "scan_views",
    "until",
]


def __getattr__(name: str) -> Any:
    """Resolve plugin-owned namespaces under ``opgraph.scan_module`` lazily
    (``opgraph.scan_module.scan_opt``, from opgraph-optimizers)."""
    return module_getattr(name, "opgraph.scan_module")
