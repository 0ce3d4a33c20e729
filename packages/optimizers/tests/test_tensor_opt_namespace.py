"""``opgraph.tensor.opt``: Theano's ``tensor.opt`` names, served lazily by opgraph-optimizers."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
import opgraph.tensor.math as tm
from opgraph.rewriting import node_rewriter
from opgraph.rewriting.optdb import get_optdb
from opgraph.scalar import basic as ps
from opgraph.tensor.elemwise import Elemwise

NAMES = [
    "Canonizer",
    "FusionOptimizer",
    "InplaceElemwiseOptimizer",
    "MakeVector",
    "ShapeFeature",
    "ShapeOptimizer",
    "encompasses_broadcastable",
    "get_clients",
    "get_clients2",
    "inplace_elemwise_optimizer",
    "is_an_upcast",
    "local_add_canonizer",
    "local_add_mul_fusion",
    "local_elemwise_fusion",
    "local_mul_canonizer",
    "local_reshape_chain",
    "make_vector",
    "register_canonicalize",
    "register_specialize",
    "register_specialize_device",
    "register_stabilize",
    "register_uncanonicalize",
    "register_useless",
]


def test_namespace_resolves_to_the_plugin():
    import opgraph.tensor.opt as opt

    assert opt.__name__ == "opgraph_optimizers.tensor_opt"
    assert T.opt is opt
    for name in NAMES:
        assert getattr(opt, name) is not None, name
    assert opt.encompasses_broadcastable((True, False), (False,))
    assert not opt.encompasses_broadcastable((True,), (False,))
    assert opt.is_an_upcast("int32", "float64") and not opt.is_an_upcast("float64", "int32")


@pytest.mark.parametrize("module", ["opgraph.tensor.opt", "opgraph.scan_module.scan_opt"])
def test_missing_plugin_names_the_package(module):
    """Both namespaces of this package, imported without it: the error names it."""
    env = dict(os.environ, OPGRAPH_DISABLE_PLUGIN_AUTOLOAD="1", OPGRAPH_PLUGINS="")
    code = f"import {module}"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    assert "ModuleNotFoundError" in proc.stderr and "opgraph-optimizers" in proc.stderr


@node_rewriter([Elemwise])
def local_test_exp_to_cosh(fgraph, node):
    """Test rewrite: ``exp(x) -> cosh(x)`` (wrong on purpose, so that its effect shows)."""
    if isinstance(node.op.scalar_op, ps.Exp):
        return [tm.cosh(node.inputs[0])]
    return None


@pytest.mark.parametrize(
    ("register", "stage"),
    [
        ("register_canonicalize", "canonicalize"),
        ("register_specialize", "specialize"),
        ("register_stabilize", "stabilize"),
        ("register_uncanonicalize", "uncanonicalize"),
    ],
)
def test_register_decorators_reach_fast_run(register, stage):
    from opgraph.tensor import opt

    x = T.dvector()
    xv = np.array([0.0, 1.0])
    getattr(opt, register)(local_test_exp_to_cosh)
    try:
        assert local_test_exp_to_cosh.name in get_optdb()[stage]
        out = opgraph.function([x], T.exp(x), mode="FAST_RUN")(xv)
        np.testing.assert_allclose(out, np.cosh(xv))
    finally:
        get_optdb()[stage].unregister(local_test_exp_to_cosh.name)
    np.testing.assert_allclose(opgraph.function([x], T.exp(x))(xv), np.exp(xv))


def test_register_with_tags_as_decorator_and_useless():
    from opgraph.tensor import opt

    deco = opt.register_canonicalize("my_tag")
    assert deco(local_test_exp_to_cosh) is local_test_exp_to_cosh
    db = get_optdb()["canonicalize"]
    try:
        assert "my_tag" in db.entry(local_test_exp_to_cosh.name).tags
    finally:
        db.unregister(local_test_exp_to_cosh.name)
    opt.register_useless(local_test_exp_to_cosh)
    try:
        assert local_test_exp_to_cosh.name in get_optdb()["canonicalize"]
        assert local_test_exp_to_cosh.name + "_specialize" in get_optdb()["specialize"]
    finally:
        get_optdb()["canonicalize"].unregister(local_test_exp_to_cosh.name)
        get_optdb()["specialize"].unregister(local_test_exp_to_cosh.name + "_specialize")
