"""The special functions in C loops, through SciPy's ``cython_special``: bit for bit perform.

Each op's C kernel calls the C function SciPy's ufunc calls (kernels/special.py), so the
``c`` linker's results are the ``py`` linker's (``perform``) and SciPy's, bit for bit: NaN
payloads, signed zeros and infinities included, for float64, float32 and integer inputs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph_c.kernels import special
from opgraph_c.kernels.elemwise import elemwise_c

C_MODE = Mode(linker="c", optimizer="None")
PY_MODE = Mode(linker="py", optimizer="None")
C_RUN = Mode(linker="c", optimizer="fast_run")

UNARY: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("gamma", T.gamma, sp.gamma),
    ("gammaln", T.gammaln, sp.gammaln),
    ("psi", T.psi, sp.psi),
    ("erfinv", T.erfinv, sp.erfinv),
    ("erfcinv", T.erfcinv, sp.erfcinv),
    ("erfcx", T.erfcx, sp.erfcx),
    ("i0", T.i0, sp.i0),
    ("i1", T.i1, sp.i1),
    ("j0", T.j0, sp.j0),
    ("j1", T.j1, sp.j1),
]
BINARY: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = [
    ("iv", T.iv, sp.iv),
    ("jv", T.jv, sp.jv),
    ("chi2sf", T.chi2sf, scipy.stats.chi2.sf),
]

# NaN, inf, zeros, negatives, the poles of gamma and psi, the ends of erfinv's and
# erfcinv's domains, overflow of gamma and i0, roots of j0 and j1, subnormals.
POINTS = [
    np.nan,
    -np.nan,
    np.inf,
    -np.inf,
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
    -3.0,
    0.5,
    -0.5,
    -2.5,
    1.5,
    1 - 2**-53,
    -(1 - 2**-53),
    1 + 2**-52,
    2 - 2**-52,
    1e-300,
    5e-324,
    -1e-310,
    1e-10,
    -1e-10,
    26.5,
    -26.5,
    171.6,
    171.7,
    172.0,
    -170.5,
    700.0,
    713.0,
    1e8,
    -1e8,
    1e300,
    -1e300,
    2.404825557695773,
    3.8317059702075125,
    5.520078110286311,
]


def points(dtype: str, n: int = 400, seed: int = 0) -> np.ndarray:
    """POINTS, uniform values over the interesting ranges and random bit patterns
    (signalling and quiet NaNs with payloads, subnormals), in ``dtype``."""
    rng = np.random.default_rng(seed)
    uint = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
    bits = rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(dtype)
    with np.errstate(over="ignore"):
        special_points = np.array(POINTS, dtype=dtype)
    # NaNs with payloads, signalling (quiet bit clear) and quiet, of both signs
    exponent = np.finfo(dtype).nexp
    mantissa = np.finfo(dtype).nmant
    nan = ((1 << exponent) - 1) << mantissa
    quiet, sign = 1 << (mantissa - 1), 1 << (exponent + mantissa)
    nans = np.array(
        [nan | 1, nan | 0x1234, sign | nan | 5, nan | quiet | 7, sign | nan | quiet | 9]
    )
    return np.concatenate(
        [
            special_points,
            nans.astype(uint).view(dtype),
            rng.uniform(-30, 30, n).astype(dtype),
            rng.uniform(-1.1, 1.1, n).astype(dtype),
            rng.uniform(0, 2.2, n).astype(dtype),
            bits,
        ]
    )


def assert_bits_equal(got: np.ndarray, expected: np.ndarray, name: str) -> None:
    """Same dtype, shape and bytes (NaN payloads and the sign of zero included)."""
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, f"{name}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{name}: shape {got.shape} != {expected.shape}"
    uint = f"uint{got.dtype.itemsize * 8}"
    differ = np.flatnonzero(got.view(uint) != expected.view(uint))
    assert differ.size == 0, (
        f"{name}: {differ.size} elements differ, first at {differ[:5]}: "
        f"got {got.ravel()[differ[:5]]}, expected {expected.ravel()[differ[:5]]}"
    )


def c_and_py(inputs: list, outputs: list, values: list, mode: Mode = C_MODE) -> tuple:
    """The outputs under ``mode`` (every node a C kernel) and under the ``py`` linker."""
    c = function(inputs, outputs, mode=mode)
    for thunk in c.fn.thunks:
        assert type(thunk).__name__ == "ElemwiseThunk", f"no C kernel: {thunk}"
        assert not getattr(thunk, "py_fallback", False)
    py = function(inputs, outputs, mode=PY_MODE)
    return c(*[v.copy() for v in values]), py(*[v.copy() for v in values])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unary_ops_are_perform_and_scipy_bit_for_bit(dtype: str) -> None:
    x = T.vector("x", dtype=dtype)
    xv = points(dtype)
    got, expected = c_and_py([x], [op(x) for _, op, _ in UNARY], [xv])
    with np.errstate(all="ignore"):
        for (name, _, ref), g, e in zip(UNARY, got, expected, strict=True):
            assert_bits_equal(g, e, f"{name} {dtype} vs perform")
            assert_bits_equal(g, ref(xv).astype(dtype), f"{name} {dtype} vs scipy")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_binary_ops_are_perform_and_scipy_bit_for_bit(dtype: str) -> None:
    v, x = T.vector("v", dtype=dtype), T.vector("x", dtype=dtype)
    xv = points(dtype, seed=1)
    rng = np.random.default_rng(2)
    orders = np.concatenate([np.array(POINTS), rng.uniform(-10, 40, xv.size - len(POINTS))])
    orders = np.concatenate([orders[:-20], [0, 1, 2, 3, 0.5, -0.5, -1, 10] * 2, [np.nan] * 4])
    with np.errstate(over="ignore"):
        vv = orders.astype(dtype)
    got, expected = c_and_py([v, x], [op(v, x) for _, op, _ in BINARY], [vv, xv])
    with np.errstate(all="ignore"):
        for (name, _, ref), g, e in zip(BINARY, got, expected, strict=True):
            out_dtype = "float64" if name == "chi2sf" else dtype
            assert_bits_equal(g, e, f"{name} {dtype} vs perform")
            assert_bits_equal(g, np.asarray(ref(vv, xv)).astype(out_dtype), f"{name} vs scipy")


def test_chi2sf_edges_of_the_support() -> None:
    """What scipy.stats.chi2.sf puts outside chdtrc's domain: NaN for a bad k, 1 for
    x <= 0, 0 at x = inf."""
    x, k = T.dvector("x"), T.dvector("k")
    xv = np.array([-np.inf, -1.0, -0.0, 0.0, np.inf, np.nan, 1.0, 1.0, 1.0, 1.0, np.inf, 3.0])
    kv = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0, -1.0, np.nan, np.inf, np.inf, 1e-300])
    got, expected = c_and_py([x, k], [T.chi2sf(x, k)], [xv, kv])
    assert_bits_equal(got[0], expected[0], "chi2sf")
    assert_bits_equal(got[0], scipy.stats.chi2.sf(xv, kv), "chi2sf vs scipy")


@pytest.mark.parametrize(("dtype", "out"), [("int8", "float32"), ("int32", "float64")])
def test_integer_inputs_are_cast_as_perform_casts_them(dtype: str, out: str) -> None:
    x = T.vector("x", dtype=dtype)
    info = np.iinfo(dtype)
    xv = np.array([0, 1, -1, 2, -2, 3, 5, -7, 20, 100, info.max, info.min], dtype=dtype)
    outputs = [op(x) for _, op, _ in UNARY] + [op(x, x) for _, op, _ in BINARY]
    names = [n for n, _, _ in UNARY] + [n for n, _, _ in BINARY]
    got, expected = c_and_py([x], outputs, [xv])
    for name, g, e in zip(names, got, expected, strict=True):
        assert g.dtype == ("float64" if name == "chi2sf" else out)
        assert_bits_equal(g, e, f"{name} {dtype}")


def test_a_fused_graph_is_one_c_kernel() -> None:
    """gammaln, exp and j0 in one Composite: one C loop, no node on perform."""
    x = T.dvector("x")
    f = function([x], T.gammaln(x) + T.exp(x) * T.j0(x), mode=C_RUN)
    ((node, thunk),) = zip(f.fn.nodes, f.fn.thunks, strict=True)
    assert "Composite" in str(node.op) and "gammaln" in str(node.op) and "j0" in str(node.op)
    assert type(thunk).__name__ == "ElemwiseThunk" and not getattr(thunk, "py_fallback", False)
    xv = points("float64")
    with np.errstate(all="ignore"):
        expected = sp.gammaln(xv) + np.exp(xv) * sp.j0(xv)
    np.testing.assert_allclose(f(xv), expected, rtol=1e-15, atol=0)

    # Only IEEE-exact arithmetic around it: bit for bit.
    g = function([x], T.gammaln(x) * 2 + 1, mode=C_RUN)
    ((thunk,),) = [g.fn.thunks]
    assert type(thunk).__name__ == "ElemwiseThunk"
    with np.errstate(all="ignore"):
        expected = sp.gammaln(xv) * 2 + 1
    assert_bits_equal(g(xv), expected, "gammaln(x) * 2 + 1")


def test_strided_and_broadcast_operands() -> None:
    """An order broadcast along the rows and a non-contiguous x: the strided loops."""
    v = T.TensorType("float64", (False, True))("v")
    x = T.dmatrix("x")
    rng = np.random.default_rng(3)
    vv = np.array([[0.0], [1.0], [2.5], [-0.5], [np.nan]])
    xv = rng.uniform(-20, 20, (5, 14))[:, ::2]
    assert not xv.flags.c_contiguous
    got, expected = c_and_py([v, x], [T.iv(v, x), T.jv(v, x), T.gammaln(x)], [vv, xv])
    for name, g, e in zip(["iv", "jv", "gammaln"], got, expected, strict=True):
        assert_bits_equal(g, e, name)
    assert_bits_equal(got[1], sp.jv(vv, xv), "jv vs scipy")


def test_empty_arrays() -> None:
    x, m = T.fvector("x"), T.dmatrix("m")
    f = function([x, m], [T.gamma(x), T.erfinv(x), T.chi2sf(m, m)], mode=C_MODE)
    a, b, c = f(np.zeros(0, "float32"), np.zeros((3, 0)))
    assert a.shape == b.shape == (0,) and c.shape == (3, 0)
    assert a.dtype == b.dtype == np.float32 and c.dtype == np.float64


def test_threads_give_the_one_thread_result() -> None:
    """The pointers are read-only after the module loads: the OpenMP loop is safe."""
    x = T.dvector("x")
    xv = np.random.default_rng(4).uniform(-30, 30, 300_000)
    results = []
    for threads in (True, False):
        with config.change_flags(openmp=threads, c__openmp_threshold=1):
            f = function([x], T.gammaln(x) + T.erfcx(x) * T.i1(x), mode=C_RUN)
            results.append(f(xv))
    assert_bits_equal(results[0], results[1], "threads")


def test_erfinv_reports_no_error_from_c() -> None:
    """Outside [-1, 1] the kernel returns SciPy's NaN without calling SciPy, whose Boost
    code would take the GIL to warn or raise under a non-default scipy.special action."""
    x, y = T.dvector("x"), T.fvector("y")
    f = function([x, y], [T.erfinv(x), T.erfinv(y)], mode=C_MODE)
    xv = np.array([1.5, -3.0, np.inf, -np.inf, 1.0, -1.0, 0.5, np.nan])
    with sp.errstate(all="raise"):
        a, b = f(xv, xv.astype("float32"))
    with sp.errstate(all="ignore"):
        assert_bits_equal(a, sp.erfinv(xv), "erfinv float64")
        assert_bits_equal(b, sp.erfinv(xv.astype("float32")), "erfinv float32")


def test_trigamma_still_runs_perform() -> None:
    """SciPy exports no Hurwitz zeta: tri_gamma keeps perform (with the fallback mark)."""
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        f = function([x], T.tri_gamma(x), mode=C_MODE)
    assert all(getattr(t, "py_fallback", False) for t in f.fn.thunks)
    xv = np.array([0.5, 1.0, -1.5])
    np.testing.assert_array_equal(f(xv), sp.polygamma(1, xv))


def test_generated_source_binds_scipys_functions_and_others_do_not_change() -> None:
    x = T.fvector("x")
    node = (T.j0(x) + T.erfinv(x)).owner
    j0_node, erfinv_node = node.inputs[0].owner, node.inputs[1].owner
    source = elemwise_c(j0_node.op, j0_node).source
    assert "static double (*opg_sf_j0)(double, int);" in source
    assert "((opg_float32)opg_sf_j0((opg_float64)i0, 0))" in source
    assert 'function_address("j0", 1, "double")' in source
    assert "cython_special" in source  # the comment saying where the pointer comes from
    source = elemwise_c(erfinv_node.op, erfinv_node).source
    assert 'function_address("erfinv", 1, "float")' in source  # SciPy's float erfinv
    # A kernel without special functions has no pointer, no binding, no import.
    plain = elemwise_c(node.op, node).source
    assert "opg_sf_" not in plain and "function_address" not in plain
    # Kernels compiled in one module share each pointer.
    y = T.dvector("y")
    nodes = [T.j0(y).owner, (T.j0(y) * 2).owner, j0_node]
    parts = [elemwise_c(n.op, n).part for n in nodes]
    bundle = parts[0].assemble(parts, ["_0", "_1", "_2"])
    assert bundle.count("static double (*opg_sf_j0)") == 1
    assert bundle.count("opg_sf_j0 = <") == 1
    assert bundle.count("import function_address") == 1


def test_function_address() -> None:
    import ctypes

    from scipy.special import cython_special

    address = special.function_address("erfcx", 1)  # fused: complex and double
    name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi)
    )
    pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    capsules = [c for k, c in cython_special.__pyx_capi__.items() if k.endswith("erfcx")]
    double = [c for c in capsules if name(c) == b"double (double, int __pyx_skip_dispatch)"]
    assert address == pointer(double[0], name(double[0]))
    call = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int)(address)
    assert call(1.5, 0) == sp.erfcx(1.5)
    with pytest.raises(LookupError, match="no_such_function"):
        special.function_address("no_such_function", 1)
    with pytest.raises(LookupError, match=r"cython_special\.j0 .*it has 'double \(double"):
        special.function_address("j0", 2)
    assert not special.SciPyFunction("no_such_function", 1).available()
