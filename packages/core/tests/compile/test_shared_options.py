"""``shared(value, **options)``: keyword extras reach the plugins whose
``opgraph_shared_constructor`` takes ``options``, and core's tensor constructor."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opgraph.compile.sharedvalue import SharedVariable, shared
from opgraph.graph.type import Generic
from opgraph.plugins import get_plugin_manager, hookimpl


class _Tagged:
    """A value type only the test plugins know."""


class _WithOptions:
    seen: list[dict[str, Any]] = []

    @hookimpl
    def opgraph_shared_constructor(self, value, name, borrow, options):  # type: ignore[no-untyped-def]
        if not isinstance(value, _Tagged) or set(options) - {"colour"}:
            return None
        self.seen.append(dict(options))
        var = SharedVariable(name, Generic(), value, strict=False)
        var.tag.colour = options.get("colour")
        return var


class _Blind:
    """Takes no ``options``: never asked when ``shared`` is given extras."""

    calls = 0

    @hookimpl(tryfirst=True)
    def opgraph_shared_constructor(self, value, name, borrow):  # type: ignore[no-untyped-def]
        _Blind.calls += 1
        return None


@pytest.fixture
def plugins() -> Any:
    pm = get_plugin_manager()
    pm.register(_WithOptions(), name="test-shared-options")
    pm.register(_Blind(), name="test-shared-blind")
    _WithOptions.seen.clear()
    _Blind.calls = 0
    try:
        yield
    finally:
        pm.unregister(name="test-shared-options")
        pm.unregister(name="test-shared-blind")


@pytest.mark.usefixtures("plugins")
def test_options_reach_the_plugins_that_take_them() -> None:
    var = shared(_Tagged(), name="t", colour="red")
    assert var.tag.colour == "red" and _WithOptions.seen == [{"colour": "red"}]
    assert _Blind.calls == 0
    plain = shared(_Tagged())
    assert plain.tag.colour is None and _Blind.calls == 1 and _WithOptions.seen[-1] == {}


@pytest.mark.usefixtures("plugins")
def test_options_nobody_takes_name_them() -> None:
    row = shared(np.zeros((1, 3)), broadcastable=(True, False))  # core's tensor constructor
    assert row.type.broadcastable == (True, False)
    with pytest.raises(TypeError, match="flavour"):
        shared(_Tagged(), flavour="mint")
