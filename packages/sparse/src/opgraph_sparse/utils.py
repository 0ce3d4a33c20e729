"""Small helpers of Theano's ``theano.sparse.utils``."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["hash_from_sparse"]


def hash_from_sparse(data: Any) -> str:
    """A hex digest of a scipy matrix's format, shape, dtype and stored arrays.

    Two matrices with the same stored arrays (in the same order) hash alike; sort the
    indices and sum duplicates first to hash by value.
    """
    digest = hashlib.sha256()
    digest.update(f"{data.format}|{data.shape}|{data.dtype}".encode())
    for name in ("data", "indices", "indptr"):
        array = getattr(data, name, None)
        if array is not None:
            digest.update(np.ascontiguousarray(array).tobytes())
            digest.update(str(array.dtype).encode())
    return digest.hexdigest()
