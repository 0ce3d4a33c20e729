"""``TypedListType``: the Type of a Python list whose elements all have one Type (Theano's).

A value is a plain Python ``list``; every element is a value of ``ttype`` (a TensorType, or
another TypedListType for nested lists)::

    >>> from opgraph import tensor as T
    >>> from opgraph.typed_list import TypedListType
    >>> TypedListType(T.fvector)          # a list of float32 vectors
    TypedList <TensorType(float32, vector)>
    >>> TypedListType(T.fvector, depth=1) # a list of lists of float32 vectors
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.type import Type

__all__ = ["TypedListType"]


class TypedListType(Type):
    """The Type of a Python list of values of one Type.

    Parameters
    ----------
    ttype
        The Type of the elements; may itself be a TypedListType.
    depth
        0 (the default) for a flat list; ``depth=n`` nests the list ``n`` more times, i.e.
        ``TypedListType(t, 1) == TypedListType(TypedListType(t))``.
    """

    __props__ = ("ttype",)

    def __init__(self, ttype: Type, depth: int = 0) -> None:
        if depth < 0:
            raise ValueError(f"TypedListType: depth must be 0 or more, got {depth}")
        if not isinstance(ttype, Type):
            raise TypeError(
                f"TypedListType expects an opgraph Type for its elements (e.g. "
                f"opgraph.tensor.fvector), got {ttype!r}"
            )
        self.ttype = ttype if depth == 0 else TypedListType(ttype, depth - 1)

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``data`` as a list of ``ttype`` values, or raise TypeError.

        With ``strict=True`` only a Python ``list`` whose elements already are valid values is
        accepted (and returned as is); otherwise any iterable is converted element by element.
        """
        if strict:
            if not isinstance(data, list):
                raise TypeError(f"{self} expects a Python list, got {type(data).__name__}")
            if not all(self.ttype.is_valid_value(y) for y in data):
                raise TypeError(f"{self}: every element must be a valid {self.ttype} value")
            return data
        try:
            items = list(data)
        except TypeError as exc:
            raise TypeError(f"{self} expects a list, got {type(data).__name__}") from exc
        out = [self.ttype.filter(y, allow_downcast=allow_downcast) for y in items]
        if not all(self.ttype.is_valid_value(y) for y in out):
            raise TypeError(f"Expected all elements to be {self.ttype}")
        return out

    def is_valid_value(self, data: Any) -> bool:
        return isinstance(data, list) and all(self.ttype.is_valid_value(y) for y in data)

    def __str__(self) -> str:
        return f"TypedList <{self.ttype}>"

    def __repr__(self) -> str:
        return str(self)

    def get_depth(self) -> int:
        """The nesting level, 0-based: 0 for a list of tensors, 1 for a list of lists..."""
        if isinstance(self.ttype, TypedListType):
            return self.ttype.get_depth() + 1
        return 0

    def values_eq(self, a: Any, b: Any) -> bool:
        """Same length and equal elements (compared with the element Type's ``values_eq``)."""
        return len(a) == len(b) and all(self.ttype.values_eq(x, y) for x, y in zip(a, b))

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return len(a) == len(b) and all(self.ttype.values_eq_approx(x, y) for x, y in zip(a, b))

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """True if the lists are the same object or any of their elements may share memory."""
        if a is b:
            return True
        a_items = a if isinstance(a, list) else [a]
        b_items = b if isinstance(b, list) else [b]
        return any(bool(self.ttype.may_share_memory(x, y)) for x in a_items for y in b_items)

    def get_shape_info(self, obj: Any) -> Any:
        return (len(obj),)

    @property
    def dtype(self) -> Type:
        """The element Type (Theano's name for it on a TypedListType)."""
        return self.ttype

    @property
    def ndim(self) -> int:
        """The element Type's ``ndim`` plus one (as in Theano)."""
        return int(self.ttype.ndim) + 1  # type: ignore[attr-defined]
