"""``PyDotFormatter``: a graph as a Graphviz object (Theano's ``d3viz.formatting``).

Theano's formatter returned a ``pydot.Dot``. opgraph draws with the ``graphviz`` Python
package instead of ``pydot`` (which it does not depend on), so the object returned is a
``graphviz.Digraph`` built like :func:`opgraph.printing.pydotprint`'s drawing (same nodes,
colours and edge labels). What code did with the pydot object has a Digraph counterpart:
``graph.create_dot()`` -> ``graph.source``; ``graph.write_dot(path)`` -> ``graph.save(path)``;
``graph.create_png()`` -> ``graph.pipe(format="png")``.
"""

from __future__ import annotations

from typing import Any

from opgraph.printing.pydot import collect_graph, to_digraph

__all__ = ["PyDotFormatter"]


class PyDotFormatter:
    """Build the Graphviz graph of a compiled function, FunctionGraph, Variable(s) or Apply.

    Parameters
    ----------
    compact
        If True, unnamed intermediate variables are not drawn as boxes (their type labels
        the edge instead).

    Attributes
    ----------
    node_colors, apply_colors, shapes
        Theano's colour and shape tables (inputs, outputs, Op families); ``apply_colors``
        is passed to the drawing as its ``colorCodes``.
    """

    def __init__(self, compact: bool = True) -> None:
        self.compact = compact
        self.node_colors = {
            "input": "limegreen",
            "constant_input": "SpringGreen",
            "shared_input": "YellowGreen",
            "output": "dodgerblue",
            "unused": "lightgrey",
        }
        self.apply_colors = {
            "GpuFromHost": "red",
            "HostFromGpu": "red",
            "Scan": "yellow",
            "Shape": "cyan",
            "IfElse": "magenta",
            "Elemwise": "#FFAABB",  # dark pink
            "Subtensor": "#FFAAFF",  # purple
            "Alloc": "#FFAA22",  # orange
        }
        self.shapes = {"input": "box", "output": "box", "apply": "ellipse"}

    def __call__(self, fct: Any, graph: Any = None) -> Any:
        """Return the ``graphviz.Digraph`` of ``fct``; with ``graph`` (a Digraph), add the
        nodes and edges to it and return it.

        Raises ImportError naming the package when ``graphviz`` is not installed.
        """
        model = collect_graph(
            fct, compact=self.compact, colorCodes=self.apply_colors, inner_graphs=True
        )
        digraph = to_digraph(model)
        if graph is None:
            return digraph
        graph.body.extend(digraph.body)
        return graph
