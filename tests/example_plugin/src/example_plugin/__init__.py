"""An example third-party opgraph plugin: the package docs/plugin-guide.md walks through."""

from example_plugin.ops import Cube, cube

__all__ = ["Cube", "cube"]
