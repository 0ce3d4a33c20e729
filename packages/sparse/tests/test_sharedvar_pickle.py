"""Sparse shared variables (``opgraph.shared(scipy_matrix)``) and pickling of sparse graphs.

A shared csr/csc matrix keeps its value between calls, converts what ``set_value`` is given
through its Type (refusing a dense value and keeping the old one), and is updated by
functions. Sparse variables, constants, graphs, shared variables and compiled functions
pickle; a compiled function loaded in a fresh interpreter gives the same result.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Constant
from opgraph_sparse.sharedvar import SparseTensorSharedVariable
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


def matrix(fmt: str = "csr", dtype: str = "float64") -> sp.spmatrix:
    """A 3x4 matrix with four stored values."""
    dense = np.array([[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 4, 0]], dtype=dtype)
    return SparseType.format_cls[fmt](dense)


# -- the shared variable ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_shared_of_a_scipy_matrix_is_a_sparse_shared_variable(fmt: str, dtype: str) -> None:
    value = matrix(fmt, dtype)
    s = opgraph.shared(value, name="s")
    assert isinstance(s, SparseTensorSharedVariable)
    assert s.type == SparseType(fmt, dtype)
    assert s.name == "s"
    assert str(s) == "s"
    assert str(opgraph.shared(value)) == f"<Sparse[{dtype}, {fmt}]>"  # as Theano 1.0.5
    got = s.get_value()
    assert isinstance(got, SparseType.format_cls[fmt])
    np.testing.assert_array_equal(got.toarray(), value.toarray())
    # the sparse variable's methods work on it
    assert s.toarray().type.ndim == 2
    assert s.format == fmt
    assert s.dtype == dtype


def test_shared_copies_unless_borrowed() -> None:
    value = matrix()
    copied = opgraph.shared(value)
    value.data[0] = 100.0
    assert copied.get_value()[0, 1] == 1.0
    borrowed = opgraph.shared(value, borrow=True)
    assert borrowed.get_value(borrow=True) is value
    got = borrowed.get_value()  # a copy
    got.data[0] = -1.0
    assert value.data[0] == 100.0


def test_get_value_and_set_value_with_borrow() -> None:
    s = opgraph.shared(matrix())
    new = matrix() * 2
    s.set_value(new, borrow=True)
    assert s.get_value(borrow=True) is new
    other = matrix() * 3
    s.set_value(other)
    assert s.get_value(borrow=True) is not other
    other.data[:] = 0
    np.testing.assert_array_equal(s.get_value().toarray(), (matrix() * 3).toarray())


@pytest.mark.parametrize("fmt", FORMATS)
def test_set_value_converts_another_format(fmt: str) -> None:
    s = opgraph.shared(matrix(fmt))
    other = "csc" if fmt == "csr" else "csr"
    s.set_value(matrix(other) * 5)
    stored = s.get_value(borrow=True)
    assert isinstance(stored, SparseType.format_cls[fmt])
    np.testing.assert_array_equal(stored.toarray(), (matrix() * 5).toarray())
    s.set_value(matrix(fmt, "int32"))  # a dtype that casts safely
    assert s.get_value(borrow=True).dtype == np.float64


def test_set_value_refuses_a_dense_value_and_keeps_the_old_one() -> None:
    s = opgraph.shared(matrix(), name="weights")
    with pytest.raises(TypeError, match=r"cannot set the value of shared variable weights") as info:
        s.set_value(np.ones(3))
    assert "dense values are not converted implicitly" in str(info.value)
    assert "Its value was not changed" in str(info.value)
    np.testing.assert_array_equal(s.get_value().toarray(), matrix().toarray())
    with pytest.raises(TypeError, match="may lose precision"):
        s.set_value(matrix().astype("complex128"))
    np.testing.assert_array_equal(s.get_value().toarray(), matrix().toarray())


def test_strict_shared_variable_refuses_any_conversion() -> None:
    s = opgraph.shared(matrix("csr"), strict=True)
    with pytest.raises(TypeError, match="strict"):
        s.set_value(matrix("csc"))
    with pytest.raises(TypeError, match="strict"):
        s.set_value(matrix("csr", "float32"))
    s.set_value(matrix("csr") * 2)
    np.testing.assert_array_equal(s.get_value().toarray(), (matrix() * 2).toarray())


def test_allow_downcast() -> None:
    s = opgraph.shared(matrix("csr", "float32"))
    with pytest.raises(TypeError, match="may lose precision"):
        s.set_value(matrix("csr", "float64"))
    loose = opgraph.shared(matrix("csr", "float32"), allow_downcast=True)
    loose.set_value(matrix("csr", "float64") * 0.5)
    assert loose.get_value(borrow=True).dtype == np.float32


def test_sparse_shared_with_a_format() -> None:
    s = sparse.shared(matrix("csr"), name="s", format="csc")
    assert s.type == SparseType("csc", "float64")
    assert isinstance(s.get_value(borrow=True), sp.csc_matrix)
    coo = sparse.shared(matrix("csr").tocoo())
    assert coo.type == SparseType("csr", "float64")
    with pytest.raises(TypeError, match=r"needs a scipy\.sparse matrix"):
        sparse.shared(np.eye(2))


def test_a_dense_array_still_makes_a_tensor_shared_variable() -> None:
    d = opgraph.shared(np.eye(2))
    assert not isinstance(d, SparseTensorSharedVariable)
    assert d.type.ndim == 2


# -- updates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_function_updates_a_sparse_shared_variable(fmt: str, mode: str) -> None:
    s = opgraph.shared(matrix(fmt), name="s")
    k = T.dscalar("k")
    f = opgraph.function(
        [k], s.toarray().sum(), updates=[(s, sparse.mul_s_d(s, k))], mode=MODES[mode]
    )
    assert f(2.0) == pytest.approx(10.0)  # the value before the update
    assert f(0.5) == pytest.approx(20.0)
    stored = s.get_value(borrow=True)
    assert isinstance(stored, SparseType.format_cls[fmt])
    np.testing.assert_allclose(stored.toarray(), matrix().toarray())
    s.set_value(matrix(fmt) * 3)
    assert f(1.0) == pytest.approx(30.0)


def test_a_function_reads_a_shared_matrix_as_an_implicit_input() -> None:
    s = opgraph.shared(matrix("csc"))
    y = T.dmatrix("y")
    f = opgraph.function([y], sparse.mul_s_d(s, y))
    yv = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(f(yv).toarray(), matrix().multiply(yv).toarray())
    s.set_value(matrix("csc") * 2)
    np.testing.assert_array_equal(f(yv).toarray(), 2 * matrix().multiply(yv).toarray())


def test_an_update_of_another_type_is_refused() -> None:
    s = opgraph.shared(matrix("csr"), name="s")
    x = sparse.csc_matrix("x")
    with pytest.raises(TypeError, match=r"s"):
        opgraph.function([x], [], updates=[(s, x)])
    np.testing.assert_array_equal(s.get_value().toarray(), matrix().toarray())


# -- pickling --------------------------------------------------------------------------------


def test_pickle_sparse_variables_constants_and_types() -> None:
    x = sparse.csr_matrix("x", dtype="float32")
    x2 = pickle.loads(pickle.dumps(x))
    assert x2.type == x.type
    assert x2.name == "x"
    assert isinstance(x2, sparse.SparseVariable)
    c = sparse.constant(matrix("csc"))
    c2 = pickle.loads(pickle.dumps(c))
    assert isinstance(c2, sparse.SparseConstant)
    assert c2.type == c.type
    assert c2.signature() == c.signature()
    np.testing.assert_array_equal(c2.data.toarray(), matrix().toarray())


@pytest.mark.parametrize("fmt", FORMATS)
def test_pickle_a_graph_and_run_it(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    y = T.dmatrix("y")
    c = sparse.constant(matrix(fmt))
    out = sparse.dense_from_sparse(sparse.mul_s_d(sparse.mul_s_d(x, y), T.constant(2.0)))
    out2 = sparse.dense_from_sparse(sparse.cast(c, "float32"))
    x_, y_, o, o2 = pickle.loads(pickle.dumps([x, y, out, out2]))
    assert [type(n.op) for n in (o.owner, o.owner.inputs[0].owner)] == [
        sparse.DenseFromSparse,
        sparse.MulSD,
    ]
    f = opgraph.function([x_, y_], [o, o2])
    yv = np.arange(12.0).reshape(3, 4)
    r, r2 = f(matrix(fmt), yv)
    np.testing.assert_array_equal(r, 2 * matrix().multiply(yv).toarray())
    np.testing.assert_array_equal(r2, matrix().toarray().astype("float32"))
    consts = [v for v in o2.owner.inputs[0].owner.inputs if isinstance(v, Constant)]
    assert isinstance(consts[0], sparse.SparseConstant)


@pytest.mark.parametrize("fmt", FORMATS)
def test_pickle_a_sparse_shared_variable(fmt: str) -> None:
    s = opgraph.shared(matrix(fmt, "float32"), name="w", strict=True)
    s2 = pickle.loads(pickle.dumps(s))
    assert isinstance(s2, SparseTensorSharedVariable)
    assert s2.type == s.type
    assert s2.name == "w"
    np.testing.assert_array_equal(s2.get_value().toarray(), s.get_value().toarray())
    with pytest.raises(TypeError, match="strict"):
        s2.set_value(matrix(fmt, "float64"))  # strictness survives


SCRIPT = """\
import pickle, sys
import numpy as np
with open(sys.argv[1], "rb") as fh:
    f, s = pickle.load(fh)
y = np.arange(12.0).reshape(3, 4)
first = f(y)
second = f(y)
np.save(sys.argv[2], np.stack([first.toarray(), second.toarray(), s.get_value().toarray()]))
print(type(first).__name__, type(s.get_value()).__name__)
"""


@pytest.mark.parametrize("mode", ["default", "py"])
def test_a_pickled_function_runs_in_a_fresh_interpreter(mode: str, tmp_path: Path) -> None:
    s = opgraph.shared(matrix("csr"), name="s")
    y = T.dmatrix("y")
    c = sparse.constant(matrix("csr") * 10)
    out = sparse.mul_s_d(sparse.mul_s_d(s, y), sparse.dense_from_sparse(c))
    f = opgraph.function(
        [y], out, updates=[(s, sparse.mul_s_d(s, T.constant(2.0)))], mode=MODES[mode]
    )
    path = tmp_path / "f.pkl"
    path.write_bytes(pickle.dumps((f, s)))
    yv = np.arange(12.0).reshape(3, 4)
    expected = [f(yv).toarray(), f(yv).toarray(), s.get_value().toarray()]
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), str(tmp_path / "out.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-2:] == ["csr_matrix", "csr_matrix"]
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got, np.stack(expected))


def test_a_pickled_debug_mode_function_with_a_shared_matrix() -> None:
    s = opgraph.shared(matrix("csc"), name="s")
    k = T.dscalar("k")
    f = opgraph.function(
        [k], sparse.mul_s_d(s, k), updates=[(s, sparse.mul_s_d(s, k))], mode="DEBUG_MODE"
    )
    f2 = pickle.loads(pickle.dumps(f))
    r = f2(3.0)
    np.testing.assert_array_equal(r.toarray(), 3 * matrix().toarray())
    # the copy updates its own shared value, not the original's
    np.testing.assert_array_equal(s.get_value().toarray(), matrix().toarray())
    np.testing.assert_array_equal(f(2.0).toarray(), 2 * matrix().toarray())
    np.testing.assert_array_equal(s.get_value().toarray(), 2 * matrix().toarray())
