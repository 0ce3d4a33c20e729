"""Cross-package tests: they need opgraph-core and the example plugin installed (nox does it)."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("example_plugin") is None:
        skip = pytest.mark.skip(reason="the example plugin is not installed (run `nox -s tests`)")
        for item in items:
            if "example_plugin" in item.keywords or "needs_example_plugin" in item.keywords:
                item.add_marker(skip)
