"""``d3viz``: an interactive HTML page of a graph (Theano's ``theano.d3viz.d3viz``).

Theano's page loaded d3.js and dagre-d3 from a ``d3viz/`` folder copied beside it. opgraph
serves the same call with its self-contained HTML view (:func:`opgraph.printing.html_view`):
one file with the graph as inline SVG, pan and zoom, and a tooltip per node (Op, type, shape,
the line that built it), which opens offline and has no dependencies to copy. Like Theano's,
it needs Graphviz (the ``graphviz`` Python package and the ``dot`` program) to lay the graph
out.
"""

from __future__ import annotations

import os
from typing import Any

from opgraph.d3viz.formatting import PyDotFormatter
from opgraph.printing.html import html_view

__all__ = ["d3viz", "d3write"]


def d3viz(
    fct: Any, outfile: str | os.PathLike[str], copy_deps: bool = True, *args: Any, **kwargs: Any
) -> None:
    """Write an interactive HTML page of ``fct``'s graph to ``outfile``.

    Parameters
    ----------
    fct
        A compiled function, a FunctionGraph, a Variable, an Apply or a list of Variables.
    outfile
        The HTML file to write (its folder is created if needed).
    copy_deps
        Accepted for Theano's signature: the page embeds everything it needs, so there are no
        JavaScript or CSS files to copy either way.
    *args, **kwargs
        Passed to :class:`PyDotFormatter` as in Theano (``compact``).

    Input nodes are green, outputs blue, Apply nodes ellipses coloured by Op family; an edge
    into a view is blue, into a destroyed input red (the drawing of ``pydotprint``).
    """
    formatter = PyDotFormatter(*args, **kwargs)
    html_view(fct, outfile, compact=formatter.compact)


def d3write(fct: Any, path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> None:
    """Write the graph of ``fct`` as a Graphviz DOT file (Theano's ``d3write``).

    Extra arguments are passed to :class:`PyDotFormatter`. Needs the ``graphviz`` Python
    package, not the ``dot`` program.
    """
    graph = PyDotFormatter(*args, **kwargs)(fct)
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(graph.source)
