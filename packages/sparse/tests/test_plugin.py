"""opgraph-sparse as a plugin: listed by ``python -m opgraph plugins``, reached as
``opgraph.sparse`` (and Theano's submodule paths), and working by ``perform`` alone in an
interpreter where opgraph-backend-c (and opgraph-optimizers) cannot be imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import scipy.sparse as sp

import opgraph
from opgraph.graph.basic import as_variable
from opgraph.plugins import get_plugin_manager


def run_python(args: list[str], env_extra: dict[str, str] | None = None) -> str:
    """Run ``python <args>`` in a fresh interpreter; its stdout (asserting success)."""
    env = {**os.environ, **(env_extra or {})}
    env.pop("OPGRAPH_FLAGS", None)  # e.g. linker=c from a tests_modes run
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return proc.stdout


# -- listed as a plugin ----------------------------------------------------------------------


def test_the_plugins_command_lists_the_sparse_plugin() -> None:
    out = run_python(["-m", "opgraph", "plugins"])
    assert "sparse  [loaded]  opgraph-sparse" in out
    section = out[out.index("sparse  [loaded]") :]
    assert "opgraph_sparse.plugin" in section
    assert "opgraph.sparse -> opgraph_sparse.api" in section
    assert "local_csm_properties_csm" in section
    for hook in (
        "opgraph_as_variable",
        "opgraph_c_kernels",
        "opgraph_namespaces",
        "opgraph_register_rewrites",
        "opgraph_shared_constructor",
    ):
        assert hook in section


def test_the_plugins_command_json_describes_the_contributions() -> None:
    data = json.loads(run_python(["-m", "opgraph", "plugins", "--json"]))
    (entry,) = [p for p in data["plugins"] if p["name"] == "sparse"]
    assert entry["status"] == "loaded"
    assert entry["distribution"] == "opgraph-sparse"
    assert entry["module"] == "opgraph_sparse.plugin"
    assert entry["source"] == "entry point"
    assert entry["namespaces"] == {"opgraph.sparse": "opgraph_sparse.api"}
    assert set(entry["hooks"]) >= {
        "opgraph_as_variable",
        "opgraph_c_kernels",
        "opgraph_namespaces",
        "opgraph_register_rewrites",
        "opgraph_shared_constructor",
    }
    rewrites = set(entry["rewrites"])
    # the rewrites the package documents: csm_properties(CSM) folding, no dense round
    # trip, dot + add into usmm
    assert "canonicalize/local_csm_properties_csm" in rewrites
    assert "canonicalize/local_dense_round_trip" in rewrites
    assert any("usmm" in name for name in rewrites)


def test_the_plugin_is_registered_in_this_process() -> None:
    pm = get_plugin_manager()
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert "sparse" in names


# -- the namespace ---------------------------------------------------------------------------


def test_opgraph_sparse_is_the_api_module() -> None:
    import opgraph_sparse.api

    assert opgraph.sparse is opgraph_sparse.api
    from opgraph import sparse

    assert sparse is opgraph_sparse.api
    assert sparse.SparseType.__module__ == "opgraph_sparse.type"


def test_theano_submodule_paths_import() -> None:
    import opgraph.sparse.basic
    import opgraph.sparse.sharedvar
    import opgraph.sparse.type
    from opgraph.sparse.basic import CSM, csm_properties, dense_from_sparse
    from opgraph.sparse.sharedvar import SparseTensorSharedVariable
    from opgraph.sparse.type import SparseType

    assert CSM is opgraph.sparse.CSM
    assert csm_properties is opgraph.sparse.csm_properties
    assert dense_from_sparse is opgraph.sparse.dense_from_sparse
    assert SparseType is opgraph.sparse.SparseType
    assert SparseTensorSharedVariable is opgraph.sparse.SparseTensorSharedVariable
    # theano.sparse.basic held every Op of the package, the later ones included
    assert opgraph.sparse.basic.structured_dot is opgraph.sparse.structured_dot
    assert opgraph.sparse.basic.transpose is opgraph.sparse.transpose


def test_theano_submodule_opt_imports() -> None:
    import opgraph.sparse.opt

    assert opgraph.sparse.opt.__name__ in ("opgraph.sparse.opt", "opgraph_sparse.api.opt")


def test_hooks_turn_scipy_matrices_into_sparse_variables() -> None:
    value = sp.csr_matrix(np.eye(3))
    shared = opgraph.shared(value)
    assert opgraph.sparse.is_sparse(shared.get_value(borrow=True))
    assert isinstance(shared.type, opgraph.sparse.SparseType)
    c = as_variable(value)  # core's converter asks the plugins first
    assert isinstance(c, opgraph.sparse.SparseConstant)
    np.testing.assert_array_equal(c.data.toarray(), np.eye(3))


# -- without backend-c -----------------------------------------------------------------------

#: Run in the child: hide backend-c and the optimizers, load only the sparse plugin, compile a
#: structured dot and its gradient, compare with scipy.
WITHOUT_C = textwrap.dedent(
    """\
    import sys, warnings
    for name in ("opgraph_c", "opgraph_optimizers"):
        sys.modules[name] = None  # import raises ModuleNotFoundError, as if not installed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import opgraph
        import opgraph.tensor as T
        from opgraph import sparse
        import numpy as np
        import scipy.sparse as sp

        rng = np.random.default_rng(0)
        a = sp.random(30, 20, density=0.2, format="csr", random_state=1)
        b = rng.standard_normal((20, 5))
        x = sparse.csr_matrix("x", dtype="float64")
        y = T.dmatrix("y")
        z = sparse.structured_dot(x, y)
        gx, gy = opgraph.grad(z.sum(), [x, y])
        f = opgraph.function([x, y], [z, gx, gy])
        out, g_x, g_y = f(a, b)
        ones = np.ones((30, 5))
        np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g_y, a.T @ ones, rtol=1e-12, atol=1e-12)
        expected_gx = (ones @ b.T) * (a.toarray() != 0)  # structured: x's pattern only
        assert sp.isspmatrix_csr(g_x), type(g_x)
        np.testing.assert_allclose(g_x.toarray(), expected_gx, rtol=1e-12, atol=1e-12)
        # a shared matrix and a basic op, by perform too
        s = opgraph.shared(a, name="s")
        h = opgraph.function([y], sparse.mul_s_d(s, T.constant(2.0)).toarray() + 0 * y.sum())
        np.testing.assert_allclose(h(b), 2 * a.toarray())
    bad = [f"{type(w.message).__name__}: {w.message}" for w in caught
           if type(w.message).__name__ == "PluginWarning"]
    assert not bad, bad
    assert "opgraph_c" not in [m for m in sys.modules if sys.modules[m] is not None]
    assert not any(m.startswith("opgraph_sparse.kernels.") for m in sys.modules), [
        m for m in sys.modules if m.startswith("opgraph_sparse.kernels")]
    print("linker", type(f.maker.linker).__name__)
    print("ok")
    """
)


def test_the_package_works_by_perform_without_backend_c() -> None:
    out = run_python(
        ["-c", WITHOUT_C],
        {
            "OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1",
            "OPGRAPH_PLUGINS": "sparse",
            "OPGRAPH_STRICT_PLUGINS": "1",
        },
    )
    assert "linker VMLinker" in out
    assert out.rstrip().endswith("ok")
