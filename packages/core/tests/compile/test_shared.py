"""Shared variables, updates (atomic), the aliasing rule, and Function.copy()."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from compile_toys import BadShape, Raise

import opgraph.tensor as T
from opgraph.compile import In, Out, function
from opgraph.compile.debugmode import InvalidValueError
from opgraph.compile.sharedvalue import SharedVariable, shared
from opgraph.graph.type import Generic
from opgraph.plugins import get_plugin_manager, hookimpl

# ---------------------------------------------------------------- SharedVariable


def test_shared_copies_unless_borrow_and_get_value_copies_unless_borrow() -> None:
    data = np.arange(3.0)
    s = shared(data, name="s")
    data[0] = 100.0
    assert s.get_value()[0] == 0.0
    b = shared(data, borrow=True)
    assert b.get_value(borrow=True) is data
    v = s.get_value()
    v[1] = 50.0
    assert s.get_value()[1] == 1.0
    assert s.get_value(borrow=True) is s.get_value(borrow=True)


def test_set_value_filters_and_keeps_the_old_value_on_error() -> None:
    s = shared(np.zeros((2, 2)), name="W")
    new = np.ones((3, 3))
    s.set_value(new)
    new[0, 0] = 9.0
    assert s.get_value()[0, 0] == 1.0
    s.set_value(new, borrow=True)
    assert s.get_value(borrow=True) is new
    with pytest.raises(TypeError) as info:
        s.set_value(np.zeros(3))
    assert "W" in str(info.value) and "was not changed" in str(info.value)
    assert s.get_value(borrow=True) is new
    f = shared(np.zeros(2, dtype="float32"), name="f32")
    with pytest.raises(TypeError, match="float32"):
        f.set_value(np.zeros(2))
    assert f.get_value().dtype == np.float32


def test_shared_dispatch_tensor_generic_and_unknown_foreign_types() -> None:
    t = shared(np.zeros(2))
    assert isinstance(t, SharedVariable) and str(t.type) == "TensorType(float64, vector)"
    g = shared({"a": 1})
    assert isinstance(g.type, Generic) and g.get_value() == {"a": 1}
    scipy_sparse = pytest.importorskip("scipy.sparse")
    if importlib.util.find_spec("opgraph_sparse") is None:
        with pytest.raises(TypeError, match=r"(?s)csr_matrix.*opgraph-sparse"):
            shared(scipy_sparse.csr_matrix(np.eye(2)))
    else:  # the plugin's constructor answers first
        assert str(shared(scipy_sparse.csr_matrix(np.eye(2))).type) == "Sparse[float64, csr]"
    with pytest.raises(TypeError, match="symbolic variable"):
        shared(T.dvector())
    assert shared(np.zeros((1, 3)), broadcastable=(True, False)).type.broadcastable == (True, False)


class _Special:
    """A value type only the test plugin below knows."""


class _SpecialPlugin:
    @hookimpl
    def opgraph_shared_constructor(self, value, name, strict, allow_downcast, borrow):  # type: ignore[no-untyped-def]
        if isinstance(value, _Special):
            return SharedVariable(name, Generic(), value, strict=strict)
        return None


def test_a_plugins_shared_constructor_is_asked_first() -> None:
    pm = get_plugin_manager()
    plugin = _SpecialPlugin()
    pm.register(plugin, name="test-special-shared")
    try:
        value = _Special()
        s = shared(value, name="sp", borrow=True)
        assert s.get_value(borrow=True) is value and s.name == "sp"
        assert str(shared(np.zeros(1)).type) == "TensorType(float64, vector)"
    finally:
        pm.unregister(name="test-special-shared")


def test_clone_shares_the_container() -> None:
    s = shared(np.zeros(2), name="s")
    c = s.clone()
    assert c.container is s.container and c is not s


# ---------------------------------------------------------------- updates


def test_updates_as_pairs_or_dict_are_applied_after_outputs() -> None:
    s = shared(np.float64(1.0), name="s")
    f = function([], s * 10, updates=[(s, s + 1)])
    assert f() == 10.0 and s.get_value() == 2.0
    g = function([], s, updates={s: s * 3})
    assert g() == 2.0 and s.get_value() == 6.0


def test_update_of_another_type_gives_theanos_message() -> None:
    W = shared(np.zeros((2, 2), dtype="float32"), name="W")
    with pytest.raises(TypeError) as info:
        function([], [], updates=[(W, W + np.float64(1.0) * T.dmatrix("m"))])
    msg = str(info.value)
    assert msg.startswith(
        "An update must have the same type as the original shared variable (shared_var=W, "
        "shared_var.type=TensorType(float32, matrix), update_val=Elemwise{add,no_inplace}.0, "
        "update_val.type=TensorType(float64, matrix))."
    )
    assert "HINT:" in msg and "unbroadcast" in msg


def test_update_targets_must_be_shared_and_unique() -> None:
    x = T.dvector("x")
    s = shared(np.zeros(2))
    with pytest.raises(TypeError, match="SharedVariable"):
        function([x], x, updates=[(x, x + 1)])
    with pytest.raises(ValueError, match="two update"):
        function([], s, updates=[(s, s + 1), (s, s + 2)])


def test_a_failing_node_leaves_every_shared_variable_unchanged() -> None:
    a = shared(np.zeros(2), name="a")
    b = shared(np.zeros(2), name="b")
    f = function([], a, updates=[(a, a + 1), (b, Raise("boom")(b + 1))])
    with pytest.raises(ValueError, match="boom"):
        f()
    np.testing.assert_array_equal(a.get_value(), [0, 0])
    np.testing.assert_array_equal(b.get_value(), [0, 0])


def test_an_update_value_failing_its_type_leaves_every_shared_variable_unchanged() -> None:
    a = shared(np.zeros(2), name="a")
    b = shared(np.zeros((1,)), name="b", broadcastable=(True,))
    # DEBUG_MODE reports the bad output of BadShape itself, before any update: see below.
    f = function([], [], updates=[(a, a + 1), (b, BadShape()(b))], mode="FAST_RUN")
    with pytest.raises(TypeError) as info:
        f()
    assert "shared variable b" in str(info.value) and "No shared variable was changed" in str(
        info.value
    )
    np.testing.assert_array_equal(a.get_value(), [0, 0])
    assert b.get_value().shape == (1,)
    checked = function([], [], updates=[(a, a + 1), (b, BadShape()(b))], mode="DEBUG_MODE")
    with pytest.raises(InvalidValueError, match="BadShape"):
        checked()
    np.testing.assert_array_equal(a.get_value(), [0, 0])
    assert b.get_value().shape == (1,)


def test_default_updates_and_no_default_updates() -> None:
    s = shared(np.float64(0.0), name="counter")
    s.default_update = s + 1
    f = function([], s * 1)
    f()
    f()
    assert s.get_value() == 2.0
    g = function([], s * 1, no_default_updates=True)
    g()
    assert s.get_value() == 2.0
    h = function([], s * 1, no_default_updates=[s])
    h()
    assert s.get_value() == 2.0


# ---------------------------------------------------------------- aliasing


def test_identity_function_returns_a_copy_of_its_input() -> None:
    x = T.dvector("x")
    f = function([x], x)
    a = np.arange(3.0)
    out = f(a)
    assert out is not a and not np.may_share_memory(out, a)
    assert "DeepCopyOp" in [str(n.op) for n in f.maker.fgraph.toposort()]


def test_borrow_on_both_sides_allows_aliasing() -> None:
    x = T.dvector("x")
    # (DEBUG_MODE copies every value it checks, so it never aliases: not that mode here.)
    f = function([In(x, borrow=True)], Out(x, borrow=True), mode="FAST_RUN")
    a = np.arange(3.0)
    assert np.may_share_memory(f(a), a)


def test_a_shared_output_is_a_copy_of_the_shared_value() -> None:
    s = shared(np.arange(3.0), name="s")
    f = function([], s)
    out = f()
    out[0] = 42.0
    assert s.get_value()[0] == 0.0


def test_outputs_listed_twice_are_distinct_arrays() -> None:
    x = T.dvector("x")
    y = x * 2
    a, b = function([x], [y, y])([1.0, 2.0])
    assert a is not b and not np.may_share_memory(a, b)
    a[0] = 7.0
    assert b[0] == 2.0


def test_constant_outputs_are_writable_copies() -> None:
    c = T.constant(np.ones(2))
    out = function([], c)()
    out[0] = 5.0
    np.testing.assert_array_equal(function([], c)(), [1.0, 1.0])


def test_update_values_never_alias_inputs_constants_or_outputs() -> None:
    x = T.dvector("x")
    s = shared(np.zeros(2), name="s")
    t = shared(np.zeros(2), name="t")
    a = np.ones(2)
    function([x], [], updates=[(s, x)])(a)
    a[0] = 5.0
    assert s.get_value()[0] == 1.0
    function([], [], updates=[(s, T.constant(np.full(2, 3.0)))])()
    s.get_value(borrow=True)[0] = 4.0  # the stored value is writable, the constant untouched
    y = x * 2
    out = function([x], y, updates=[(s, y), (t, y)])(a)
    assert not np.may_share_memory(out, s.get_value(borrow=True))
    assert not np.may_share_memory(s.get_value(borrow=True), t.get_value(borrow=True))


# ---------------------------------------------------------------- copy


def test_copy_keeps_sharing_shared_variables() -> None:
    s = shared(np.float64(0.0), name="s")
    inc = T.dscalar("inc")
    f = function([inc], s, updates=[(s, s + inc)])
    g = f.copy()
    f(1.0)
    g(10.0)
    assert s.get_value() == 11.0
    assert g.name == f"{f.name} copy"


def test_copy_with_swap_and_delete_updates() -> None:
    s = shared(np.float64(0.0), name="s")
    t = shared(np.float64(100.0), name="t")
    inc = T.dscalar("inc")
    f = function([inc], s + 0, updates=[(s, s + inc)])
    g = f.copy(swap={s: t}, name="g")
    assert g(1.0) == 100.0 and t.get_value() == 101.0 and s.get_value() == 0.0
    h = f.copy(delete_updates=True)
    h(5.0)
    assert s.get_value() == 0.0
    with pytest.raises(ValueError, match="not a shared variable"):
        f.copy(swap={shared(np.float64(1.0)): t})
    with pytest.raises(TypeError, match="same type"):
        f.copy(swap={s: shared(np.zeros(2))})


def test_copy_share_memory_shares_intermediate_storage() -> None:
    from opgraph.compile.mode import Mode

    x = T.dvector("x")
    f = function([x], (x * 2).sum(), mode=Mode("vm_nogc", "fast_run"))
    g = f.copy(share_memory=True)
    h = f.copy()
    inter = [v for v in f.fn.storage_map if v.owner is not None and v not in f.maker.fgraph.outputs]
    shared_cells = {id(f.fn.storage_map[v]) for v in inter}
    assert shared_cells and shared_cells <= {id(c) for c in g.fn.storage_map.values()}
    assert not shared_cells & {id(c) for c in h.fn.storage_map.values()}
    assert g([1.0, 2.0]) == 6.0
