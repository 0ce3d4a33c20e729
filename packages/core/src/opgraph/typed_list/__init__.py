"""Typed lists (Theano's ``theano.typed_list``): symbolic Python lists of tensors.

``TypedListType(ttype)`` is the Type; :mod:`opgraph.typed_list.basic` holds the Ops
(``getitem``, ``append``, ``extend``, ``insert``, ``remove``, ``reverse``, ``index_``,
``count``, ``length``, ``make_list``) and the variable classes. Everything is re-exported
here, as in Theano (``from theano.typed_list import *``).

The in-place forms (``Append(inplace=True)``...) are substituted where the list may be
overwritten by opgraph-optimizers' ``typed_list_inplace_opt`` (Theano's name), in FAST_RUN's
``inplace`` stage.
"""

from __future__ import annotations

from opgraph.typed_list import basic
from opgraph.typed_list import basic as _basic
from opgraph.typed_list.basic import (
    Append,
    Count,
    Extend,
    GetItem,
    Index,
    Insert,
    Length,
    MakeList,
    Remove,
    Reverse,
    TypedListConstant,
    TypedListVariable,
    append,
    count,
    extend,
    getitem,
    index_,
    insert,
    length,
    make_list,
    remove,
    reverse,
)
from opgraph.typed_list.type import TypedListType

__all__ = [*_basic.__all__, "TypedListType"]
