"""The module behind the ``opgraph`` entry point: hook implementations only, cheap to import.

``import opgraph`` imports this module (and the package, with its Op); the rewrites, the linker
and the C kernel are imported inside the hooks, when opgraph asks for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.plugins import hookimpl


@hookimpl
def opgraph_add_config(config: Any) -> None:
    """The plugin's flag, ``example__verbose``."""
    from opgraph.configparser import BoolParam

    config.add(
        "example__verbose",
        "Print which implementation the example plugin's C kernel entry picks for each node.",
        BoolParam(False),
    )


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """Install ``local_cube_of_cube`` into the canonicalize database."""
    from example_plugin.rewrites import rewrites

    rewrites.install(optdb)


@hookimpl
def opgraph_linkers() -> dict[str, Callable[[], Any]]:
    """The ``example`` linker."""

    def make_example_linker() -> Any:
        from example_plugin.linker import ExampleLinker

        return ExampleLinker()

    return {"example": make_example_linker}


@hookimpl
def opgraph_modes() -> dict[str, Callable[[], Any]]:
    """``EXAMPLE_FAST_RUN``: FAST_RUN's rewrites on the ``example`` linker."""

    def example_fast_run() -> Any:
        from opgraph.compile.mode import Mode

        return Mode(linker="example", optimizer="fast_run")

    return {"EXAMPLE_FAST_RUN": example_fast_run}


# Declared by opgraph-backend-c; optionalhook=True: harmless (never called, no warning) where
# backend-c is not installed.
@hookimpl(optionalhook=True)
def opgraph_c_kernels(registry: Any) -> None:
    """Cube's C kernel for the ``c`` linker."""
    from example_plugin.c_kernels import register

    register(registry)
