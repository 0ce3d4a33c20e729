"""KernelRegistry: registration, MRO lookup, conflicts, coverage, fallback, use by the vm."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compile_toys import Counted, Double, DoubleSub, Noisy

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.mode import Mode
from opgraph.graph.op import Op
from opgraph.link.basic import VMLinker
from opgraph.link.dispatch import KernelFallbackWarning, KernelRegistry
from opgraph.plugins import PluginError


def double_kernel(op, node):  # type: ignore[no-untyped-def]
    return lambda x: x + x


def test_register_as_call_and_as_decorator() -> None:
    reg = KernelRegistry("toy")
    assert reg.register(Double, double_kernel, version=2) is double_kernel

    @reg.register(Counted)
    def counted_kernel(op, node):  # type: ignore[no-untyped-def]
        return lambda x: x

    assert reg.lookup(Double()).impl is double_kernel and reg.lookup(Double).version == 2
    assert reg.lookup(Counted).impl is counted_kernel
    assert Double() in reg and len(reg) == 2 and reg.lookup(Noisy) is None


def test_lookup_follows_the_mro() -> None:
    reg = KernelRegistry("toy")
    reg.register(Double, double_kernel)
    assert reg.lookup(DoubleSub).op_class is Double

    def sub_kernel(op, node):  # type: ignore[no-untyped-def]
        return lambda x: 2 * x

    reg.register(DoubleSub, sub_kernel)
    assert reg.lookup(DoubleSub).impl is sub_kernel
    assert reg.lookup(Double).impl is double_kernel


def test_conflicting_owners_raise_naming_both_unless_override() -> None:
    reg = KernelRegistry("c")
    reg.register(Double, double_kernel, owner="opgraph-sparse")

    def other(op, node):  # type: ignore[no-untyped-def]
        return lambda x: x * 2

    with pytest.raises(PluginError) as info:
        reg.register(Double, other, owner="my-sparse")
    msg = str(info.value)
    assert "opgraph-sparse and my-sparse both register a c kernel for Double" in msg
    assert "override=True" in msg
    reg.register(Double, other, owner="my-sparse", override=True)
    assert reg.lookup(Double).impl is other
    reg.register(Double, other, owner="my-sparse")  # the same entry again is fine


def test_register_needs_an_op_class() -> None:
    reg = KernelRegistry("toy")
    with pytest.raises(TypeError, match="not an instance"):
        reg.register(Double(), double_kernel)  # type: ignore[arg-type]


def test_missing_lists_uncovered_classes() -> None:
    reg = KernelRegistry("toy")
    reg.register(Double, double_kernel)
    assert reg.missing([Double, DoubleSub, Counted, Noisy]) == [Counted, Noisy]


def test_vm_uses_kernels_and_warns_once_on_fallback() -> None:
    reg = KernelRegistry("toy")
    calls = []

    def kernel(op, node):  # type: ignore[no-untyped-def]
        def compute(x):  # type: ignore[no-untyped-def]
            calls.append(1)
            return 2 * x

        return compute

    reg.register(Double, kernel)
    x = T.dvector("x")
    mode = Mode(VMLinker(kernels=reg), "fast_run")
    with pytest.warns(KernelFallbackWarning, match="no kernel for Counted") as record:
        f = function([x], Counted()(Double()(x)), mode=mode)
    assert len([w for w in record if issubclass(w.category, KernelFallbackWarning)]) == 1
    np.testing.assert_array_equal(f([1.0, 2.0]), [2.0, 4.0])
    assert calls == [1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        function([x], Counted()(x), mode=Mode(VMLinker(kernels=reg), "fast_run"))


def test_register_perform_covers_the_op_without_warning_or_mark() -> None:
    """An Op the backend runs ``perform`` for on purpose: covered, listed with its reason,
    no warning, no [py-fallback] mark; a kernel for a subclass still wins there."""
    reg = KernelRegistry("toy")
    reg.register_perform(Double, "  one NumPy call already  ", owner="toy-backend")
    assert reg.missing([Double, DoubleSub, Counted]) == [Counted]
    assert reg.perform_reasons() == {Double: "one NumPy call already"}
    assert reg.lookup(DoubleSub).owner == "toy-backend"
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        f = function([x], Double()(x), mode=Mode(VMLinker(kernels=reg), None), profile=True)
    np.testing.assert_array_equal(f([1.0, 2.0]), [2.0, 4.0])
    assert not f.profile.py_fallback
    reg.register(DoubleSub, double_kernel, owner="toy-backend")
    assert reg.perform_reasons() == {Double: "one NumPy call already"}
    assert reg.lookup(DoubleSub).impl is double_kernel


def test_register_perform_needs_a_reason() -> None:
    reg = KernelRegistry("toy")
    with pytest.raises(ValueError, match="register_perform\\(Double\\) needs a reason"):
        reg.register_perform(Double, " ", owner="toy-backend")


class TwoOut(Op):
    """(x + 1, x - 1)."""

    __props__ = ()

    def make_node(self, x):  # type: ignore[no-untyped-def]
        from opgraph.graph.basic import Apply

        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type(), x.type()])

    def perform(self, node, inputs, out):  # type: ignore[no-untyped-def]
        out[0][0], out[1][0] = inputs[0] + 1, inputs[0] - 1


def test_multi_output_kernels_return_a_sequence() -> None:
    reg = KernelRegistry("toy")
    reg.register(TwoOut, lambda op, node: lambda x: (x + 10, x - 10))
    x = T.dvector("x")
    a, b = TwoOut()(x)
    f = function([x], [a, b], mode=Mode(VMLinker(kernels=reg), None))
    out = f([0.0])
    assert out[0][0] == 10.0 and out[1][0] == -10.0
