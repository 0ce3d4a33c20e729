"""How function() is told about its inputs and outputs: ``In`` and ``Out`` (Theano's API)."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Constant, Variable
from opgraph.link.basic import Container

__all__ = ["In", "Out", "SymbolicInput", "SymbolicOutput"]


class SymbolicInput:
    """An input of a compiled function and how it is fed.

    Parameters
    ----------
    variable
        The graph variable this input gives a value to.
    name
        The keyword under which the value may be passed (default: the variable's name).
    update
        A variable whose value replaces this input's stored value after each call (the
        input then needs a default ``value``, which holds the state).
    mutable
        The function may overwrite the value passed (in-place rewrites may use it).
    strict
        The value must already have the exact type (no conversion).
    allow_downcast
        Allow lossy conversions of the value (float64 to float32); None follows the Type's
        rule for Python numbers.
    implicit
        The input is not a positional argument (shared variables).
    borrow
        An output may alias this input's value (no copy is made).
    """

    def __init__(
        self,
        variable: Variable,
        name: str | None = None,
        update: Variable | None = None,
        mutable: bool = False,
        strict: bool = False,
        allow_downcast: bool | None = None,
        autoname: bool = True,
        implicit: bool = False,
        borrow: bool = False,
    ) -> None:
        if not isinstance(variable, Variable):
            raise TypeError(
                f"In/SymbolicInput needs a Variable, got {variable!r} ({type(variable).__name__})"
            )
        if isinstance(variable, Constant):
            raise TypeError(
                f"{variable} is a Constant and cannot be a function input: its value is "
                "already known.\nHINT: remove it from the inputs list."
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"input name must be a string, got {name!r}")
        self.variable = variable
        self.name = variable.name if (autoname and name is None) else name
        self.update = update
        self.mutable = bool(mutable)
        self.strict = bool(strict)
        self.allow_downcast = allow_downcast
        self.implicit = bool(implicit)
        self.borrow = bool(borrow)
        if update is not None and not isinstance(update, Variable):
            raise TypeError(f"the update of input {self.name!r} must be a Variable, got {update!r}")

    def __str__(self) -> str:
        text = f"In({self.variable}"
        if self.update is not None:
            text += f" <- {self.update}"
        return text + ")"

    def __repr__(self) -> str:
        return str(self)


class In(SymbolicInput):
    """An input of ``function()`` with options (Theano's ``In``).

    ``In(x, value=1.0)`` gives ``x`` a default; ``In(acc, value=0.0, update=acc + x)``
    keeps state between calls; ``In(x, borrow=True)`` lets outputs alias the argument;
    ``In(x, mutable=True)`` lets the function overwrite it.

    Parameters
    ----------
    variable
        The graph variable.
    name
        Keyword name (default: the variable's name).
    value
        Default value used when the argument is not passed (a shared variable's Container
        makes the input read and write that container).
    update
        Expression computing the input's next stored value (needs ``value``).
    mutable, strict, allow_downcast, autoname, implicit, borrow
        See :class:`SymbolicInput`. ``mutable`` defaults to True when there is an update;
        ``borrow`` defaults to ``mutable`` (a mutable input is also borrowed).
    """

    def __init__(
        self,
        variable: Variable,
        name: str | None = None,
        value: Any = None,
        update: Variable | None = None,
        mutable: bool | None = None,
        strict: bool = False,
        allow_downcast: bool | None = None,
        autoname: bool = True,
        implicit: bool | None = None,
        borrow: bool | None = None,
        shared: bool = False,
    ) -> None:
        if mutable is None:
            mutable = update is not None
        if borrow is None:
            borrow = mutable
        if mutable and not borrow:
            raise ValueError(
                f"In({variable}) has mutable=True, borrow=False. This combination is "
                "incompatible since mutable=True implies that the input may be both aliased "
                "(borrow=True) and overwritten.\nHINT: leave borrow unset, or pass borrow=True."
            )
        if implicit is None:
            implicit = isinstance(value, Container)
        super().__init__(
            variable,
            name=name,
            update=update,
            mutable=mutable,
            strict=strict,
            allow_downcast=allow_downcast,
            autoname=autoname,
            implicit=implicit,
            borrow=borrow,
        )
        self.value = value
        self.shared = shared
        if update is not None and value is None:
            raise ValueError(
                f"In({variable}, update=...) needs a default value: the update is stored "
                "there between calls.\nHINT: pass value=<initial value>."
            )


class SymbolicOutput:
    """An output of a compiled function.

    Parameters
    ----------
    variable
        The graph variable computed.
    borrow
        The returned array may be reused by the next call (no copy is made).
    """

    def __init__(self, variable: Variable, borrow: bool = False) -> None:
        if not isinstance(variable, Variable):
            raise TypeError(
                f"a function output must be a Variable, got {variable!r} "
                f"({type(variable).__name__}). HINT: wrap constants with "
                "opgraph.tensor.constant(...)."
            )
        self.variable = variable
        self.borrow = bool(borrow)

    def __str__(self) -> str:
        return f"Out({self.variable}{', borrow=True' if self.borrow else ''})"

    def __repr__(self) -> str:
        return str(self)


Out = SymbolicOutput
