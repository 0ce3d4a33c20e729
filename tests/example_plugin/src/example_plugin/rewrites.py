"""The plugin's rewrite, declared on a RewriteSet and installed by the plugin's hook."""

from __future__ import annotations

from typing import Any

from example_plugin.ops import Cube
from opgraph.rewriting import RewriteSet, node_rewriter

# Records (database, tags, position) for each rewrite decorated below; registers nothing until
# the hook calls rewrites.install(optdb).
rewrites = RewriteSet("opgraph-example-plugin")


# canonicalize adds the tags fast_run and fast_compile; "example" lets users leave out every
# rewrite of this plugin at once (Mode.excluding("example")).
@rewrites.canonicalize("example")
@node_rewriter([Cube])
def local_cube_of_cube(fgraph: Any, node: Any) -> list[Any] | None:
    """``cube(cube(x)) -> x ** 9``: one power instead of two cubes."""
    (inner,) = node.inputs
    if inner.owner is None or not isinstance(inner.owner.op, Cube):
        return None  # not this pattern: leave the node alone
    (x,) = inner.owner.inputs
    return [x**9]  # one replacement per output of ``node``; never edit the graph here
