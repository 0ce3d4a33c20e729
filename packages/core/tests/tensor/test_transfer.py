"""``tensor.transfer`` and ``tensor.basic.register_transfer`` (Theano 1.0's names)."""

from __future__ import annotations

from typing import Any

import pytest

import opgraph.tensor as T
from opgraph.plugins import get_plugin_manager, hookimpl
from opgraph.tensor import basic


def test_cpu_is_a_host_tensor() -> None:
    x = T.dmatrix("x")
    assert T.transfer(x, "cpu") is x
    assert T.transfer([1.0, 2.0], "cpu").type == T.dvector
    assert T.transfer is basic.transfer and T.register_transfer is basic.register_transfer
    assert x.transfer("cpu") is x  # Theano's method on variables


def test_registered_functions_then_plugins_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(basic, "_TRANSFERS", [])
    seen: list[Any] = []

    def to_double(var: Any, target: Any) -> Any:
        seen.append(target)
        return T.cast(var, "float64") if target == "double" else None

    assert basic.register_transfer(to_double) is to_double
    basic.register_transfer(to_double)  # once is enough
    x = T.fvector("x")
    assert T.transfer(x, "double").type == T.dvector

    class Plugin:
        @hookimpl
        def opgraph_transfer(self, var: Any, target: Any) -> Any:
            return T.cast(var, "int32") if target == "int-land" else None

    pm = get_plugin_manager()
    pm.register(Plugin(), name="test-transfer-target")
    try:
        assert T.transfer(x, "int-land").type == T.ivector
    finally:
        pm.unregister(name="test-transfer-target")
    assert seen == ["double", "int-land"]


def test_no_taker_is_a_value_error_naming_the_gpu_package() -> None:
    with pytest.raises(ValueError, match=r"(?s)target 'nowhere'.*opgraph-backend-cuda"):
        T.transfer(T.fvector(), "nowhere")
