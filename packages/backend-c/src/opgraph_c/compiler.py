"""Builds one generated module: Cython in-process, then the C compiler called directly.

No setuptools and no compiler probing: ``Cython.Compiler.Main.compile`` turns the ``.pyx``
into C (fast after its first call in a process), and ``gcc -O3 -shared -fPIC`` links it
against nothing but libm (and libgomp with OpenMP). The flags keep IEEE semantics
(``isnan``, ``inf``, signed zeros) while letting gcc vectorise: ``-fno-math-errno`` makes
the math functions pure, so loops calling ``exp``/``sin``/``tanh`` use glibc's libmvec
variants declared in ``include/opgraph_c_prelude.h``; ``-fno-trapping-math`` lets it
if-convert selects; ``-fwrapv`` gives integer overflow NumPy's wrap-around. No
``-ffast-math``: it would break ``isnan``/``isinf`` and inf arithmetic.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CompileError", "Toolchain", "cythonize", "get_toolchain", "link"]

PACKAGE_DIR = Path(__file__).parent
INCLUDE_DIR = PACKAGE_DIR / "include"
#: Where Cython finds ``opgraph_c/abi.pxd`` (the folder holding the package).
PXD_ROOT = PACKAGE_DIR.parent
BASE_FLAGS = (
    "-O3",
    "-fPIC",
    "-shared",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fwrapv",
    "-fno-strict-aliasing",
    "-Wall",
)
#: With ``c__werror``: a warning fails the build (the tests keep generated code clean).
WERROR_FLAGS = ("-Werror",)
OPENMP_FLAGS = ("-fopenmp",)
_cython_lock = threading.Lock()


class CompileError(RuntimeError):
    """A generated module failed to compile; the message names its source and the error."""


@dataclass(frozen=True)
class Toolchain:
    """The C compiler and flags kernels are built with; its ``fingerprint`` keys the cache."""

    cc: str
    flags: tuple[str, ...]
    fingerprint: dict[str, Any] = field(compare=False)

    def command(self, c_file: Path, out: Path, openmp: bool) -> list[str]:
        """The compiler command line building ``c_file`` into the extension ``out``."""
        py_include = sysconfig.get_paths()["include"]
        return [
            self.cc,
            *self.flags,
            *(OPENMP_FLAGS if openmp else ()),
            f"-I{py_include}",
            f"-I{INCLUDE_DIR}",
            str(c_file),
            "-o",
            str(out),
            "-lm",
        ]


def _cpu_signature() -> str:
    """A hash of the CPU's feature flags (``-march=native`` code only runs on such CPUs)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.encode()).hexdigest()[:16]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _headers_digest() -> str:
    """A hash of what generated code includes or cimports from the package: its C headers
    and every ``.pxd`` (a plugin's kernel may cimport ``_vm.pxd`` or ``_threads.pxd``; a
    layout change there must not load a module built against the old one)."""
    digest = hashlib.sha256()
    for path in [*sorted(INCLUDE_DIR.glob("*.h")), *sorted(PACKAGE_DIR.glob("*.pxd"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@cache
def _toolchain(cc: str, march_native: bool, extra: str, werror: bool = False) -> Toolchain:
    path = shutil.which(cc)
    if path is None:
        raise CompileError(
            f"the C compiler {cc!r} (config c__cc) was not found on PATH, so opgraph cannot "
            "build C kernels.\nHINT: install gcc (e.g. apt-get install gcc), set "
            "OPGRAPH_FLAGS=c__cc=/path/to/cc, or use linker='vm' (no C)."
        )
    real = os.path.realpath(path)
    stat = os.stat(real)
    flags = (
        *BASE_FLAGS,
        *(WERROR_FLAGS if werror else ()),
        *(("-march=native",) if march_native else ()),
        *extra.split(),
    )
    from Cython import __version__ as cython_version

    import opgraph_c

    fingerprint = {
        "cc": real,
        "cc_stat": [stat.st_size, stat.st_mtime_ns],
        "flags": list(flags),
        "cpu": _cpu_signature() if march_native else platform.machine(),
        "python": sys.implementation.cache_tag,
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "cython": cython_version,
        "numpy": _numpy_version(),
        "opgraph_c": opgraph_c.__version__,
        "headers": _headers_digest(),
    }
    return Toolchain(real, flags, fingerprint)


def _numpy_version() -> str:
    import numpy

    return numpy.__version__


def get_toolchain() -> Toolchain:
    """The toolchain the current config asks for (``c__cc``, ``c__march_native``,
    ``c__cflags``, ``c__werror``)."""
    from opgraph.configdefaults import config

    return _toolchain(
        str(config.c__cc),
        bool(config.c__march_native),
        str(config.c__cflags),
        bool(config.c__werror),
    )


def cythonize(pyx: Path, name: str) -> Path:
    """Translate ``pyx`` to C next to it with Cython, in this process; returns the C file."""
    from Cython.Compiler import Errors
    from Cython.Compiler.Main import CompilationOptions
    from Cython.Compiler.Main import compile as cython_compile

    c_file = pyx.with_suffix(".c")
    options = CompilationOptions(
        language_level=3, output_file=str(c_file), include_path=[str(PXD_ROOT), str(INCLUDE_DIR)]
    )
    messages = io.StringIO()
    with (
        _cython_lock,
        contextlib.redirect_stderr(messages),
        contextlib.redirect_stdout(messages),
    ):
        try:
            result = cython_compile(str(pyx), options)
            failed = result.num_errors > 0
        except Errors.CompileError as exc:
            failed = True
            messages.write(f"{exc}\n")
    if failed or not c_file.exists():
        raise CompileError(_report(name, pyx, "Cython", messages.getvalue()))
    return c_file


def link(toolchain: Toolchain, c_file: Path, out: Path, name: str, openmp: bool) -> None:
    """Compile and link ``c_file`` into the extension module ``out``."""
    cmd = toolchain.command(c_file, out, openmp)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=c_file.parent)
    except OSError as exc:
        report = _report(name, c_file.with_suffix(".pyx"), toolchain.cc, str(exc))
        raise CompileError(report) from exc
    if proc.returncode != 0 or not out.exists():
        text = f"$ {' '.join(cmd)}\n{proc.stderr}{proc.stdout}"
        raise CompileError(_report(name, c_file.with_suffix(".pyx"), toolchain.cc, text))


def _report(name: str, pyx: Path, tool: str, output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if tool == "Cython":  # the source excerpt, the caret, then "file:line:col: message"
        shown = lines[-6:]
    else:
        errors = [ln for ln in lines if "error" in ln.lower() and not ln.startswith("$ ")]
        shown = (errors or lines)[:8]
    body = "\n".join(f"    {ln}" for ln in shown) or "    (no output)"
    return (
        f"opgraph_c: could not compile the C kernel for {name}.\n"
        f"  generated source: {pyx}\n"
        f"  {tool} said:\n{body}\n"
        "HINT: the source above is kept for inspection; report it with the error to the "
        "package that provides the kernel, or set OPGRAPH_FLAGS=linker=vm to run without C."
    )
