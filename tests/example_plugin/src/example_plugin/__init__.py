"""An example third-party opgraph plugin, written only against opgraph's public API."""

from example_plugin.ops import Cube, cube

__all__ = ["Cube", "cube"]
