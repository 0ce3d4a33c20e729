"""The compile cache: keys, corruption recovery, compile errors, processes sharing it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opgraph_c import CModule
from opgraph_c.cache import KernelCache
from opgraph_c.compiler import CompileError

TINY = """\
# cython: language_level=3
# Test module: compute(x) returns x + {value} (TOKEN keys it; a comment would not).
TOKEN = "{token}"
def compute(x):
    return x + {value}
"""


def tiny(token: str, value: int = 1) -> CModule:
    return CModule(f"tiny kernel {token}", TINY.format(token=token, value=value))


def only_entry(root: Path) -> Path:
    (entry,) = (root / "kernels").glob("*/*")
    return entry


def test_key_depends_on_source_and_version(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)

    class Entry:
        owner, version = "me", 1

    class Bumped:
        owner, version = "me", 2

    a = cache.request(tiny("a"), Entry()).key
    assert a == cache.request(tiny("a"), Entry()).key
    assert a != cache.request(tiny("b"), Entry()).key
    assert a != cache.request(tiny("a"), Bumped()).key


def test_build_once_then_hit_from_disk(tmp_path: Path) -> None:
    first = KernelCache(tmp_path)
    assert first.load(tiny("hit")).compute(1) == 2
    assert first.builds == 1
    again = KernelCache(tmp_path)  # a new process's view: nothing loaded in memory
    assert again.load(tiny("hit")).compute(1) == 2
    assert again.builds == 0
    manifest = json.loads((only_entry(tmp_path) / "manifest.json").read_text())
    assert manifest["name"] == "tiny kernel hit" and manifest["size"] > 0


@pytest.mark.parametrize("damage", ["truncate", "bad-json", "foreign-key", "no-module"])
def test_corrupt_entry_is_dropped_and_rebuilt(tmp_path: Path, damage: str) -> None:
    KernelCache(tmp_path).load(tiny(f"corrupt-{damage}"))
    entry = only_entry(tmp_path)
    manifest_path = entry / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    so = entry / manifest["so"]
    if damage == "truncate":  # a new file: the loaded module keeps its mapping of the old one
        data = so.read_bytes()
        so.unlink()
        so.write_bytes(data[:1000])
    elif damage == "bad-json":
        manifest_path.write_text("{not json")
    elif damage == "foreign-key":
        manifest["key"] = "0" * 64
        manifest_path.write_text(json.dumps(manifest))
    else:
        so.unlink()
    cache = KernelCache(tmp_path)
    assert cache.load(tiny(f"corrupt-{damage}")).compute(2) == 3
    assert cache.builds == 1
    assert KernelCache(tmp_path)._valid_entry(entry.name) is not None


def test_cython_error_names_the_source(tmp_path: Path) -> None:
    bad = CModule("broken cython", "def compute(x:\n    return x\n")
    with pytest.raises(CompileError) as info:
        KernelCache(tmp_path).load(bad)
    text = str(info.value)
    assert "broken cython" in text and ".pyx" in text and "Cython said" in text
    pyx = Path(text.split("generated source: ")[1].splitlines()[0])
    assert pyx.exists() and pyx.read_text().startswith("def compute(x:")


def test_c_compiler_error_shows_its_first_error_line(tmp_path: Path) -> None:
    source = (
        "cdef extern from *:\n"
        '    """\n'
        "    static int opg_broken(void) { return undeclared_name; }\n"
        '    """\n'
        "    int opg_broken()\n"
        "def compute(x):\n"
        "    return opg_broken()\n"
    )
    with pytest.raises(CompileError) as info:
        KernelCache(tmp_path).load(CModule("broken C", source))
    text = str(info.value)
    assert "undeclared_name" in text and "error" in text
    assert (tmp_path / "failed").is_dir()


def test_clear_and_prune(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    cache.load(tiny("keep"))
    cache.load(tiny("break"))
    assert len(cache.entries()) == 2
    broken = next(e for e in cache.entries() if e["name"] == "tiny kernel break")
    (Path(broken["path"]) / "manifest.json").write_text("{")
    assert cache.prune(max_age_days=30) == 1
    assert [e["name"] for e in cache.entries()] == ["tiny kernel keep"]
    assert cache.clear() == 1
    assert cache.entries() == []


CHILD = """
import sys, time
from opgraph_c import CModule
from opgraph_c.cache import KernelCache
root, token, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
source = "# cython: language_level=3\\nT = '{{}}'\\ndef compute(x):\\n    return x * 2\\n".format(token)
import opgraph.configdefaults  # load everything before the common start
from Cython.Compiler.Main import compile
while time.time() < start:
    time.sleep(0.005)
cache = KernelCache(root)
result = cache.load(CModule("shared " + token, source)).compute(21)
print(cache.builds, result)
"""


def _spawn(root: Path, token: str, start: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), token, str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_processes_compiling_the_same_kernel_build_it_once(tmp_path: Path) -> None:
    start = time.time() + 6.0  # every child has imported opgraph and Cython by then
    procs = [_spawn(tmp_path, "race", start) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(out.split())
    assert sorted(int(b) for b, _ in results) == [0, 0, 0, 1], results
    assert {r for _, r in results} == {"42"}
    late = _spawn(tmp_path, "race", 0)  # a later process: a pure cache hit
    out, err = late.communicate(timeout=120)
    assert out.split() == ["0", "42"], err


def test_a_process_killed_mid_compile_leaves_a_usable_cache(tmp_path: Path) -> None:
    victim = _spawn(tmp_path, "killed", 0)
    deadline = time.time() + 120
    while time.time() < deadline and not any((tmp_path / "tmp").glob("*/*.pyx")):
        time.sleep(0.01)
    victim.kill()
    victim.communicate()
    survivor = _spawn(tmp_path, "killed", 0)
    out, err = survivor.communicate(timeout=180)
    assert survivor.returncode == 0, err
    builds, result = out.split()
    assert result == "42" and int(builds) in (0, 1)  # 0 if the victim finished first


def test_progress_lines_when_several_kernels_build(run_python: Any, tmp_path: Path) -> None:
    proc = run_python(
        """
        import opgraph.tensor as T
        import opgraph_c.cache
        from opgraph.compile.function import function
        from opgraph.compile.mode import Mode
        opgraph_c.cache.PROGRESS_AFTER_S = 0.0  # the lines even on a machine this fast
        x = T.dvector("x")
        f = function([x], [T.exp(x) * 3, T.cos(x) - 7], mode=Mode(linker="c", optimizer="None"))
        print(f.fn.thunks[0].kernel.backend)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "opgraph_c: compiling 4 C kernels in " in proc.stderr
    assert "opgraph_c: compiled 4 C kernels in " in proc.stderr


GRAPHS_CHILD = """
import json, sys, time
import numpy as np
import opgraph.tensor as T
from opgraph.compile import Mode, function
from opgraph_c.cache import get_cache
start = float(sys.argv[1])
x = T.dvector("x")
y = T.fvector("y")
graphs = [
    ([x], T.exp(-x**2) * T.sin(x) + 0.5 * x),
    ([x], T.tanh(x) * 3 - T.log1p(x * x)),
    ([y], T.sqrt(abs(y)) + y**3),
]
while time.time() < start:
    time.sleep(0.005)
mode = Mode(linker="c", optimizer="fast_run")
fns = [function(ins, out, mode=mode) for ins, out in graphs]
v = np.linspace(-2, 2, 7)
print(get_cache().builds)
for f in fns:
    print(json.dumps(f(v.astype(f.maker.fgraph.inputs[0].type.dtype)).tolist()))
"""


def _expected_graph_values() -> list[Any]:
    v = np.linspace(-2, 2, 7)
    f = v.astype("float32")
    return [
        np.exp(-(v**2)) * np.sin(v) + 0.5 * v,
        np.tanh(v) * 3 - np.log1p(v * v),
        np.sqrt(np.abs(f)) + f**3,
    ]


def _spawn_graphs(root: Path, start: float) -> subprocess.Popen:
    env = {**os.environ, "OPGRAPH_CACHE_DIR": str(root)}
    env.pop("OPGRAPH_FLAGS", None)
    return subprocess.Popen(
        [sys.executable, "-c", GRAPHS_CHILD, str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _close_values(line: str, expected: Any) -> bool:
    got = np.array(json.loads(line))
    return got.shape == expected.shape and np.allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_processes_compiling_the_same_graphs_some_killed_mid_compile(tmp_path: Path) -> None:
    """Four processes compile the same functions against an empty cache at once; two are
    killed (SIGKILL) while kernels build. The two survivors and a later process all run
    correct modules. (Without kills, test_processes_compiling_the_same_kernel_build_it_once
    checks that a kernel is built once.)"""
    start = time.time() + 6.0  # every child has imported opgraph and Cython by then
    procs = [_spawn_graphs(tmp_path, start) for _ in range(4)]
    deadline = time.time() + 120
    while time.time() < deadline and not any(tmp_path.rglob("tmp/*/*.pyx")):
        time.sleep(0.01)
    assert any(tmp_path.rglob("tmp/*/*.pyx")), "no build started"
    for victim in procs[:2]:
        victim.kill()
    for victim in procs[:2]:
        victim.communicate()
    expected = _expected_graph_values()
    for survivor in [*procs[2:], _spawn_graphs(tmp_path, 0)]:
        out, err = survivor.communicate(timeout=240)
        assert survivor.returncode == 0, err
        _builds, *values = out.splitlines()  # first line: kernels this process compiled
        assert len(values) == len(expected), out
        assert all(_close_values(g, w) for g, w in zip(values, expected, strict=True)), out
