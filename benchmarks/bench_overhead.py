"""W1: per-call overhead of a compiled ``f(x) = x + 1`` on a float64 scalar, against NumPy.

The reference is the NumPy expression ``x + 1`` called directly on the same 0-d array.
``py`` runs every node's ``perform`` through the Python VM; ``vm`` is core's VM linker;
``trust_input`` skips argument conversion; ``f.fn()`` calls the VM alone (inputs already
stored), which is what a backend with a faster VM would replace. The two "framework only"
rows compile the identity with borrowing (one trivial ViewOp node), so they measure
``Function.__call__`` + the VM + one thunk without the cost of ``Elemwise.perform``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

TITLE = "W1 overhead: f(x) = x + 1, float64 scalar"


def cases() -> list[tuple[str, Callable[[], Any]]]:
    """``(label, zero-argument callable)`` pairs; the first is the NumPy reference."""
    import opgraph
    import opgraph.tensor as T

    x = T.dscalar("x")
    value = np.array(1.5)
    one = np.float64(1.0)

    def compiled(linker: str, trust: bool = False) -> Any:
        f = opgraph.function([x], x + 1, mode=opgraph.Mode(linker=linker, optimizer="fast_run"))
        f.trust_input = trust
        assert f(value) == 2.5
        return f

    f_py, f_vm = compiled("py"), compiled("vm")
    f_py_trust, f_vm_trust = compiled("py", True), compiled("vm", True)
    f_vm.input_storage[0].storage[0] = value
    fn = f_vm.fn
    fn_cell = f_vm.input_storage[0].storage

    def vm_only() -> None:
        fn_cell[0] = value
        fn()

    # The framework alone: one trivial node (ViewOp), so the time is Function + VM + thunk.
    ident = opgraph.function(
        [opgraph.In(x, borrow=True)], opgraph.Out(x, borrow=True), mode=opgraph.Mode("vm", None)
    )
    ident_trust = opgraph.function(
        [opgraph.In(x, borrow=True)], opgraph.Out(x, borrow=True), mode=opgraph.Mode("vm", None)
    )
    ident_trust.trust_input = True

    return [
        ("numpy: x + 1", lambda: value + one),
        ("py linker", lambda: f_py(value)),
        ("vm linker", lambda: f_vm(value)),
        ("py linker, trust_input", lambda: f_py_trust(value)),
        ("vm linker, trust_input", lambda: f_vm_trust(value)),
        ("vm: f.fn() alone", vm_only),
        ("framework only: identity (ViewOp), vm", lambda: ident(value)),
        ("framework only: identity, trust_input", lambda: ident_trust(value)),
    ]
