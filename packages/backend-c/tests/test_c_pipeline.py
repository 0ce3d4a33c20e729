"""One node pipeline: each node resolved once, one fall-back warning, comment-free cache
keys, warnings failing a build, backend-c's own ``openmp`` flag."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import add_core_flags, config
from opgraph.configparser import Config
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import Kernel, KernelFallbackWarning, KernelRegistry
from opgraph.testing import assert_allclose
from opgraph_c import PERFORM, CModule
from opgraph_c.cache import KernelCache, get_cache, without_comments
from opgraph_c.compiler import CompileError
from opgraph_c.flags import declare_flags
from opgraph_c.kernels.reduction import careduce_c
from opgraph_c.pipeline import NodePipeline, Resolution, pipeline
from opgraph_c.registry import get_registry

# ---------------------------------------------------------------------- one resolution


def test_each_node_is_resolved_once(
    monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator
) -> None:
    """Compiling a function asks each node's kernel entry once: the batch compile and the
    thunk share the resolution (elementwise, reduction, BLAS and structural nodes)."""
    calls: Counter[Apply] = Counter()
    resolve = pipeline.resolve

    def counting(kernel: Kernel, node: Apply) -> Resolution:
        calls[node] += 1
        return resolve(kernel, node)

    monkeypatch.setattr(pipeline, "resolve", counting)
    x, w = T.dmatrix("x"), T.dmatrix("w")
    out = (T.tanh(T.dot(x, w)) + 1).sum(axis=0) * x.shape[0]
    f = function([x, w], out, mode=Mode(linker="c", optimizer="fast_run"))
    nodes = f.maker.fgraph.toposort()
    with_kernel = [n for n in nodes if get_registry().lookup(n.op) is not None]
    assert len(with_kernel) >= 4
    assert {n: calls[n] for n in with_kernel} == dict.fromkeys(with_kernel, 1)
    assert set(calls) == set(with_kernel)
    xv, wv = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    assert_allclose(f(xv, wv), (np.tanh(xv @ wv) + 1).sum(axis=0) * 5)


def test_a_resolution_waits_for_its_own_thunk_only() -> None:
    """A node resolved by a batch compile is resolved again if its entry changed."""
    local = NodePipeline()
    registry = KernelRegistry("c", thunk_maker=local.make_thunk)
    x = T.dvector("x")
    node = T.exp(x).owner
    first = Kernel(type(node.op), lambda op, node: None, 1, "a", "c")
    second = Kernel(type(node.op), lambda op, node: None, 2, "b", "c")
    registry.register(type(node.op), first.impl, version=1, owner="a")
    local.precompile(registry, [node])
    assert local.resolutions == 1
    cells = {v: [None] for v in (*node.inputs, *node.outputs)}
    assert local.make_thunk(second, node, cells, None) is None  # other entry: resolved again
    assert local.resolutions == 2
    local.forget([node])


# ---------------------------------------------------------------------- one fall-back path


class NoCOp(Op):
    """x + 1, with no C kernel anywhere."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        output_storage[0][0] = inputs[0] + 1


class NoCForFloat32(NoCOp):
    """Its entry (below) has C for float64 only."""


def _only_float64(op: Op, node: Apply) -> Any:
    return PERFORM if node.inputs[0].type.dtype == "float64" else None


def test_every_fall_back_warns_once_with_the_registrys_text() -> None:
    """No entry, an entry without C for this node, and an Op like the last: one warning
    per Op class from the registry, saying which of the two it is, and the profile marks
    both nodes [py-fallback]."""
    registry = get_registry()
    registry.register(NoCForFloat32, _only_float64, version=1, owner="test")
    try:
        x = T.fvector("x")
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            f = function(
                [x],
                [NoCOp()(x), NoCForFloat32()(x)],
                mode=Mode(linker="c", optimizer="None"),
                profile=True,
            )
            function([x], NoCOp()(x) * 2, mode=Mode(linker="c", optimizer="None"))
        texts = [str(w.message) for w in record if issubclass(w.category, KernelFallbackWarning)]
        assert sorted(texts) == [
            "the c backend has no kernel for NoCOp (NoCOp); it runs NoCOp.perform "
            "instead (slower). The profile marks such nodes [py-fallback].\nHINT: register "
            "one with registry.register(NoCOp, impl, version=1) through the backend's hook, "
            "or say why perform is right with registry.register_perform(NoCOp, reason, "
            "owner=...).",
            f"the c backend's kernel for NoCForFloat32 ({_only_float64.__module__}."
            "_only_float64, from test) has no code for this NoCForFloat32 node (NoCForFloat32); it runs "
            "NoCForFloat32.perform instead (slower). The profile marks such nodes "
            "[py-fallback].\nHINT: its docstring lists the types and layouts it covers.",
        ]
        marked = sorted(type(n.op).__name__ for n in f.profile.py_fallback)
        assert marked == ["NoCForFloat32", "NoCOp"]
        assert_allclose(f(np.zeros(2, "float32"))[0], np.ones(2, "float32"))
    finally:
        registry.unregister(NoCForFloat32)


# ---------------------------------------------------------------------- comments and the cache


SOURCE = """\
# cython: language_level=3
# {comment}
cdef extern from *:
    \"\"\"
    #define OPG_STEP 1  /* {comment} */
    static long opg_next(long x) {{ return x + OPG_STEP; }}
    \"\"\"
    long opg_next(long x)

def compute(x):
    return opg_next(x) * {factor}
"""


def test_comments_do_not_key_the_cache(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    a = CModule("commented", SOURCE.format(comment="Op: first node", factor=1))
    b = CModule("commented", SOURCE.format(comment="Op: another node", factor=1))
    c = CModule("commented", SOURCE.format(comment="Op: first node", factor=2))
    assert cache.request(a).key == cache.request(b).key != cache.request(c).key
    assert cache.load(a).compute(1) == 2
    assert cache.load(b).compute(1) == 2 and cache.builds == 1
    kept = without_comments(SOURCE.format(comment="x", factor=1))
    assert "# cython: language_level=3" in kept and "#define OPG_STEP 1" in kept
    assert "/*" not in kept and "# x" not in kept


def test_reductions_differing_only_in_their_comments_share_one_module() -> None:
    """Sum over axis 0, axis 1 and all axes run the same C (the driver picks the view):
    three sources that name different nodes, one cache entry, one build."""
    x = T.dmatrix("x")
    nodes = [T.sum(x, axis=0).owner, T.sum(x, axis=1).owner, T.sum(x).owner]
    specs = [careduce_c(n.op, n) for n in nodes]
    assert len({s.source for s in specs}) == 3
    assert all("# Node:" in s.source for s in specs)
    kernel = get_registry().lookup(nodes[0].op)
    assert len({get_cache().request(s, kernel).key for s in specs}) == 1
    f = function([x], [T.sum(x, axis=0), T.sum(x, axis=1), T.sum(x)], mode=Mode(linker="c"))
    before = get_cache().builds
    g = function([x], [T.sum(x, axis=1), T.sum(x)], mode=Mode(linker="c"))
    assert get_cache().builds == before
    xv = np.arange(6.0).reshape(2, 3)
    for got, want in zip(f(xv) + g(xv), [xv.sum(0), xv.sum(1), xv.sum(), xv.sum(1), xv.sum()]):
        assert_allclose(got, want)


def test_the_reduction_body_is_included_not_embedded() -> None:
    x = T.dmatrix("x")
    node = T.sum(x, axis=0).owner
    source = careduce_c(node.op, node).source
    assert '#include "opgraph_c_reduce.h"' in source
    assert "opg_pairwise" not in source and "ctypedef struct" not in source
    assert "from opgraph_c.abi cimport opg_reduce_kernel" in source


# ---------------------------------------------------------------------- warnings fail a build


SLOPPY = """\
# cython: language_level=3
cdef extern from *:
    \"\"\"
    static long opg_sloppy(long x) { long unused_local; return x + 1; }
    \"\"\"
    long opg_sloppy(long x)

def compute(x):
    return opg_sloppy(x)
"""


def test_a_compiler_warning_fails_the_build_and_names_the_source(tmp_path: Path) -> None:
    """The tests build with ``c__werror`` (conftest): a warning is a clear CompileError
    naming the generated source, kept under failed/."""
    assert config.c__werror
    with pytest.raises(CompileError) as info:
        KernelCache(tmp_path).load(CModule("sloppy kernel", SLOPPY))
    message = str(info.value)
    assert "could not compile the C kernel for sloppy kernel" in message
    assert "unused_local" in message and "-Werror" in message
    (pyx,) = (tmp_path / "failed").glob("*/*.pyx")
    assert f"generated source: {pyx}" in message
    with config.change_flags(c__werror=False):  # users' builds: -Wall, warnings shown only
        assert KernelCache(tmp_path / "lenient").load(CModule("sloppy", SLOPPY)).compute(1) == 2


# ---------------------------------------------------------------------- threads and openmp


def test_every_threaded_kernel_takes_its_team_from_the_one_policy() -> None:
    from opgraph_c import _threads

    # the threshold counts elements; gemv and conv have their own limits (in multiply-adds)
    counted = {"elemwise": 1234, "reduce": 1234, "pool": 1234, "bn": 1234, "gemv": 0, "conv": 0}
    assert set(_threads.POLICY) == set(counted)
    with config.change_flags(openmp=True, c__openmp_threshold=1234):
        teams = {k: _threads.team_options(k) for k in counted}
    assert all(t["nthreads"] == _threads.thread_limit() for t in teams.values())
    assert {k: t["threshold"] for k, t in teams.items()} == counted
    assert all(t["adaptive"] for t in teams.values())
    with config.change_flags(openmp=False):
        assert all(_threads.team_options(k)["nthreads"] == 1 for k in _threads.POLICY)


def test_openmp_is_backend_cs_flag() -> None:
    core_only = Config("", ())
    add_core_flags(core_only)
    assert "openmp" not in core_only
    declare_flags(core_only)
    assert "openmp" in core_only and "OpenMP" in core_only.get_param("openmp").doc
    assert "openmp" in config  # backend-c is installed: its plugin declared it


def test_openmp_false_from_the_environment_turns_threads_off(tmp_path: Path) -> None:
    code = (
        "from opgraph.configdefaults import config\n"
        "import opgraph.tensor as T\n"
        "from opgraph.compile import Mode, function\n"
        "from opgraph_c._threads import team_options\n"
        "x = T.dvector('x')\n"
        "f = function([x], x + 1, mode=Mode(linker='c'))\n"
        "print(config.openmp, team_options('elemwise')['nthreads'], f([1.0])[0])\n"
    )
    env = {**os.environ, "OPGRAPH_FLAGS": "openmp=False", "OPGRAPH_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "1", "2.0"]
