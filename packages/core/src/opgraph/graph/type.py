"""The Type protocol: what values a Variable may hold, and how to convert data to them."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Constant, Variable
from opgraph.graph.utils import MetaObject, MethodNotDefined

__all__ = ["Generic", "Type", "generic"]


class Type(MetaObject):
    """A set of constraints on the data a Variable can hold (Theano's Type).

    Subclasses define :meth:`filter` and usually ``__props__`` (equality and hashing come from
    them). ``variable_type`` and ``constant_type`` choose the Variable classes this Type builds,
    so that e.g. a TensorType builds TensorVariables with arithmetic operators.
    """

    variable_type: type[Variable] = Variable
    constant_type: type[Constant] = Constant

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``data`` converted to a value this Type accepts, or raise TypeError.

        ``strict=True`` accepts only data that already is of the right kind, without any
        conversion. ``allow_downcast`` allows lossy conversions (e.g. float64 to float32).
        """
        raise MethodNotDefined(f"{type(self).__name__} must define filter()")

    def is_valid_value(self, data: Any) -> bool:
        """True if ``data`` passes :meth:`filter` with ``strict=True``."""
        try:
            self.filter(data, strict=True)
        except (TypeError, ValueError):
            return False
        return True

    def filter_variable(self, other: Variable, allow_convert: bool = True) -> Variable:
        """Return a Variable of this Type standing for ``other``, or raise TypeError.

        Used when a variable replaces another: ``other`` must have this Type or be convertible
        to it by :meth:`convert_variable`.
        """
        if not isinstance(other, Variable):
            other = self.make_constant(other)
        if other.type == self:
            return other
        if allow_convert:
            converted = self.convert_variable(other)
            if converted is not None:
                return converted
        raise TypeError(
            f"cannot use {other} of type {other.type} where a variable of type {self} is "
            "expected. HINT: the types must be equal; convert the variable explicitly first."
        )

    def convert_variable(self, var: Variable) -> Variable | None:
        """Return ``var`` converted to this Type if that is safe, else None."""
        if var.type == self:
            return var
        return None

    def is_super(self, otype: Type) -> bool | None:
        """True if every value of ``otype`` is also a value of this Type."""
        return self == otype or None

    def in_same_class(self, otype: Type) -> bool:
        """True if ``otype`` and this Type describe the same kind of data."""
        return self == otype

    def values_eq(self, a: Any, b: Any) -> bool:
        """True if two values of this Type are equal."""
        return a == b

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        """True if two values of this Type are equal up to rounding (used by DEBUG_MODE)."""
        return self.values_eq(a, b)

    def make_variable(self, name: str | None = None) -> Variable:
        """Return a new Variable of this Type."""
        return self.variable_type(self, None, None, name)

    def __call__(self, name: str | None = None) -> Variable:
        """Shorthand for :meth:`make_variable` (``dmatrix = TensorType(...); x = dmatrix('x')``)."""
        return self.make_variable(name)

    def make_constant(self, value: Any, name: str | None = None) -> Constant:
        """Return a Constant of this Type holding ``value`` (filtered)."""
        return self.constant_type(self, value, name=name)

    def clone(self, **kwargs: Any) -> Type:
        """Return a copy of this Type with some props changed."""
        props = self._props_dict()
        props.update(kwargs)
        return type(self)(**props)

    def get_shape_info(self, obj: Any) -> Any:
        """What a profiler needs to know of a value's size (its shape for arrays)."""
        return getattr(obj, "shape", None)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """True if two values of this Type may share memory (aliasing checks)."""
        return a is b


class Generic(Type):
    """The Type of any Python object; Ops use it for opaque values and workspaces."""

    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return data

    def is_valid_value(self, data: Any) -> bool:
        return True

    def __str__(self) -> str:
        return "Generic"


generic = Generic()
