"""3d correlation by matrix multiplication: ``Corr3dMM`` and its gradients (Theano's
``nnet.corr3d``).

``Corr3dMM(border_mode, subsample, filter_dilation, openmp, num_groups)(img, kern)`` is the
3d CORRELATION of ``img (batch, channels, rows, cols, depth)`` with ``kern (filters,
channels / num_groups, k_rows, k_cols, k_depth)`` (the kernel is not flipped); the formula is
:mod:`opgraph.tensor.nnet.corr`'s with three spatial axes. :class:`Corr3dMM_gradWeights` and
:class:`Corr3dMM_gradInputs` are its gradients. There is no unshared 3d correlation (as in
Theano).

``border_mode`` is normalized as Theano 1.0 does: ``'valid'``, ``'full'``, ``'half'`` or a
3-tuple of non-negative ints (symmetric padding per axis; an int pads every axis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.tensor.nnet.corr import CorrBase, CorrForward, CorrGradInputs, CorrGradWeights

__all__ = ["BaseCorr3dMM", "Corr3dMM", "Corr3dMM_gradInputs", "Corr3dMM_gradWeights"]


def _normalize_border_mode_3d(border_mode: Any) -> Any:
    """Theano's Corr3dMM normalization: a string, or three non-negative ints."""
    if isinstance(border_mode, int | np.integer) and not isinstance(border_mode, bool):
        if border_mode < 0:
            raise ValueError(
                f"invalid border_mode {border_mode}, which must be a non-negative integer"
            )
        return (int(border_mode),) * 3
    if isinstance(border_mode, tuple):
        if (
            len(border_mode) != 3
            or not all(isinstance(b, int | np.integer) for b in border_mode)
            or min(border_mode) < 0
        ):
            raise ValueError(
                f"invalid border_mode {border_mode}, which must be a tuple of three "
                "non-negative integers"
            )
        return tuple(int(b) for b in border_mode)
    if border_mode not in ("valid", "full", "half"):
        raise ValueError(
            f'invalid border_mode {border_mode!r}, which must be either "valid", "full", "half", '
            "an integer or a tuple of three integers"
        )
    return border_mode


class BaseCorr3dMM(CorrBase):
    """Base of :class:`Corr3dMM`, :class:`Corr3dMM_gradWeights`, :class:`Corr3dMM_gradInputs`.

    Parameters (Theano 1.0's, in its order): ``border_mode``, ``subsample``,
    ``filter_dilation``, ``openmp`` (accepted, unused) and ``num_groups``.
    """

    __props__ = ("border_mode", "subsample", "filter_dilation", "num_groups")
    convdim = 3
    unshared = False

    def __init__(
        self,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1, 1),
        filter_dilation: Sequence[int] = (1, 1, 1),
        openmp: bool | None = None,
        num_groups: int = 1,
    ) -> None:
        self.border_mode = _normalize_border_mode_3d(border_mode)
        self.num_groups = int(num_groups)
        self.openmp = openmp
        self._check_params(subsample, filter_dilation)

    @classmethod
    def _family(cls) -> tuple[type, type, type]:
        return Corr3dMM, Corr3dMM_gradWeights, Corr3dMM_gradInputs

    @property
    def pad(self) -> tuple[int, int, int]:
        """Theano's pad codes: ``-1`` for 'half', ``-2`` for 'full', else the three ints."""
        if self.border_mode == "half":
            return (-1, -1, -1)
        if self.border_mode == "full":
            return (-2, -2, -2)
        if isinstance(self.border_mode, tuple):
            return self.border_mode
        return (0, 0, 0)

    def __str__(self) -> str:
        return (
            f"{type(self).__name__}{{{self.border_mode}, {self.subsample}, "
            f"{self.filter_dilation}, {self.num_groups}}}"
        )


class Corr3dMM(CorrForward, BaseCorr3dMM):
    """3d correlation of ``img (B, C, H, W, D)`` with ``kern (O, C/g, kh, kw, kd)``."""


class Corr3dMM_gradWeights(CorrGradWeights, BaseCorr3dMM):
    """Gradient of :class:`Corr3dMM` with respect to ``kern``: ``(img, topgrad[, shape])``."""


class Corr3dMM_gradInputs(CorrGradInputs, BaseCorr3dMM):
    """Gradient of :class:`Corr3dMM` with respect to ``img``: ``(kern, topgrad[, shape])``."""
