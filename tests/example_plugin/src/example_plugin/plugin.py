"""The module behind the ``opgraph`` entry point: hook implementations only, cheap to import."""

from __future__ import annotations

from typing import Any

from opgraph.plugins import hookimpl


@hookimpl
def opgraph_linkers() -> dict[str, Any]:
    """The ``example`` linker."""

    def make_example_linker() -> Any:
        from example_plugin.linker import ExampleLinker

        return ExampleLinker()

    return {"example": make_example_linker}


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """Install ``local_cube_of_neg`` into the canonicalize database."""
    from example_plugin.rewrites import rewrites

    rewrites.install(optdb)


@hookimpl
def opgraph_add_config(config: Any) -> None:
    """A flag of the plugin's own, to show that plugins declare flags."""
    from opgraph.configparser import BoolParam

    config.add("example__verbose", "Print what the example plugin does.", BoolParam(False))
