"""Theano's ``theano.d3viz``: interactive HTML pictures of graphs, served by opgraph's
self-contained HTML view (:func:`opgraph.printing.html_view`)."""

from __future__ import annotations

from opgraph.d3viz.d3viz import d3viz, d3write
from opgraph.d3viz.formatting import PyDotFormatter

__all__ = ["PyDotFormatter", "d3viz", "d3write"]
