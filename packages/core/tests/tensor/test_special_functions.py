"""The special functions of Theano 1.0 (``i0``, ``i1``, ``iv``, ``j0``, ``j1``, ``jv``, ``erfcx``,
``erfcinv``, ``chi2sf``) and the complex constructors (``complex``, ``complex_from_polar``).

Forward values and gradients are golden values recorded from Theano 1.0.5 (``THEANO_FLAGS=
device=cpu,cxx=``, float64 inputs); dtype rules are Theano's; gradients are also checked by
finite differences. Each runs in every named mode (the C linker included), and in a fused
elementwise loop.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats

import opgraph.scalar as S
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.gradient import NullTypeGradError, grad, verify_grad
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.testing.checks import check_infer_shape, check_modes

X = np.array([-1.5, 0.0, 0.5, 2.0, 10.0])
XC = np.array([0.1, 0.5, 1.0, 1.5])  # erfcinv's domain (0, 2)

# Theano 1.0.5: function([x], T.<f>(x))(X) and function([x], T.grad(T.<f>(x).sum(), x))(X).
THEANO = {
    "i0": (
        [1.6467231897728907, 1.0, 1.0634833707413234, 2.2795853023360668, 2815.716628466254],
        [-0.98166642857790787, 0.0, 0.25789430539089636, 1.5906368546373295, 2670.9883037012551],
    ),
    "i1": (
        [-0.98166642857790787, 0.0, 0.25789430539089636, 1.5906368546373295, 2670.9883037012551],
        [0.99227890405428565, 0.5, 0.54769475995953076, 1.4842668750174024, 2548.6177980961293],
    ),
    "j0": (
        [0.5118276717359181, 1.0, 0.938469807240813, 0.22389077914123562, -0.24593576445134832],
        [0.5579365079100997, -0.0, -0.24226845767487387, -0.5767248077568734, -0.04347274616886141],
    ),
    "j1": (
        [-0.5579365079100997, 0.0, 0.24226845767487387, 0.5767248077568734, 0.04347274616886141],
        [0.13986999979585168, 0.5, 0.45393289189106517, -0.06447162473720106, -0.2502830390682344],
    ),
    "erfcx": (
        [18.653886256262734, 1.0, 0.6156903441929258, 0.2553956763105058, 0.05614099274382259],
        [
            -57.090037935883707,
            -1.1283791670955126,
            -0.51268882290258677,
            -0.10679646185348934,
            -0.0055593122190609190,
        ],
    ),
}
THEANO_ERFCINV = (
    [1.1630871536766743, 0.4769362762044699, -0.0, -0.4769362762044699],
    [-3.4280428114518418, -1.1125848189719496, -0.8862269254527579, -1.1125848189719496],
)
# T.iv(1.5, x) / T.jv(1.5, x) and their gradients in x.
THEANO_ORDER = {
    "iv": (
        [np.nan, 0.0, 0.096403473834016776, 1.0994731886331102, 2500.9061549421181],
        [np.nan, 0.0, 0.29878266528836617, 1.2216319716142225, 2403.6486806332532],
    ),
    "jv": (
        [np.nan, -0.0, 0.09170169962565139, 0.49129377868716273, 0.19798249275589236],
        [np.nan, 0.0, 0.26586869105757444, 0.14454580254645616, -0.1669611096684338],
    ),
}
# T.chi2sf(x, 3) at [-1, 0, 0.5, 2, 10].
THEANO_CHI2SF = [1.0, 1.0, 0.9188914116546758, 0.5724067044708798, 0.01856613546304325]

UNARY = ("i0", "i1", "j0", "j1", "erfcx", "erfcinv")


@pytest.mark.parametrize("name", sorted(THEANO))
def test_unary_values_and_gradients_match_theano(name: str) -> None:
    x = T.dvector("x")
    out = getattr(T, name)(x)
    values, grads = THEANO[name]
    check_modes([x], [out, grad(T.sum(out), x)], [X], [np.array(values), np.array(grads)])


def test_erfcinv_matches_theano() -> None:
    x = T.dvector("x")
    out = T.erfcinv(x)
    values, grads = THEANO_ERFCINV
    check_modes([x], [out, grad(T.sum(out), x)], [XC], [np.array(values), np.array(grads)])


@pytest.mark.parametrize("name", ["iv", "jv"])
def test_bessel_of_real_order_matches_theano(name: str) -> None:
    x = T.dvector("x")
    out = getattr(T, name)(1.5, x)
    values, grads = THEANO_ORDER[name]
    # x = -1.5 gives NaN (checked by NumPy below): DebugMode rejects non-finite outputs.
    expected = [np.array(values[1:]), np.array(grads[1:])]
    check_modes([x], [out, grad(T.sum(out), x)], [X[1:]], expected)
    assert np.isnan(function([x], out, mode="FAST_RUN")(X[:1]))[0]


def test_chi2sf_matches_theano_and_scipy() -> None:
    x = T.dvector("x")
    pts = np.array([-1.0, 0.0, 0.5, 2.0, 10.0])
    check_modes([x], T.chi2sf(x, 3), [pts], np.array(THEANO_CHI2SF))
    k = T.dvector("k")
    ks = np.array([1.0, 2.5, 4.0, 7.0, 30.0])
    check_modes([x, k], T.chi2sf(x, k), [pts, ks], scipy.stats.chi2.sf(pts, ks))


# (function, Theano's output dtype for float32, int32, int8 inputs)
DTYPES = [
    (T.i0, ("float32", "float64", "float32")),
    (T.j1, ("float32", "float64", "float32")),
    (T.erfcx, ("float32", "float64", "float32")),
    (lambda x: T.iv(2, x), ("float32", "float64", "float32")),
    (lambda x: T.chi2sf(x, 3), ("float64", "float64", "float64")),
]


@pytest.mark.parametrize(("fn", "expected"), DTYPES)
def test_output_dtypes_are_theanos(fn, expected: tuple[str, str, str]) -> None:
    got = tuple(fn(T.vector(dtype=dt)).dtype for dt in ("float32", "int32", "int8"))
    assert got == expected


@pytest.mark.parametrize("dtype", ["float32", "int8", "int64"])
def test_values_for_other_dtypes_match_scipy(dtype: str) -> None:
    x = T.vector("x", dtype=dtype)
    pts = np.array([0, 1, 2, 3, 5], dtype=dtype)
    outs = [T.i0(x), T.i1(x), T.j0(x), T.j1(x), T.erfcx(x), T.iv(0.5, x), T.jv(2, x)]
    ref = [sp.i0, sp.i1, sp.j0, sp.j1, sp.erfcx, lambda v: sp.iv(0.5, v), lambda v: sp.jv(2, v)]
    expected = [f(pts.astype("float64")).astype(o.dtype) for f, o in zip(ref, outs, strict=True)]
    check_modes([x], outs, [pts], expected, dtype="float32")


@pytest.mark.parametrize("name", UNARY)
def test_gradients_match_finite_differences(name: str) -> None:
    pt = (
        np.array([[0.3, 0.7], [1.2, 1.9]])
        if name == "erfcinv"
        else np.array([[-0.8, 0.3], [1.7, 4.2]])
    )
    verify_grad(getattr(T, name), [pt], rng=np.random.default_rng(0))


@pytest.mark.parametrize("name", ["iv", "jv"])
def test_order_gradient_in_x_matches_finite_differences(name: str) -> None:
    verify_grad(
        lambda x: getattr(T, name)(1.5, x),
        [np.array([0.4, 1.3, 3.7])],
        rng=np.random.default_rng(0),
    )


@pytest.mark.parametrize("name", ["iv", "jv"])
def test_gradient_in_a_float_order_is_not_implemented(name: str) -> None:
    v, x = T.dscalar("v"), T.dvector("x")
    cost = T.sum(getattr(T, name)(v, x))
    with pytest.raises(NullTypeGradError, match="input 0"):
        grad(cost, v)
    # an integer order has no gradient to give: the gradient in x still works
    n = T.iscalar("n")
    g = function([n, x], grad(T.sum(getattr(T, name)(n, x)), x))(2, np.array([0.5, 1.5]))
    ref = {"iv": sp.ivp, "jv": sp.jvp}[name](2, np.array([0.5, 1.5]))
    np.testing.assert_allclose(g, ref, rtol=1e-12)


def test_chi2sf_has_no_gradient_as_in_theano() -> None:
    x = T.dvector("x")
    with pytest.raises(NullTypeGradError, match="chi2sf"):
        grad(T.sum(T.chi2sf(x, 3)), x)


def test_infer_shape_broadcasts() -> None:
    v, x = T.dcol("v"), T.drow("x")
    check_infer_shape([v, x], T.iv(v, x), [np.ones((3, 1)), np.ones((1, 4))])


def test_scalar_ops_work_inside_a_composite_and_its_gradient() -> None:
    x, y = S.float64("x"), S.float64("y")
    comp = S.Composite([x, y], [S.i0(x) * S.jv(y, x) + S.erfcx(y)])
    t, u = T.dvector("t"), T.dvector("u")
    out = T.Elemwise(comp)(t, u)
    pt_t, pt_u = np.array([0.5, 1.5]), np.array([1.0, 2.0])
    expected = sp.i0(pt_t) * sp.jv(pt_u, pt_t) + sp.erfcx(pt_u)
    check_modes([t, u], out, [pt_t, pt_u], expected)
    g = function([t, u], grad(T.sum(out), t))(pt_t, pt_u)
    ref = sp.i1(pt_t) * sp.jv(pt_u, pt_t) + sp.i0(pt_t) * sp.jvp(pt_u, pt_t)
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    # the scalar gradient itself (built with the scalar namespace)
    (gx,) = S.i0.L_op([x], [S.i0(x)], [S.float64("gz")])
    assert gx.type == S.float64
    assert "i1" in str(gx.owner.inputs[1].owner.op)


def test_complex_builds_from_parts_with_theano_dtypes() -> None:
    assert T.complex(T.fvector(), T.fvector()).dtype == "complex64"
    assert T.complex(T.ivector(), T.fvector()).dtype == "complex128"
    assert T.complex(T.bvector(), T.bvector()).dtype == "complex64"
    with pytest.raises(TypeError, match="real parts"):
        T.complex(T.zvector(), T.dvector())
    x, y = T.dvector("x"), T.dvector("y")
    re, im = np.array([1.0, 2.0, -0.5]), np.array([3.0, -1.0, 4.0])
    check_modes([x, y], T.complex(x, y), [re, im], re + 1j * im)
    # an infinite part leaves the other one as it is (re + 1j * im would give NaN)
    got = function([x, y], T.complex(x, y), mode="FAST_RUN")(np.array([np.inf]), np.array([1.0]))
    assert got[0].real == np.inf and got[0].imag == 1.0


def test_complex_from_polar_matches_theano() -> None:
    r, th = T.dvector("r"), T.dvector("th")
    # Theano 1.0.5: complex_from_polar([1, 2], [0.3, 4])
    expected = np.array(
        [0.955336489125606 + 0.29552020666133955j, -1.3072872417272239 - 1.5136049906158564j]
    )
    check_modes(
        [r, th], T.complex_from_polar(r, th), [np.array([1.0, 2.0]), np.array([0.3, 4.0])], expected
    )
    f = function([r, th], T.complex_from_polar(r, th))
    with pytest.raises(ValueError, match="polar radius must be non-negative"):
        f(np.array([-1.0]), np.array([0.0]))


def test_complex_gradients_match_finite_differences() -> None:
    w = np.complex128(0.3 + 0.7j)
    rng = np.random.default_rng(0)
    verify_grad(
        lambda x, y: T.real(T.complex(x, y) * T.complex(x, y) * w),
        [np.array([0.5, -1.2]), np.array([0.8, 0.1])],
        rng=rng,
    )
    verify_grad(
        lambda x, y: T.imag(T.complex(x, y) * T.complex(y, x) * w) + T.real(T.complex(x, y)),
        [np.array([0.5, -1.2]), np.array([0.8, 0.1])],
        rng=rng,
    )
    verify_grad(
        lambda r, th: T.real(T.complex_from_polar(r, th) * w),
        [np.array([0.7, 1.5]), np.array([0.4, -2.0])],
        rng=rng,
    )
    verify_grad(
        lambda r, th: T.imag(T.complex_from_polar(r, th) * T.complex_from_polar(r, th)),
        [np.array([0.7, 1.5]), np.array([0.4, -2.0])],
        rng=rng,
    )


def _c_function(inputs: list, output) -> object:
    """``function`` under the C linker, with every warning an error (no perform fallback)."""
    return function(inputs, output, mode=Mode(linker="c", optimizer="fast_run"))


def test_j0_and_j1_in_a_fused_loop_give_scipys_values() -> None:
    """j0/j1 run in C through SciPy's own routines (libm's were slower and lose relative
    accuracy near the roots): the fused node gives SciPy's values, NaN at +-inf."""
    pytest.importorskip("opgraph_c")
    for dtype in ("float32", "float64"):
        x = T.vector("x", dtype=dtype)
        pts = np.array([0, 1e-30, 0.5, 2.404825557695773, -3, 10, 1e9, np.inf, -np.inf, np.nan])
        pts = pts.astype(dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KernelFallbackWarning)
            f = _c_function([x], T.j0(x) * 2 + T.j1(x))
            got = f(pts)
        (node,) = f.fn.nodes
        assert "j0" in str(node.op) and "j1" in str(node.op)
        expected = (sp.j0(pts) * 2 + sp.j1(pts)).astype(dtype)
        rtol, atol = (1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-14)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def test_a_fused_loop_with_a_function_the_backend_lacks_runs_perform() -> None:
    """tri_gamma has no C routine (SciPy computes it from a Hurwitz zeta it does not export):
    the fused node (tri_gamma with C-able ops) runs its perform (the backend's fallback) and
    gives SciPy's values."""
    pytest.importorskip("opgraph_c")
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        f = _c_function([x], T.tri_gamma(x) * 2 + T.exp(x))
    ((node, thunk),) = zip(f.fn.nodes, f.fn.thunks, strict=True)
    assert "tri_gamma" in str(node.op) and "exp" in str(node.op)
    assert getattr(thunk, "py_fallback", False)
    pts = np.array([0.5, 1.0, 3.0])
    np.testing.assert_allclose(f(pts), sp.polygamma(1, pts) * 2 + np.exp(pts), rtol=1e-12)
