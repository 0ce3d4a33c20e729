"""Compiling kernel modules: nvcc for a GPU, g++ for the emulator, and their disk cache.

Layout under ``<config.compiledir>/cuda``::

    <arch>/ab/<key>/module.cu, module.<cubin|so>, manifest.json
    locks/<key>.lock      per-key file locks (filelock)
    tmp/                  builds in progress, renamed into place when complete
    failed/<key>/         the source of a build that failed, for the error to point at

The key is a SHA-256 of the module's text, the prelude and emulator headers, the compiler's
version line, its flags and the architecture (``sm_90``, ``emulator``). A build runs in
``tmp/`` under the key's lock and is renamed into place in one step, so a visible entry is
always complete; a process that finds no entry takes the lock, looks again, and only the
first one builds. An entry whose manifest is unreadable or whose binary's size or hash
differs is dropped and rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import filelock

from opgraph import config

__all__ = [
    "CHECK_ARCHS",
    "CudaCompileError",
    "CudaSource",
    "KernelSig",
    "build",
    "cache_info_lines",
    "cache_summary",
    "check_with_nvcc",
    "check_with_nvcc_later",
    "find_nvcc",
    "include_dir",
    "param_kind",
    "wait_for_nvcc_checks",
]

#: The architectures every generated module must compile for (tests check them all).
CHECK_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
NVCC_FLAGS = ("-O3", "-std=c++17", "-lineinfo")
GXX_FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w")


@dataclass(frozen=True)
class KernelSig:
    """One ``extern "C" __global__`` function of a :class:`CudaSource`.

    ``params`` are its parameter types, exactly as written in the source: pointer types
    (``"float*"``, ``"const opg_float32*"``), ``"ptrdiff_t"``, ``"int"``, ``"float"`` or
    ``"double"``. ``sync`` says that the kernel calls ``__syncthreads()`` (the emulator then
    runs a block's threads concurrently).
    """

    name: str
    params: tuple[str, ...]
    sync: bool = False


@dataclass(frozen=True)
class CudaSource:
    """A module of CUDA C++ kernels: its text and the kernels it defines.

    ``name`` says what it computes (``"GpuElemwise{add}"``); it names the cached files and
    appears in compile errors. ``code`` starts with ``#include "opgraph_cuda_prelude.cuh"``.
    """

    name: str
    code: str
    kernels: tuple[KernelSig, ...] = field(default_factory=tuple)


def param_kind(ctype: str) -> str:
    """The kind of a kernel parameter type: ``"P"`` (pointer), ``"q"`` (ptrdiff_t),
    ``"i"`` (int), ``"f"`` (float) or ``"d"`` (double); ValueError for anything else."""
    text = " ".join(ctype.split())
    if text.endswith("*"):
        return "P"
    kinds = {"ptrdiff_t": "q", "int": "i", "float": "f", "double": "d"}
    if text not in kinds:
        raise ValueError(
            f"kernel parameter type {ctype!r} is not supported; use a pointer, ptrdiff_t, "
            "int, float or double"
        )
    return kinds[text]


class CudaCompileError(RuntimeError):
    """A kernel module did not compile: the message gives the kept source's path and the
    compiler's own message."""


def include_dir() -> Path:
    """The folder holding ``opgraph_cuda_prelude.cuh`` and ``opgraph_cuda_emulate.h``."""
    return Path(__file__).parent / "include"


def find_nvcc() -> str | None:
    """The nvcc to use: ``$CUDA_HOME/bin/nvcc``, then ``nvcc`` on PATH, then
    ``/usr/local/cuda/bin/nvcc``; None when there is none."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


@functools.cache
def _version(tool: str) -> str:
    """The first line of ``tool --version`` that names a release (it keys the cache)."""
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    release = [line for line in lines if "release" in line or "g++" in line or "GCC" in line]
    return (release or lines or ["unknown"])[-1]


def _headers_text() -> bytes:
    return b"".join(p.read_bytes() for p in sorted(include_dir().glob("*.*h")))


def _root(root: Path | None = None) -> Path:
    return root if root is not None else Path(str(config.compiledir)) / "cuda"


def cache_key(source: CudaSource, arch: str, tool: str, flags: Sequence[str]) -> str:
    """The cache key of ``source`` built by ``tool`` with ``flags`` for ``arch``."""
    digest = hashlib.sha256()
    for part in (source.code.encode(), _headers_text(), _version(tool).encode()):
        digest.update(part + b"\0")
    digest.update(" ".join((arch, *flags)).encode())
    return digest.hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid(entry: Path, key: str, binary: str) -> Path | None:
    """The entry's binary if its manifest vouches for it, else None (and the entry goes)."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        path = entry / binary
        if manifest["key"] == key and manifest["sha256"] == _sha(path):
            return path
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(entry, ignore_errors=True)
    return None


def build(source: CudaSource, arch: str, root: Path | None = None) -> Path:
    """The compiled binary of ``source`` for ``arch``, built once and then taken from the
    cache: a cubin for ``sm_XX``, a shared library for ``"emulator"``, a fat binary for every
    architecture of :data:`CHECK_ARCHS` for ``"check"``. ``root`` is the cache folder
    (default ``<compiledir>/cuda``, read now)."""
    root = _root(root)
    emulated = arch == "emulator"
    tool = shutil.which("g++") if emulated else find_nvcc()
    if tool is None:
        what = "g++ (the emulator compiles kernels as C++)" if emulated else "nvcc"
        raise CudaCompileError(
            f"cannot compile {source.name}: {what} was not found.\n"
            "HINT: install the CUDA toolkit (nvcc) or set CUDA_HOME to its folder."
        )
    flags = GXX_FLAGS if emulated else NVCC_FLAGS
    binary = {"emulator": "module.so", "check": "module.fatbin"}.get(arch, "module.cubin")
    key = cache_key(source, arch, tool, flags)
    entry = root / arch / key[:2] / key
    if entry.is_dir() and (found := _valid(entry, key, binary)) is not None:
        return found
    locks = root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(locks / f"{key}.lock")):
        if entry.is_dir() and (found := _valid(entry, key, binary)) is not None:
            return found
        tmp = root / "tmp" / f"{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            cu = tmp / "module.cu"
            cu.write_text(emulated_text(source) if emulated else source.code)
            if emulated:
                cmd = [
                    tool,
                    *flags,
                    "-I",
                    str(include_dir()),
                    "-include",
                    _emulator_header(tool, root),
                    "-x",
                    "c++",
                    str(cu),
                    "-o",
                    str(tmp / binary),
                ]
            else:
                target = [f"-arch={arch}", "-cubin"]
                if arch == "check":
                    # One front-end pass (PTX for the oldest architecture), then machine
                    # code for every architecture: ptxas must accept the kernel on each.
                    lowest = CHECK_ARCHS[0].replace("sm_", "compute_")
                    target = [
                        "--fatbin",
                        "-gencode",
                        f"arch={lowest},code=[{','.join(CHECK_ARCHS)}]",
                    ]
                cmd = [
                    tool,
                    *flags,
                    *target,
                    "-I",
                    str(include_dir()),
                    str(cu),
                    "-o",
                    str(tmp / binary),
                ]
            _run(cmd, source, key, cu, root)
            (tmp / "manifest.json").write_text(
                json.dumps(
                    {
                        "key": key,
                        "name": source.name,
                        "arch": arch,
                        "sha256": _sha(tmp / binary),
                        "tool": _version(tool),
                    }
                )
            )
            entry.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / binary


def _run(cmd: list[str], source: CudaSource, key: str, cu: Path, root: Path) -> None:
    """Run a compiler; on failure keep the source under ``failed/`` and raise."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return
    kept = root / "failed" / key
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copy(cu, kept / cu.name)
    message = (proc.stderr or proc.stdout).strip()
    raise CudaCompileError(
        f"{Path(cmd[0]).name} could not compile {source.name} "
        f"(source kept at {kept / cu.name}):\n{message}"
    )


def _emulator_header(tool: str, root: Path) -> str:
    """The emulator header to force-include: a copy next to its precompiled form
    (``<compiledir>/cuda/pch/<key>/``, built once per header text, g++ and flags; it halves
    each module's compile time), or the header itself when precompiling fails."""
    header = include_dir() / "opgraph_cuda_emulate.h"
    digest = hashlib.sha256(header.read_bytes() + _version(tool).encode())
    digest.update(" ".join(GXX_FLAGS).encode())
    folder = root / "pch" / digest.hexdigest()[:16]
    pch = folder / (header.name + ".gch")
    if pch.is_file():
        return str(folder / header.name)
    (root / "locks").mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(root / "locks" / f"pch-{folder.name}.lock")):
        if pch.is_file():
            return str(folder / header.name)
        tmp = root / "tmp" / f"pch-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            shutil.copy(header, tmp / header.name)
            flags = [f for f in GXX_FLAGS if f != "-shared"]
            proc = subprocess.run(
                [
                    tool,
                    *flags,
                    "-x",
                    "c++-header",
                    str(tmp / header.name),
                    "-o",
                    str(tmp / pch.name),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                return header.name  # found through -I; compiles without the speed-up
            folder.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(folder / header.name)


def emulated_text(source: CudaSource) -> str:
    """``source``'s text followed by one ``opg_launch_<kernel>(dims, args)`` wrapper per
    kernel: the emulator's entry points (the kernel text itself is unchanged)."""
    lines = [source.code, "", "/* ---- emulator entry points */"]
    for sig in source.kernels:
        args = ", ".join(f"*({ctype}*)a[{i}]" for i, ctype in enumerate(sig.params))
        lines += [
            f'extern "C" void opg_launch_{sig.name}(const unsigned int *dims, void **a) {{',
            f"    opg_emu::run(dims, {'true' if sig.sync else 'false'}, [&] {{ "
            f"{sig.name}({args}); }});",
            "}",
        ]
    return "\n".join(lines) + "\n"


#: Folders of the cache root that hold no modules.
_NOT_ARCHS = frozenset({"locks", "tmp", "failed", "pch"})


def cache_summary(root: Path | None = None) -> dict[str, object]:
    """What the CUDA cache holds: ``{"root", "modules": {arch: count}, "bytes", "failed"}``
    (an architecture folder per target: ``sm_90``, ``emulator``, ``check`` for the nvcc
    checks of emulated modules; a module is an entry with a manifest)."""
    root = _root(root)
    modules: dict[str, int] = {}
    size = 0
    if root.is_dir():
        for arch in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in _NOT_ARCHS):
            count = sum(1 for _ in arch.glob("*/*/manifest.json"))
            if count:
                modules[arch.name] = count
            size += sum(f.stat().st_size for f in arch.rglob("*") if f.is_file())
    failed = root / "failed"
    return {
        "root": str(root),
        "modules": modules,
        "bytes": size,
        "failed": sum(1 for _ in failed.iterdir()) if failed.is_dir() else 0,
    }


def cache_info_lines(root: Path | None = None) -> list[str]:
    """``python -m opgraph cache info``'s lines on the CUDA cache (:func:`cache_summary`)."""
    info = cache_summary(root)
    modules: dict[str, int] = info["modules"]  # type: ignore[assignment]
    total = sum(modules.values())
    what = {"emulator": "for the emulator (g++)", "check": "nvcc checks (sm_75..sm_90)"}
    parts = [f"{n} {what.get(arch, 'for ' + arch)}" for arch, n in modules.items()]
    noun = "module" if total == 1 else "modules"
    lines = [
        f"cache directory: {info['root']}",
        f"holds: {total} CUDA kernel {noun} ({int(info['bytes']) / 1e6:.1f} MB)"  # type: ignore[call-overload]
        + (f": {', '.join(parts)}" if parts else ""),
    ]
    if info["failed"]:
        lines.append(f"failed builds kept (their source, under failed/): {info['failed']}")
    return lines


_checks: list[Future[bool]] = []
_checks_lock = threading.Lock()
_checker: ThreadPoolExecutor | None = None


def check_with_nvcc_later(source: CudaSource) -> None:
    """Queue :func:`check_with_nvcc` of ``source`` on a background thread (one nvcc at a
    time, beside the caller's work); :func:`wait_for_nvcc_checks` collects the failures."""
    global _checker
    with _checks_lock:
        if _checker is None:
            _checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opgraph-nvcc")
        _checks.append(_checker.submit(check_with_nvcc, source, _root()))


def wait_for_nvcc_checks() -> list[BaseException]:
    """Wait for every queued nvcc check; the errors of those that failed (each names the
    module, its kept source and nvcc's message)."""
    with _checks_lock:
        pending = list(_checks)
        _checks.clear()
    return [exc for f in pending if (exc := f.exception()) is not None]


def check_with_nvcc(source: CudaSource, root: Path | None = None) -> bool:
    """Compile ``source`` with nvcc for every architecture of :data:`CHECK_ARCHS`, in one
    fat binary (cached); False when nvcc is not installed. Raises CudaCompileError."""
    if find_nvcc() is None:
        return False
    build(source, "check", root)
    return True
