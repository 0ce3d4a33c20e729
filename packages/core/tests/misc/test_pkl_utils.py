"""``opgraph.misc.pkl_utils``: Theano's zip pickles (dump/load), StripPickler, CompatUnpickler.

Round trips load in a fresh Python process, so that nothing is found in this process's
memory; a file written by Theano 1.0.5's ``dump`` is embedded below and must load.
"""

from __future__ import annotations

import base64
import io
import pickle
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import opgraph
from opgraph import tensor as T
from opgraph.misc import pkl_utils
from opgraph.misc.pkl_utils import CompatUnpickler, StripPickler, dump, load

#: Written by Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=)::
#:
#:     W = theano.shared(np.arange(6.).reshape(2, 3), name='W')
#:     b = theano.shared(np.float32(1.5), name='b')
#:     n = theano.shared(np.array([1, 2], dtype='int32'))
#:     dump((W, b, n, np.array(2)), f)
THEANO_SHARED_ZIP = base64.b64decode(
    "UEsDBBQAAAAIAAtBel3wzTtGVwAAALAAAAABAAAAV5vsF+obEMnIUMZQrZ6SWpxcpG6loG6TZqGuo6Cell9UUpSYF59flJIK"
    "EndLzClOBYoXZyQWpAL5GkY6CsaaOgq1CmQDLgYU8MEeynCAUBxQWgBKizgAAFBLAwQUAAAACAALQXpdJRPmXUYAAACEAAAA"
    "AQAAAGKb7BfqGxDJyFDGUK2eklqcXKRupaBuk2airqOgnpZfVFKUmBefX5SSChJ3S8wpTgWKF2ckFqQC+RqaOgq1ChQBLgaG"
    "A/YAUEsDBBQAAAAIAAtBel0L+aotSwAAAIgAAAAHAAAAYXJyYXlfMJvsF+obEMnIUMZQrZ6SWpxcpG6loG6TaaKuo6Cell9U"
    "UpSYF59flJIKEndLzClOBYoXZyQWpAL5GkY6mjoKtQoUAC5GBgYGJiAGAFBLAwQUAAAACAALQXpdR7YQJEYAAACIAAAABwAA"
    "AGFycmF5XzGb7BfqGxDJyFDGUK2eklqcXKRupaBuk2mhrqOgnpZfVFKUmBefX5SSChJ3S8wpTgWKF2ckFqQC+RqaOgq1ChQB"
    "LiYGCAAAUEsDBBQAAAAIAAtBel0SFIcg9AEAAJgDAAADAAAAcGtslZHPaxNBFMfTJtumDTZaIkUieBA1QVisTYuHUgQPgoGF"
    "2mBPEt7uTvIWNzthdrY1B0EP/lh4nvr8e3V2soltxUNnYXg/ZmY/3+/7XPv1s1qxq0M7GgUk0tUiSaVyUwQlwjNQTK2BLZ3Y"
    "yjtQEfix4AvufuFP3KGqhjHT7fL6WI7cTEdxyrSZBgp0gFMIF6fJ0QoCwe/N16H6YapVlIyPuF8zyUSGWSyO2NMMkPpU07Op"
    "YNq+CjYvbs6ZBkWyJHHCeXN9FEvQBz2mW76SEAaQasuc59+YaglMBHvUSLLJdDYs7zg248UbF0yroxec//jOb7nTr9LKIXue"
    "9+a3WXbrVzT71EinoFIxHCujMc98cuR5IpR53YmSUHxkD9u0csq0AZmWQ/tnWrPxnikGMtEQFReoecm/OEo+mO6rZXehEO/g"
    "XWxjh9ZTLRWMCyNpIwlBKZi5p3wMVFcCQpnEM85prbA30CbagjiW58PQ0BVmsJf5mY8Vap0EEMP/RosO1m2EDTsw3OrXsFmO"
    "x7C0ymM7peN7zxnvdbHt4X18YPzr/fUPH/7rHj4yjuFjD59Yl3zGbulNj/EpukvNL43m17h7WatvtGIvx/0cD+ZiVm/KbCY0"
    "J86/8pI5ugmztwTevwo8KHoFb3PBa/fhs+vU1w/s8rFm9w9QSwECFAMUAAAACAALQXpd8M07RlcAAACwAAAAAQAAAAAAAAAA"
    "AAAAgIEAAAAAV1BLAQIUAxQAAAAIAAtBel0lE+ZdRgAAAIQAAAABAAAAAAAAAAAAAACAgXYAAABiUEsBAhQDFAAAAAgAC0F6"
    "XQv5qi1LAAAAiAAAAAcAAAAAAAAAAAAAAICB2wAAAGFycmF5XzBQSwECFAMUAAAACAALQXpdR7YQJEYAAACIAAAABwAAAAAA"
    "AAAAAAAAgIFLAQAAYXJyYXlfMVBLAQIUAxQAAAAIAAtBel0SFIcg9AEAAJgDAAADAAAAAAAAAAAAAACAgbYBAABwa2xQSwUG"
    "AAAAAAUABQD5AAAAywMAAAAA"
)


def run_fresh(code: str, cwd) -> str:
    """Run ``code`` in a new interpreter; return its stdout (fails the test on an error)."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_zip_layout_is_theanos(tmp_path):
    foo_1 = opgraph.shared(0, name="foo")
    foo_2 = opgraph.shared(1, name="foo")
    path = tmp_path / "model.zip"
    with open(path, "wb") as f:
        dump((foo_1, foo_2, np.array(2)), f)
    # Theano's docstring: keys ['foo', 'foo_2', 'array_0', 'pkl'], np.load(...)['foo'] == 0.
    with np.load(path) as npz:
        assert sorted(npz.keys()) == ["array_0", "foo", "foo_2", "pkl"]
        assert npz["foo"] == 0 and npz["foo_2"] == 1 and npz["array_0"] == 2
    with open(path, "rb") as f:
        a, b, arr = load(f)
    assert a.get_value() == 0 and b.get_value() == 1 and arr == 2
    assert a.name == b.name == "foo"


def test_shared_variables_round_trip_in_a_fresh_process(tmp_path):
    W = opgraph.shared(np.arange(6.0).reshape(2, 3), name="W")
    b = opgraph.shared(np.float32(0.5), name="b")
    unnamed = opgraph.shared(np.array([1, 2, 3], dtype="int16"))
    big = np.random.default_rng(0).standard_normal((50, 40))
    with open(tmp_path / "params.zip", "wb") as f:
        dump({"W": W, "b": b, "u": unnamed, "big": big, "again": big}, f)
    with zipfile.ZipFile(tmp_path / "params.zip") as z:
        assert sorted(z.namelist()) == ["W", "array_0", "array_1", "b", "pkl"]
    out = run_fresh(
        """
        import numpy as np
        from opgraph.misc.pkl_utils import load
        with open("params.zip", "rb") as f:
            d = load(f)
        W, b, u = d["W"], d["b"], d["u"]
        print(type(W).__name__, W.name, W.type, W.get_value().tolist())
        print(b.type, b.get_value(), u.type, u.get_value().tolist())
        print(d["big"] is d["again"], float(d["big"].sum()))
        print(((W * 2).sum() + b).eval())
        """,
        tmp_path,
    )
    lines = out.splitlines()
    assert lines[0] == (
        "TensorSharedVariable W TensorType(float64, matrix) [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"
    )
    assert lines[1] == "TensorType(float32, scalar) 0.5 TensorType(int16, vector) [1, 2, 3]"
    assert lines[2] == f"True {float(big.sum())}"
    assert float(lines[3]) == 30.5


def test_compiled_function_round_trip_in_a_fresh_process(tmp_path):
    x = T.dvector("x")
    w = opgraph.shared(np.array([1.0, 2.0, 3.0]), name="w")
    f = opgraph.function([x], (x * w).sum(), updates=[(w, w + 1)], name="train")
    assert f(np.ones(3)) == 6.0  # w is now [2, 3, 4]
    with open(tmp_path / "f.zip", "wb") as fh:
        dump((f, w), fh)
    out = run_fresh(
        """
        import numpy as np
        from opgraph.misc.pkl_utils import load
        with open("f.zip", "rb") as fh:
            f, w = load(fh)
        print(f(np.ones(3)), f(np.ones(3)), w.get_value().tolist(), f.name)
        """,
        tmp_path,
    )
    # The loaded function and variable share the container: the updates reach w.
    assert out.split() == ["9.0", "12.0", "[4.0,", "5.0,", "6.0]", "train"]


def test_graph_round_trip_in_a_fresh_process(tmp_path):
    x = T.dmatrix("x")
    y = T.exp(x).sum(axis=1) * 2
    with open(tmp_path / "g.zip", "wb") as fh:
        dump({"x": x, "y": y}, fh)
    out = run_fresh(
        """
        import numpy as np
        import opgraph
        from opgraph.misc.pkl_utils import load
        with open("g.zip", "rb") as fh:
            g = load(fh)
        f = opgraph.function([g["x"]], g["y"])
        print(f(np.zeros((2, 3))).tolist())
        """,
        tmp_path,
    )
    assert out.strip() == "[6.0, 6.0]"


def test_files_written_by_theano_1_0_5_load():
    W, b, n, arr = load(io.BytesIO(THEANO_SHARED_ZIP))
    assert isinstance(W, opgraph.tensor.sharedvar.TensorSharedVariable)
    assert W.name == "W" and str(W.type) == "TensorType(float64, matrix)"
    np.testing.assert_array_equal(W.get_value(), np.arange(6.0).reshape(2, 3))
    assert str(b.type) == "TensorType(float32, scalar)" and b.get_value() == np.float32(1.5)
    assert str(n.type) == "TensorType(int32, vector)" and n.get_value().tolist() == [1, 2]
    assert n.name is None and arr == 2
    # They work as opgraph shared variables: in graphs, with updates.
    v = T.dvector("v")
    f = opgraph.function([v], T.dot(W, v) + b, updates=[(b, b + 1)])
    np.testing.assert_allclose(f(np.ones(3)), [4.5, 13.5])
    assert b.get_value() == np.float32(2.5)


def test_theano_internals_raise_a_clear_error():
    class Fake:
        pass

    Fake.__module__ = "theano.gof.optdb"
    Fake.__qualname__ = Fake.__name__ = "Query"
    sys.modules.setdefault("theano", type(sys)("theano"))
    sys.modules.setdefault("theano.gof", type(sys)("theano.gof"))
    mod = sys.modules.setdefault("theano.gof.optdb", type(sys)("theano.gof.optdb"))
    mod.Query = Fake
    try:
        data = pickle.dumps(Fake())
    finally:
        for name in ("theano.gof.optdb", "theano.gof", "theano"):
            del sys.modules[name]
    with pytest.raises(pickle.UnpicklingError, match=r"theano\.gof\.optdb\.Query"):
        CompatUnpickler(io.BytesIO(data)).load()
    # A Theano class that exists in opgraph at the same path maps directly.
    assert pkl_utils.map_theano_class("theano.tensor.type", "TensorType") is not None
    assert pkl_utils.map_theano_class("theano.compile.io", "In") is opgraph.compile.In


def test_dump_refuses_what_theano_refuses(tmp_path):
    with pytest.raises(ValueError, match="name `pkl`"):
        dump(opgraph.shared(1.0, name="pkl"), io.BytesIO())
    strict_ids = lambda z: pkl_utils.PersistentSharedVariableID(z, allow_unnamed=False)  # noqa: E731
    with pytest.raises(ValueError, match="unnamed shared variable"):
        dump(opgraph.shared(1.0), io.BytesIO(), persistent_id=strict_ids)
    no_dups = lambda z: pkl_utils.PersistentSharedVariableID(z, allow_duplicates=False)  # noqa: E731
    pair = (opgraph.shared(1.0, name="a"), opgraph.shared(2.0, name="a"))
    with pytest.raises(ValueError, match="multiple shared variables"):
        dump(pair, io.BytesIO(), persistent_id=no_dups)


def test_plain_arrays_with_ndarray_ids(tmp_path):
    arrays = [np.arange(3), np.eye(2, dtype="float32")]
    buf = io.BytesIO()
    dump(arrays, buf, persistent_id=pkl_utils.PersistentNdarrayID)
    buf.seek(0)
    with zipfile.ZipFile(buf) as z:
        assert sorted(z.namelist()) == ["array_0", "array_1", "pkl"]
    buf.seek(0)
    got = load(buf)
    np.testing.assert_array_equal(got[0], arrays[0])
    assert got[1].dtype == np.float32


def test_gpu_entries_need_the_flag():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("pkl", pickle.dumps(None))
        inner = io.BytesIO()
        pickle.dump("dev0", inner, 2)
        np.lib.format.write_array(inner, np.arange(3.0))
        z.writestr("array_0", inner.getvalue())
    with zipfile.ZipFile(buf) as z:
        loader = pkl_utils.PersistentNdarrayLoad(z)
        with pytest.raises(ImportError, match="unpickle_gpu_on_cpu"):
            loader("gpuarray.array_0")
        with (
            opgraph.change_flags(experimental__unpickle_gpu_on_cpu=True),
            pytest.warns(UserWarning, match="GpuArray as numpy"),
        ):
            np.testing.assert_array_equal(loader("gpuarray.array_0"), [0.0, 1.0, 2.0])


def test_strip_pickler_strips_traces_and_test_values_but_not_the_graph():
    x = T.dvector("x")
    x.tag.test_value = np.ones(2)
    y = (x * 2).sum()
    assert hasattr(y.tag, "trace") and hasattr(x.tag, "test_value")
    plain, stripped = io.BytesIO(), io.BytesIO()
    pickle.Pickler(plain, protocol=-1).dump(y)
    StripPickler(stripped, protocol=-1, extra_tag_to_remove=["note"]).dump(y)
    assert len(stripped.getvalue()) < len(plain.getvalue())
    y2 = pickle.loads(stripped.getvalue())
    inputs = [v for v in opgraph.graph.traversal.graph_inputs([y2]) if v.name == "x"]
    assert not hasattr(y2.tag, "trace") and not hasattr(inputs[0].tag, "test_value")
    assert opgraph.function(inputs, y2)(np.array([1.0, 2.0])) == 6.0
    # The pickled objects keep their tags (Theano's StripPickler deleted them).
    assert hasattr(y.tag, "trace") and hasattr(x.tag, "test_value")


def test_compat_unpickler_reads_ordinary_and_python2_pickles():
    data = pickle.dumps({"a": np.arange(4)}, protocol=2)
    got = CompatUnpickler(io.BytesIO(data), encoding="latin1").load()
    np.testing.assert_array_equal(got["a"], np.arange(4))
    # A Python 2 pickle of an ndarray: its raw bytes are a str, which latin1 turns back.
    py2 = (
        b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02K\x00\x85U"
        b"\x01b\x87Rq\x03(K\x01K\x02\x85cnumpy\ndtype\nq\x04U\x02i1K\x00K\x01\x87Rq\x05(K\x03U"
        b"\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89U\x02\x01\x02tb."
    )
    arr = CompatUnpickler(io.BytesIO(py2), encoding="latin1").load()
    assert arr.dtype == np.int8 and arr.tolist() == [1, 2]
