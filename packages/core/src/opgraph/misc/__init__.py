"""Theano's ``theano.misc`` helpers that programs import: :mod:`opgraph.misc.pkl_utils`."""

from opgraph.misc import pkl_utils

__all__ = ["pkl_utils"]
