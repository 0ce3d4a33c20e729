"""The loop names Theano 1.0 programs import resolve under ``import opgraph as theano``."""

import importlib

import pytest

import opgraph

NAMES = (
    "scan",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "scan_checkpoints",
    "OpFromGraph",
    "OrderedUpdates",
    "compile.builders.OpFromGraph",
    "scan_module.scan",
    "scan_module.until",
    "scan_module.clone",
    "scan_module.map",
    "scan_module.reduce",
    "scan_module.foldl",
    "scan_module.foldr",
    "scan_module.scan_checkpoints",
    "scan_module.scan_op.Scan",
    "scan_module.scan_utils.until",
    "scan_module.scan_utils.clone",
    "scan_module.scan_views.map",
    "updates.OrderedUpdates",
)


@pytest.mark.parametrize("path", NAMES)
def test_name_resolves(path):
    obj = opgraph
    parts = path.split(".")
    for k, part in enumerate(parts):
        if not hasattr(obj, part):
            obj = importlib.import_module("opgraph." + ".".join(parts[: k + 1]))
        else:
            obj = getattr(obj, part)
    assert obj is not None


def test_views_are_the_scan_module_functions():
    assert opgraph.map is opgraph.scan_module.map
    assert opgraph.scan is opgraph.scan_module.scan
    assert opgraph.OpFromGraph is opgraph.compile.builders.OpFromGraph
