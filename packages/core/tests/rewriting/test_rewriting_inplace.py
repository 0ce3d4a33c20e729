"""``opgraph.rewriting.register_inplace``: the extension point for a plugin's in-place Ops."""

from __future__ import annotations

from typing import Any

import opgraph.tensor as T
from opgraph.graph.basic import Apply
from opgraph.graph.destroyhandler import DestroyHandler
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.rewriting import RewriteSet, in2out, inplace_rewriter, make_optdb, register_inplace


class _Double(Op):
    """``2 * x``; with ``inplace`` it overwrites x."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        self.destroy_map = {0: [0]} if inplace else {}

    def make_node(self, x: Any) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Any, out: Any) -> None:
        (x,) = inputs
        if not self.inplace:
            x = x.copy()
        x *= 2
        out[0][0] = x


def _make_inplace(node: Apply) -> Op | None:
    return None if node.op.inplace else _Double(True)


def test_a_plugins_set_declares_and_installs_an_inplace_version() -> None:
    own = RewriteSet("my-plugin")
    rw = register_inplace(
        "local_inplace_double", [_Double], _make_inplace, "toy", position=30, rewrite_set=own
    )
    assert rw.location.endswith("test_rewriting_inplace.py:" + rw.location.rsplit(":", 1)[1])
    optdb = make_optdb()
    own.install(optdb)
    assert "local_inplace_double" in optdb["inplace"]
    x = T.vector("x")
    fg = FunctionGraph([x], [_Double()(T.exp(x)), _Double()(x)])
    in2out(rw).rewrite(fg)
    first, second = (o.owner.op for o in fg.outputs)
    assert first.inplace and not second.inplace  # x is the user's input
    assert isinstance(fg.destroy_handler, DestroyHandler)
    direct = inplace_rewriter("local_inplace_double2", [_Double], lambda node: _Double(True))
    assert direct.name == "local_inplace_double2"
