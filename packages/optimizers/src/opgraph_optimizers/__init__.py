"""opgraph's rewrite library, installed into core's rewrite databases by the plugin hook."""

__version__ = "0.1.0"
