"""The module behind this package's ``opgraph`` entry point: hook implementations only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opgraph.plugins import hookimpl


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """Install every rewrite of opgraph-optimizers into core's stage databases."""
    from opgraph_optimizers.registry import load_rewrite_modules

    load_rewrite_modules().install(optdb)


@hookimpl
def opgraph_namespaces() -> Mapping[str, str]:
    """``opgraph.tensor.opt`` and ``opgraph.scan_module.scan_opt`` (Theano's
    ``theano.tensor.opt`` and ``theano.scan_module.scan_opt`` names) are this package's."""
    return {
        "opgraph.tensor.opt": "opgraph_optimizers.tensor_opt",
        "opgraph.scan_module.scan_opt": "opgraph_optimizers.scan_opt",
    }
