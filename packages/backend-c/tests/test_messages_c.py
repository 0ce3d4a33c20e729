"""Messages that say what happened (issue 12, part 4), backend-c's side: a progress line for
any compile that takes more than about a second (and none for a load from the cache), a
count of C kernels that ``python -m opgraph cache info`` repeats in the same words, and the
elementwise shape-mismatch error of the C thunk, the same as ``perform``'s."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.__main__ import main
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph_c import CModule
from opgraph_c import cache as cache_module
from opgraph_c.cache import KernelCache, count_text

SOURCE = """\
# cython: language_level=3
TOKEN = "{token}"
def compute(x):
    return x + 1
"""


def kernel(token: str) -> CModule:
    return CModule(f"message kernel {token}", SOURCE.format(token=token))


def progress_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("opgraph_c: ")]


# ----------------------------------------------------------------------------------------
# one progress line for any slow compile


def test_one_slow_kernel_prints_its_line_and_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_cythonize = cache_module.cythonize

    def slow_cythonize(pyx: Path, name: str) -> Path:
        # Cython taking longer than the notice delay, with sys.stderr redirected (for every
        # thread) into its error report, as cythonize does: the line must still be seen.
        with contextlib.redirect_stderr(io.StringIO()):
            time.sleep(0.4)
        return real_cythonize(pyx, name)

    monkeypatch.setattr(cache_module, "cythonize", slow_cythonize)
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", 0.1)
    assert KernelCache(tmp_path).load(kernel("slow")).compute(1) == 2
    lines = progress_lines(capsys.readouterr().err)
    assert lines[0] == "opgraph_c: compiling 1 C kernel in 1 module: message kernel slow"
    assert re.fullmatch(r"opgraph_c: compiled 1 C kernel in 1 module in \d+\.\d s", lines[-1])
    assert len(lines) == 2


def test_a_fast_compile_and_a_cached_load_print_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", 60.0)  # "fast": under the delay
    KernelCache(tmp_path).load(kernel("fast"))
    assert progress_lines(capsys.readouterr().err) == []
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", 0.0)  # even with no delay at all
    again = KernelCache(tmp_path)  # another process's view: loads from disk
    assert again.load(kernel("fast")).compute(1) == 2 and again.builds == 0
    assert progress_lines(capsys.readouterr().err) == []


def test_a_build_known_to_be_slow_prints_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", 60.0)
    monkeypatch.setattr(cache_module, "DETAIL_AFTER_S", 0.0)  # a line per module too
    monkeypatch.setattr(cache_module, "_cpu_count", lambda: 1)  # 2 modules, 2 rounds
    cache = KernelCache(tmp_path)
    cache.ensure([cache.request(kernel("a")), cache.request(kernel("b"))])
    lines = progress_lines(capsys.readouterr().err)
    assert lines[0] == (
        "opgraph_c: compiling 2 C kernels in 2 modules: message kernel a, message kernel b"
    )
    assert re.fullmatch(r"opgraph_c: \[1/2\] message kernel [ab] \(\d+\.\d s\)", lines[1])
    assert lines[2].startswith("opgraph_c: [2/2] message kernel ")
    assert lines[3].startswith("opgraph_c: compiled 2 C kernels in 2 modules in ")


def test_a_long_list_of_names_is_cut_at_a_name() -> None:
    names = [f"Elemwise{{op_{k}}} (float64)" for k in range(20)]
    text = cache_module._names_within(names, 80)
    assert text.endswith(" more") and len(text) < 100
    shown, rest = text.rsplit(" and ", 1)
    assert all(name in names for name in shown.split(", "))
    assert int(rest.split()[0]) == 20 - len(shown.split(", "))


# ----------------------------------------------------------------------------------------
# the count agrees with `cache info`


def test_the_progress_count_is_what_cache_info_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", 0.0)  # print even if fast
    x = T.dvector("x")
    with config.change_flags(compiledir=str(tmp_path)):
        function([x], [T.exp(x) * 3, T.cos(x) - 7], mode=Mode(linker="c", optimizer="None"))
        first = progress_lines(capsys.readouterr().err)[0]
        said = re.match(r"opgraph_c: compiling (\d+ C kernels in \d+ modules?): ", first)
        assert said, first
        assert said.group(1).startswith("4 C kernels in ")
        assert main(["cache", "info"]) == 0
        info = capsys.readouterr().out
        assert f"holds: {said.group(1)} (" in info
        assert main(["cache", "clear"]) == 0
        assert f"removed {said.group(1)} from " in capsys.readouterr().out
        assert main(["cache", "info"]) == 0
        assert "holds: 0 C kernels in 0 modules (" in capsys.readouterr().out


def test_count_text() -> None:
    assert count_text(1, 1) == "1 C kernel in 1 module"
    assert count_text(10, 3) == "10 C kernels in 3 modules"


# ----------------------------------------------------------------------------------------
# the elementwise shape mismatch from the C thunk


def test_c_shape_mismatch_is_perform_s_message(c_mode: Mode, py_mode: Mode) -> None:
    x, y = T.dvector("x"), T.dvector("y")
    out = x + y
    line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    f = function([x, y], out, mode=c_mode)
    assert type(f.fn.thunks[0]).__name__ == "ElemwiseThunk"  # the C thunk, not a fallback
    with pytest.raises(ValueError) as c_info:
        f(np.ones(3), np.ones(4))
    with pytest.raises(ValueError) as py_info:
        function([x, y], out, mode=py_mode)(np.ones(3), np.ones(4))
    c_lines = str(c_info.value).splitlines()
    assert c_lines[:2] == str(py_info.value).splitlines()[:2]
    assert c_lines[0] == (
        "Elemwise{add,no_inplace}: x has shape (3,), y has shape (4,): they cannot broadcast "
        "(Input dimension mis-match in dimension 0: 3 vs 4)"
    )
    assert c_lines[1].startswith(f"The node was created at: {__file__}:{line}:")
    assert "Apply node that caused the error: Elemwise{add,no_inplace}(x, y)" in c_lines
