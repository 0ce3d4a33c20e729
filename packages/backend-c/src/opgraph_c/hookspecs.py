"""The hook opgraph-backend-c declares: how any package supplies C kernels for its own Ops.

Declared through core's ``opgraph_addhooks`` when backend-c is installed. A package that may
run without backend-c marks its implementation ``@hookimpl(optionalhook=True)``, so it
still loads when the hook is not declared::

    @hookimpl(optionalhook=True)
    def opgraph_c_kernels(registry):
        from my_ops.c_kernels import fancy_c  # imported only when the C backend asks

        registry.register(FancyOp, fancy_c, version=1)
"""

from __future__ import annotations

from typing import Any

from opgraph.plugins import hookspec


@hookspec(historic=True)
def opgraph_c_kernels(registry: Any) -> None:
    """Register C kernels for your Ops into backend-c's kernel registry.

    Called once, when the ``c`` linker first needs its registry (historic: a plugin
    registered later is called when it registers). Call ``registry.register(OpClass,
    impl, version=1)``; bump ``version`` whenever the generated code changes, since it
    keys the compile cache.

    ``impl(op, node)`` returns an :class:`opgraph_c.CModule` (the Cython source of a
    module, compiled and cached by backend-c, and how to make the node's thunk from it),
    or None when it has no C code for that particular node (its Op's ``perform`` runs).
    With ``CModule(name, source)`` alone, the module defines ``compute(*inputs)``
    returning the output value (a tuple of them for several outputs).

    The registry also carries the kernel author's toolkit (``registry.CModule``,
    ``registry.PERFORM``, ``registry.team_options``, ...: see
    :class:`opgraph_c.registry.CKernelRegistry`), so a package that must not depend on
    backend-c builds its kernels without importing ``opgraph_c``.

    Parameters
    ----------
    registry
        backend-c's :class:`~opgraph_c.registry.CKernelRegistry` (backend ``"c"``).
    """
