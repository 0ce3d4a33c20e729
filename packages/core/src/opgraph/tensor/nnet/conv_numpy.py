"""NumPy correlation kernels shared by every convolution Op's ``perform``.

Three routines compute a grouped, strided, dilated, zero-padded CORRELATION (no kernel flip)
over any number of spatial axes (2 for ``CorrMM``/``AbstractConv2d``, 3 for the 3d ops),
with shared or unshared (one filter per output position) weights. Layouts are channel-first::

    img     (B, C, *S)                    the input ("bottom")
    kern    (O, C/g, *K)                  shared filters
            (O, *P, C/g, *K)              unshared filters, one per output position
    top     (B, O, *P)                    the output

    top[b, G*Og + o, p] = sum_{c, k} imgpad[b, G*Cg + c, p*s + k*d] * kern[G*Og + o, c, k]

where ``g = num_groups``, ``Cg = C / g``, ``Og = O / g``, ``G`` the group, ``s`` the strides
(``subsample``), ``d`` the dilation and ``imgpad`` the image padded with zeros by ``pads``
(one ``(before, after)`` pair per spatial axis). ``P = (S + before + after - ((K-1)*d+1)) // s
+ 1`` per axis.

Each routine is im2col plus batched matrix products (BLAS through ``np.matmul``): the windows
are a strided view of the padded image (``as_strided``), copied once into ``(B, group, Cg*K,
P)`` matrices (one per image and group) that multiply the ``(Og, Cg*K)`` filter matrices.
``corr_grad_inputs`` with strides scatters its columns back with one strided addition per
kernel tap (col2im); without strides it is one forward correlation of the padded ``topgrad``
with the flipped filters. No Python loop runs over the batch or the output positions.
The output has the image's dtype (the kernel is cast to it if needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "conv_output_size",
    "corr_forward",
    "corr_grad_inputs",
    "corr_grad_weights",
    "normalize_pads",
]

Pads = Sequence[tuple[int, int]]


def normalize_pads(pads: Pads | None, ndim: int) -> tuple[tuple[int, int], ...]:
    """``pads`` as ``ndim`` ``(before, after)`` pairs of non-negative ints (None: no padding)."""
    if pads is None:
        return ((0, 0),) * ndim
    out = tuple((int(a), int(b)) for a, b in pads)
    if len(out) != ndim:
        raise ValueError(
            f"pads must have one (before, after) pair per spatial axis ({ndim}), got {pads!r}"
        )
    if any(a < 0 or b < 0 for a, b in out):
        raise ValueError(f"pads must be non-negative, got {pads!r}")
    return out


def conv_output_size(size: int, k: int, pad: tuple[int, int], stride: int, dilation: int) -> int:
    """Output length of one axis: ``(size + before + after - ((k-1)*dil + 1)) // stride + 1``."""
    return (size + pad[0] + pad[1] - ((k - 1) * dilation + 1)) // stride + 1


def _check_common(
    name: str, nd: int, subsample: Sequence[int], dilation: Sequence[int], num_groups: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sub = tuple(int(s) for s in subsample)
    dil = tuple(int(d) for d in dilation)
    if len(sub) != nd or len(dil) != nd:
        raise ValueError(
            f"{name}: subsample {tuple(subsample)} and filter_dilation {tuple(dilation)} "
            f"need {nd} elements each (one per spatial axis)"
        )
    if min(sub + dil, default=1) < 1:
        raise ValueError(
            f"{name}: subsample {sub} and filter_dilation {dil} must be positive integers"
        )
    if int(num_groups) < 1:
        raise ValueError(f"{name}: num_groups must be >= 1, got {num_groups}")
    return sub, dil


def _pad(img: np.ndarray, pads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """``img`` with its spatial axes zero-padded (the array itself when nothing is padded)."""
    if not any(a or b for a, b in pads):
        return img
    return np.pad(img, ((0, 0), (0, 0), *pads))


def _windows(
    imgpad: np.ndarray,
    kshape: Sequence[int],
    out_shape: Sequence[int],
    sub: Sequence[int],
    dil: Sequence[int],
) -> np.ndarray:
    """Read-only view ``(B, C, *P, *K)``: ``view[b, c, p, k] = imgpad[b, c, p*sub + k*dil]``."""
    st = imgpad.strides
    nd = len(kshape)
    strides = (
        st[0],
        st[1],
        *(st[2 + i] * sub[i] for i in range(nd)),
        *(st[2 + i] * dil[i] for i in range(nd)),
    )
    shape = (*imgpad.shape[:2], *out_shape, *kshape)
    return as_strided(imgpad, shape=shape, strides=strides, writeable=False)


def _im2col(win: np.ndarray, groups: int) -> np.ndarray:
    """Windows ``(B, C, *P, *K)`` as the matrix stack ``(B, groups, Cg*K, prod(P))`` (a copy).

    The copy runs along the output positions (the image's rows), so it streams through memory.
    """
    nd = (win.ndim - 2) // 2
    B, C = win.shape[:2]
    Kp = prod(win.shape[2 + nd :])
    P = prod(win.shape[2 : 2 + nd])
    order = (0, 1, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd))  # (B, C, *K, *P)
    cols = np.ascontiguousarray(win.transpose(order))
    return cols.reshape(B, groups, (C // groups) * Kp, P)


def _out_shape(
    name: str,
    spatial: Sequence[int],
    kshape: Sequence[int],
    pads: tuple[tuple[int, int], ...],
    sub: Sequence[int],
    dil: Sequence[int],
) -> tuple[int, ...]:
    out = tuple(
        conv_output_size(spatial[i], kshape[i], pads[i], sub[i], dil[i]) for i in range(len(kshape))
    )
    if any(o < 0 for o in out) or any(
        spatial[i] + pads[i][0] + pads[i][1] < (kshape[i] - 1) * dil[i] + 1
        for i in range(len(kshape))
    ):
        padded = tuple(spatial[i] + pads[i][0] + pads[i][1] for i in range(len(kshape)))
        dk = tuple((kshape[i] - 1) * dil[i] + 1 for i in range(len(kshape)))
        raise ValueError(
            f"{name}: the padded image's spatial shape {padded} is smaller than the dilated "
            f"kernel's {dk} (image {tuple(spatial)}, kernel {tuple(kshape)}, pads {pads}, "
            f"dilation {tuple(dil)})"
        )
    return out


def _check_groups(name: str, C: int, O: int, num_groups: int, kern_c: int | None) -> None:
    if C % num_groups or O % num_groups:
        raise ValueError(
            f"{name}: num_groups={num_groups} must divide the input channels ({C}) and the "
            f"number of filters ({O})"
        )
    if kern_c is not None and kern_c * num_groups != C:
        raise ValueError(
            f"{name}: the filters have {kern_c} input channels per group, the input has {C} "
            f"channels in {num_groups} group(s): expected {C // num_groups}"
        )


def corr_forward(
    img: np.ndarray,
    kern: np.ndarray,
    pads: Pads | None = None,
    subsample: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    num_groups: int = 1,
    unshared: bool = False,
) -> np.ndarray:
    """The correlation ``top`` of ``img (B, C, *S)`` with ``kern`` (see the module docstring)."""
    img = np.asarray(img)
    kern = np.asarray(kern, dtype=img.dtype)
    nd = img.ndim - 2
    sub, dil = _check_common(
        "corr_forward", nd, subsample or (1,) * nd, dilation or (1,) * nd, num_groups
    )
    pads_ = normalize_pads(pads, nd)
    if kern.ndim != (2 + 2 * nd if unshared else 2 + nd):
        raise ValueError(
            f"corr_forward: kern must have {2 + 2 * nd if unshared else 2 + nd} dimensions "
            f"for a {nd}-d {'unshared ' if unshared else ''}correlation, got shape {kern.shape}"
        )
    g = int(num_groups)
    B, C = img.shape[:2]
    O = kern.shape[0]
    kshape = kern.shape[-nd:]
    _check_groups("corr_forward", C, O, g, kern.shape[-nd - 1])
    out_shape = _out_shape("corr_forward", img.shape[2:], kshape, pads_, sub, dil)
    if unshared and tuple(kern.shape[1 : 1 + nd]) != out_shape:
        raise ValueError(
            f"corr_forward: unshared filters of shape {kern.shape} have {kern.shape[1 : 1 + nd]} "
            f"output positions, the correlation produces {out_shape}"
        )
    Cg, Og, P, Kp = C // g, O // g, prod(out_shape), prod(kshape)
    if B * O * P == 0:
        return np.zeros((B, O, *out_shape), dtype=img.dtype)
    cols = _im2col(_windows(_pad(img, pads_), kshape, out_shape, sub, dil), g)  # (B, g, CgK, P)
    if unshared:
        # One (B, CgK) x (CgK, Og) product per group and output position.
        w = kern.reshape(g, Og, P, Cg * Kp).transpose(0, 2, 3, 1)  # (g, P, CgK, Og)
        res = np.matmul(cols.transpose(1, 3, 0, 2), w)  # (g, P, B, Og)
        res = res.transpose(2, 0, 3, 1)  # (B, g, Og, P)
    else:
        res = np.matmul(kern.reshape(g, Og, Cg * Kp), cols)  # (B, g, Og, P)
    return np.ascontiguousarray(res).reshape(B, O, *out_shape)


def corr_grad_weights(
    img: np.ndarray,
    topgrad: np.ndarray,
    kshape: Sequence[int],
    pads: Pads | None = None,
    subsample: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    num_groups: int = 1,
    unshared: bool = False,
) -> np.ndarray:
    """The gradient of :func:`corr_forward` with respect to ``kern``, of spatial shape ``kshape``.

    Returns ``(O, C/g, *kshape)`` (unshared: ``(O, *P, C/g, *kshape)``) where ``O`` and ``P``
    are ``topgrad``'s channels and spatial shape.
    """
    img = np.asarray(img)
    topgrad = np.asarray(topgrad, dtype=img.dtype)
    nd = img.ndim - 2
    sub, dil = _check_common(
        "corr_grad_weights", nd, subsample or (1,) * nd, dilation or (1,) * nd, num_groups
    )
    pads_ = normalize_pads(pads, nd)
    kshape = tuple(int(k) for k in kshape)
    if len(kshape) != nd or topgrad.ndim != img.ndim or min(kshape, default=1) < 1:
        raise ValueError(
            f"corr_grad_weights: img {img.shape}, topgrad {topgrad.shape} and kernel shape "
            f"{kshape} do not describe a {nd}-d correlation"
        )
    g = int(num_groups)
    B, C = img.shape[:2]
    O = topgrad.shape[1]
    _check_groups("corr_grad_weights", C, O, g, None)
    out_shape = tuple(topgrad.shape[2:])
    full = _out_shape("corr_grad_weights", img.shape[2:], kshape, pads_, sub, dil)
    if topgrad.shape[0] != B or out_shape != full:
        raise ValueError(
            f"corr_grad_weights: topgrad has shape {topgrad.shape}, but the image {img.shape} "
            f"with kernel {kshape}, pads {pads_}, subsample {sub}, dilation {dil} gives "
            f"{(B, O, *full)}"
        )
    Cg, Og, P, Kp = C // g, O // g, prod(out_shape), prod(kshape)
    wshape = (O, *out_shape, Cg, *kshape) if unshared else (O, Cg, *kshape)
    if B * P * Cg * Kp * O == 0:
        return np.zeros(wshape, dtype=img.dtype)
    cols = _im2col(_windows(_pad(img, pads_), kshape, out_shape, sub, dil), g)  # (B, g, CgK, P)
    top = topgrad.reshape(B, g, Og, P)
    if unshared:
        # One (Og, B) x (B, CgK) product per group and output position.
        res = np.matmul(top.transpose(1, 3, 2, 0), cols.transpose(1, 3, 0, 2))  # (g, P, Og, CgK)
        res = res.transpose(0, 2, 1, 3)  # (g, Og, P, CgK)
    else:
        # One (Og, P) x (P, CgK) product per image and group, summed over the batch.
        res = np.matmul(top, cols.transpose(0, 1, 3, 2)).sum(axis=0)  # (g, Og, CgK)
    return np.ascontiguousarray(res).reshape(wshape)


def corr_grad_inputs(
    kern: np.ndarray,
    topgrad: np.ndarray,
    imshape: Sequence[int],
    pads: Pads | None = None,
    subsample: Sequence[int] | None = None,
    dilation: Sequence[int] | None = None,
    num_groups: int = 1,
    unshared: bool = False,
) -> np.ndarray:
    """The gradient of :func:`corr_forward` with respect to ``img``, of spatial shape ``imshape``.

    Returns ``(B, C, *imshape)`` with ``B`` ``topgrad``'s batch and ``C = C/g * num_groups``
    from ``kern``. Positions of the image no output reads (beyond the last stride) get zeros.
    """
    kern = np.asarray(kern)
    topgrad = np.asarray(topgrad, dtype=kern.dtype)
    nd = topgrad.ndim - 2
    sub, dil = _check_common(
        "corr_grad_inputs", nd, subsample or (1,) * nd, dilation or (1,) * nd, num_groups
    )
    pads_ = normalize_pads(pads, nd)
    imshape = tuple(int(s) for s in imshape)
    if kern.ndim != (2 + 2 * nd if unshared else 2 + nd) or len(imshape) != nd:
        raise ValueError(
            f"corr_grad_inputs: kern {kern.shape}, topgrad {topgrad.shape} and image shape "
            f"{imshape} do not describe a {nd}-d {'unshared ' if unshared else ''}correlation"
        )
    g = int(num_groups)
    B, O = topgrad.shape[:2]
    kshape = kern.shape[-nd:]
    Cg = kern.shape[-nd - 1]
    C = Cg * g
    if kern.shape[0] != O or O % g:
        raise ValueError(
            f"corr_grad_inputs: kern has {kern.shape[0]} filters, topgrad {O} channels; "
            f"both must agree and be divisible by num_groups={g}"
        )
    out_shape = tuple(topgrad.shape[2:])
    full = _out_shape("corr_grad_inputs", imshape, kshape, pads_, sub, dil)
    if out_shape != full or (unshared and tuple(kern.shape[1 : 1 + nd]) != out_shape):
        raise ValueError(
            f"corr_grad_inputs: topgrad has shape {topgrad.shape}, but an image of spatial "
            f"shape {imshape} with kernel {tuple(kshape)}, pads {pads_}, subsample {sub}, "
            f"dilation {dil} gives {(B, O, *full)}"
        )
    if not unshared and all(x == 1 for x in sub) and B * C * prod(imshape) > 0 and O > 0:
        return _grad_inputs_by_correlation(kern, topgrad, imshape, pads_, dil, g)
    Og, P, Kp = O // g, prod(out_shape), prod(kshape)
    padded = tuple(imshape[i] + pads_[i][0] + pads_[i][1] for i in range(nd))
    dimg = np.zeros((B, C, *padded), dtype=kern.dtype)
    if B * C * P * Kp * O == 0:
        return _crop(dimg, pads_)
    top = topgrad.reshape(B, g, Og, P)
    if unshared:
        w = kern.reshape(g, Og, P, Cg * Kp).transpose(0, 2, 3, 1)  # (g, P, CgK, Og)
        cols = np.matmul(w, top.transpose(1, 3, 2, 0))  # (g, P, CgK, B)
        cols = cols.transpose(3, 0, 2, 1)  # (B, g, CgK, P)
    else:
        w = kern.reshape(g, Og, Cg * Kp).transpose(0, 2, 1)  # (g, CgK, Og)
        cols = np.matmul(w, top)  # (B, g, CgK, P)
    cols = cols.reshape(B, g, Cg, Kp, *out_shape)
    taps = [cols[:, :, :, k] for k in range(Kp)]  # each (B, g, Cg, *P)
    view = dimg.reshape(B, g, Cg, *padded)
    for k, tap in enumerate(taps):
        idx = np.unravel_index(k, kshape)
        sl = tuple(
            slice(idx[i] * dil[i], idx[i] * dil[i] + (out_shape[i] - 1) * sub[i] + 1, sub[i])
            for i in range(nd)
        )
        view[(slice(None), slice(None), slice(None), *sl)] += tap
    return _crop(dimg, pads_)


def _grad_inputs_by_correlation(
    kern: np.ndarray,
    topgrad: np.ndarray,
    imshape: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
    dil: tuple[int, ...],
    g: int,
) -> np.ndarray:
    """:func:`corr_grad_inputs` without strides, as one forward correlation (no col2im).

    ``dimg[i] = sum_k top[i + before - k*d] * kern[k]`` is the correlation of ``topgrad``,
    padded by ``(K-1)*d - before`` in front (cropped where negative), with the kernel flipped
    and its channel axes swapped per group.
    """
    nd = len(imshape)
    O, Cg = kern.shape[:2]
    Og = O // g
    kshape = kern.shape[2:]
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * nd
    # (g, Og, Cg, *K) -> (g, Cg, Og, *K) -> (C, Og, *K), flipped.
    wt = kern.reshape(g, Og, Cg, *kshape).swapaxes(1, 2).reshape(g * Cg, Og, *kshape)[flip]
    top_pads, crop = [], []
    for i in range(nd):
        dk = (kshape[i] - 1) * dil[i] + 1
        before = dk - 1 - pads[i][0]
        after = imshape[i] + dk - 1 - topgrad.shape[2 + i] - before
        top_pads.append((max(before, 0), max(after, 0)))
        crop.append(slice(max(-before, 0), topgrad.shape[2 + i] - max(-after, 0)))
    top = topgrad[(slice(None), slice(None), *crop)]
    return corr_forward(top, wt, top_pads, (1,) * nd, dil, g)


def _crop(dimg: np.ndarray, pads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The padded gradient without its padding (a contiguous copy when anything is cut)."""
    if not any(a or b for a, b in pads):
        return dimg
    sl = tuple(slice(a, dimg.shape[2 + i] - b) for i, (a, b) in enumerate(pads))
    return np.ascontiguousarray(dimg[(slice(None), slice(None), *sl)])
