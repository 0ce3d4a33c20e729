"""The compile cache of generated modules: keyed, locked, written atomically, self-repairing.

Layout under ``<config.compiledir>/c``::

    kernels/ab/<key>/<module>.pyx, <module><EXT_SUFFIX>, manifest.json
    index/ab/<key>.json   for a kernel built inside a shared module: that module and suffix
    locks/<key>.lock      per-key file locks (filelock)
    tmp/                  builds in progress, renamed into kernels/ when complete
    failed/<key>/         sources of builds that failed, for the error message to point at

The key is a SHA-256 of the module's source without its comments (:func:`without_comments`:
modules differing only in the Op and node their comments name share one entry), the
toolchain fingerprint (compiler, flags, CPU with ``-march=native``, Python/NumPy/Cython/
opgraph_c versions, the headers and ``.pxd`` files generated code includes) and the kernel
entry's owner and ``version``. A build happens in ``tmp/`` under the key's lock
and is renamed into place in one step, so a visible entry is always complete; processes
that find no entry take the lock, look again, and only the first one builds. A process
never blocks while holding a lock: it builds the keys whose locks it gets at once and
then waits for the others, one at a time, loading each as soon as its entry appears (its
holder may keep the lock until the rest of its batch is built) and building it only if
the holder died first (see :meth:`KernelCache._build_locked`). An entry whose
manifest is missing or unreadable, names another key, or whose module's size or SHA-256
differs (a truncated copy, a foreign file) is dropped and rebuilt; so is one that fails to
import.

Kernels that may share a module (:class:`~opgraph_c.spec.BundlePart`, backend-c's elementwise
loops) and are missing together are built as one module per CPU (one Cython and one compiler
run each instead of one per kernel); an index file per kernel key names the module holding
it, written after that module is in place.

Counting: a *C kernel* is one cache key (one node's compiled code; equal nodes share one),
a *module* one compiled extension holding one kernel or a bundle of them. The progress
lines, ``python -m opgraph cache info|clear|prune`` and the manifests all count both the
same way and say it with :func:`count_text` ("10 C kernels in 3 modules").
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from opgraph_c.compiler import CompileError, Toolchain, cythonize, get_toolchain, link
from opgraph_c.spec import ID, CModule

__all__ = ["BuildRequest", "KernelCache", "get_cache"]

MANIFEST = "manifest.json"
FORMAT = 1
#: A lock not obtained within this many seconds prints a "waiting" line, then waits on.
WAIT_NOTICE_S = 2.0
#: A process waiting for another's build looks for its entry this often (seconds): the
#: other may hold the key's lock until the rest of its batch is built.
WAIT_POLL_S = 0.1
#: At most this many kernels share one module.
MAX_BUNDLE = 64
#: A build still running after this many seconds prints its progress line (one known to
#: be slow, with more modules than CPUs, prints it at once).
PROGRESS_AFTER_S = 1.0
#: A build running this long also prints a line as each of its modules is done.
DETAIL_AFTER_S = 5.0
#: How a bundle module was named before manifests recorded their kernel count.
_BUNDLE_NAME = re.compile(r"^a module of (\d+) kernels$")


@dataclass(frozen=True)
class BuildRequest:
    """One module to have in the cache: its spec, key and module name."""

    spec: CModule
    key: str

    @property
    def module_name(self) -> str:
        return self.name_of(self.key)

    @staticmethod
    def name_of(key: str) -> str:
        """The Python module name of the entry of ``key``."""
        return f"opgraph_ck_{key[:24]}"


class _PartView:
    """One kernel of a module: its capsule as ``ELEMWISE_KERNEL``, the module's other names."""

    def __init__(
        self, module: ModuleType, capsule_name: str = "", *, suffix: str = "", capsule: Any = None
    ) -> None:
        self.module = module
        self.__name__ = f"{module.__name__}[{suffix or 'alone'}]"
        self.ELEMWISE_KERNEL = capsule if capsule is not None else getattr(module, capsule_name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


class KernelCache:
    """Generated modules on disk (shared by processes) and loaded in this process.

    Parameters
    ----------
    root
        The cache directory (default ``<config.compiledir>/c``, read at first use).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._root = Path(root) if root is not None else None
        self._loaded: dict[str, ModuleType] = {}
        self._lock = threading.RLock()
        self.builds = 0  # modules this process compiled (tests and progress lines read it)
        self.import_errors: dict[str, str] = {}

    # ---- paths

    @property
    def root(self) -> Path:
        """The cache directory."""
        if self._root is None:
            from opgraph.configdefaults import config

            return Path(str(config.compiledir)) / "c"
        return self._root

    def entry_dir(self, key: str) -> Path:
        """Where the module of ``key`` lives once built."""
        return self.root / "kernels" / key[:2] / key

    # ---- keys

    def request(
        self, spec: CModule, kernel: Any = None, toolchain: Toolchain | None = None
    ) -> BuildRequest:
        """The :class:`BuildRequest` (with its cache key) for ``spec`` from entry ``kernel``."""
        toolchain = toolchain or get_toolchain()
        payload = {
            "source": without_comments(spec.source),
            "openmp": spec.openmp,
            "toolchain": toolchain.fingerprint,
            "entry": [getattr(kernel, "owner", None), str(getattr(kernel, "version", ""))],
        }
        blob = json.dumps(payload, sort_keys=True).encode()
        return BuildRequest(spec, hashlib.sha256(blob).hexdigest())

    # ---- loading

    def load(self, spec: CModule, kernel: Any = None) -> Any:
        """The loaded module for ``spec`` (for a bundle part, a view of its capsule in the
        module holding it), compiled first if no process built it yet."""
        return self.load_request(self.request(spec, kernel))

    def load_request(self, req: BuildRequest) -> Any:
        """:meth:`load` for a request made already (its key computed)."""
        module = self._loaded.get(req.key)
        if module is None:
            self.ensure([req])
            module = self._loaded[req.key]
        return module

    def ensure(self, requests: list[BuildRequest]) -> None:
        """Load every request's module, building the missing ones (with progress lines)."""
        with self._lock:
            missing = []
            for req in {r.key: r for r in requests}.values():
                if req.key in self._loaded:
                    continue
                module = self._try_load(req)
                if module is None:
                    missing.append(req)
            if missing:
                self._build_locked(missing)

    def _try_load(self, req: BuildRequest) -> Any:
        """Load a valid entry of ``req`` (its own module, or the bundle its index names);
        None if there is none or it failed to import."""
        module = self._import_entry(req.key, req.module_name)
        part = req.spec.part
        if module is not None:
            result = module if part is None else _PartView(module, part.capsule.replace(ID, ""))
        elif part is not None:
            result = self._from_index(req)
        else:
            result = None
        if result is not None:
            self._loaded[req.key] = result
        return result

    def _import_entry(self, key: str, module_name: str) -> ModuleType | None:
        so = self._valid_entry(key)
        if so is None:
            return None
        try:
            return _import(module_name, so)
        except ImportError as exc:
            self.import_errors[key] = f"{type(exc).__name__}: {exc}"
            return None

    def _from_index(self, req: BuildRequest) -> Any:
        """The part of ``req`` in the bundle its index file names, or None."""
        assert req.spec.part is not None
        try:
            index = json.loads(self._index_path(req.key).read_text(encoding="utf-8"))
            bundle, suffix = str(index["module"]), str(index["suffix"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        module = self._import_entry(bundle, BuildRequest.name_of(bundle))
        capsule = getattr(module, req.spec.part.capsule.replace(ID, suffix), None)
        if module is None or capsule is None:
            return None
        return _PartView(module, suffix=suffix, capsule=capsule)

    def _index_path(self, key: str) -> Path:
        return self.root / "index" / key[:2] / f"{key}.json"

    def _valid_entry(self, key: str) -> Path | None:
        """The module file of a complete, uncorrupted entry of ``key``, else None."""
        entry = self.entry_dir(key)
        try:
            manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
            if manifest.get("format") != FORMAT or manifest.get("key") != key:
                return None
            so = entry / manifest["so"]
            data = so.read_bytes()
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if len(data) != manifest.get("size") or hashlib.sha256(data).hexdigest() != manifest.get(
            "sha256"
        ):
            return None
        return so

    # ---- building

    def _build_locked(self, missing: list[BuildRequest]) -> None:
        """Have every request of ``missing`` loaded, building under its key's lock those
        no other process has built or is building; never blocks while holding a lock.

        Each round tries every pending key's lock without waiting: a key whose entry
        exists once locked is released at once (another process published it); the
        others locked are built together, holding only their own locks. Keys locked
        elsewhere are loaded as soon as their entry appears (their holder may still be
        building the rest of its batch); otherwise the first of them is waited for,
        holding no lock, and the next round builds it with any others found free (their
        holder died before publishing them)."""
        from filelock import FileLock

        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        # the caller's order (progress lines name the kernels in it): no lock is waited for
        # while another is held, so no lock order is needed to avoid deadlocks
        pending = list({req.key: req for req in missing}.values())
        waited: dict[str, Any] = {}  # key -> its lock, acquired by waiting for it
        while pending:
            mine: list[tuple[BuildRequest, Any]] = []
            theirs = []
            try:
                for req in pending:
                    lock = waited.pop(req.key, None)
                    if lock is None:
                        lock = FileLock(str(lock_dir / f"{req.key}.lock"))
                        if not _try_acquire(lock, 0):
                            if self._try_load(req) is None:
                                theirs.append(req)
                            continue
                    if self._try_load(req) is None:
                        mine.append((req, lock))
                    else:
                        lock.release()
                if mine:
                    self._build([req for req, _ in mine])
            finally:
                for _, lock in mine:
                    lock.release()
                for lock in waited.values():  # only if something above raised
                    lock.release()
                waited.clear()
            pending = [req for req in theirs if self._try_load(req) is None]
            if pending:
                lock = self._wait_for(pending[0], lock_dir)
                if lock is None:
                    pending = pending[1:]
                else:
                    waited[pending[0].key] = lock

    def _wait_for(self, req: BuildRequest, lock_dir: Path) -> Any:
        """Wait, holding no other lock, until ``req``'s entry appears (None: loaded) or its
        lock is free (the lock, acquired: the holder finished or died, look again)."""
        from filelock import FileLock

        lock = FileLock(str(lock_dir / f"{req.key}.lock"))
        start = time.monotonic()
        noticed = False
        while not _try_acquire(lock, WAIT_POLL_S):
            if self._try_load(req) is not None:
                return None
            if not noticed and time.monotonic() - start >= WAIT_NOTICE_S:
                _progress(f"waiting for another process compiling {req.spec.name}")
                noticed = True
        return lock

    def _build(self, todo: list[BuildRequest]) -> None:
        toolchain = get_toolchain()
        units = self._units(todo, toolchain)
        progress = _BuildProgress(units, _cpu_count())
        try:
            self._build_units(todo, units, toolchain, progress)
        finally:
            progress.finish()

    def _build_units(
        self,
        todo: list[BuildRequest],
        units: list[tuple[BuildRequest, list[tuple[BuildRequest, str]]]],
        toolchain: Toolchain,
        progress: _BuildProgress,
    ) -> None:
        """Cythonize every unit of ``units`` (one at a time), each compiled by the C compiler
        as soon as its C file exists (in parallel with the next Cython run); each module is
        published, then the index files of the kernels it holds written, as it completes."""
        tmp_root = self.root / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        sources = []
        for unit, _ in units:
            tmp = tmp_root / f"{unit.key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            pyx = tmp / f"{unit.module_name}.pyx"
            pyx.write_text(unit.spec.source, encoding="utf-8")
            sources.append((unit, tmp, pyx))
        parts_of = {unit.key: parts for unit, parts in units}

        def compile_one(unit: BuildRequest, tmp: Path, c_file: Path) -> None:
            so = tmp / f"{unit.module_name}{_ext_suffix()}"
            try:
                link(toolchain, c_file, so, unit.spec.name, unit.spec.openmp)
            except CompileError as exc:
                raise self._keep_failed(unit, tmp, exc) from None
            self._publish(unit, tmp, so, toolchain, len(parts_of[unit.key]))
            # Its kernels' index files at once: processes waiting for one of them load it
            # now, not once the whole batch is built.
            for req, suffix in parts_of[unit.key]:
                if req is not unit:
                    self._write_index(req.key, unit.key, suffix)
            progress.module_done(unit)

        # Cython runs here, one module at a time (it holds the GIL); each module's C compiler
        # starts as soon as its Cython is done, in a thread that waits on the subprocess, so
        # gcc of one module overlaps Cython of the next.
        workers = min(len(sources), os.cpu_count() or 1)
        with ThreadPoolExecutor(max(workers, 1)) as pool:
            futures = []
            try:
                for unit, tmp, pyx in sources:
                    try:
                        c_file = cythonize(pyx, unit.spec.name)
                    except CompileError as exc:
                        raise self._keep_failed(unit, tmp, exc) from None
                    futures.append(pool.submit(compile_one, unit, tmp, c_file))
            finally:  # a Cython error is raised only once the modules under way are done
                wait(futures)
            for future in futures:
                future.result()
        for req in todo:
            if self._try_load(req) is None:
                raise CompileError(
                    f"opgraph_c: the C kernel for {req.spec.name} was built under "
                    f"{self.root} but cannot be imported: "
                    f"{self.import_errors.get(req.key, 'unknown error')}.\nHINT: run "
                    "`python -m opgraph cache clear` and try again."
                )

    def _units(
        self, todo: list[BuildRequest], toolchain: Toolchain
    ) -> list[tuple[BuildRequest, list[tuple[BuildRequest, str]]]]:
        """Group ``todo`` into modules to build: bundle parts share one module per worker
        (each costs one Cython and one compiler run); the rest get one each."""
        units = [(r, [(r, "")]) for r in todo if r.spec.part is None]
        families: dict[Any, list[BuildRequest]] = {}
        for r in todo:
            if r.spec.part is not None:
                families.setdefault(r.spec.part.assemble, []).append(r)
        # The compiler runs one module per CPU at a time: bundles fill the CPUs the
        # modules of their own leave free (a Sum module and two elementwise kernels on two
        # CPUs build as two modules in one round, not three in two).
        free = max(1, (os.cpu_count() or 1) - len(units)) if families else 0
        for assemble, parts in families.items():
            units += self._bundles(assemble, parts, toolchain, max(1, free // len(families)))
        return units

    def _bundles(
        self, assemble: Any, parts: list[BuildRequest], toolchain: Toolchain, cpus: int
    ) -> list[tuple[BuildRequest, list[tuple[BuildRequest, str]]]]:
        """``parts`` (of one code generator) in about one module per CPU of ``cpus``."""
        if len(parts) <= 1:
            return [(r, [(r, "")]) for r in parts]
        units = []
        n_bundles = min(len(parts), max(cpus, -(-len(parts) // MAX_BUNDLE)))
        for b in range(n_bundles):
            group = parts[b::n_bundles]
            if len(group) == 1:
                units.append((group[0], [(group[0], "")]))
                continue
            suffixes = [f"_{k}" for k in range(len(group))]
            source = assemble([r.spec.part for r in group], suffixes)
            spec = CModule(
                name=f"a module of {len(group)} kernels",
                source=source,
                openmp=any(r.spec.openmp for r in group),
            )
            units.append((self.request(spec, None, toolchain), list(zip(group, suffixes))))
        return units

    def _write_index(self, key: str, module_key: str, suffix: str) -> None:
        path = self._index_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(json.dumps({"module": module_key, "suffix": suffix}), encoding="utf-8")
        os.replace(tmp, path)

    def _publish(
        self, req: BuildRequest, tmp: Path, so: Path, toolchain: Toolchain, kernels: int = 1
    ) -> None:
        """Write the manifest (with the number of C kernels the module holds) and rename the
        finished build into place (under its lock)."""
        data = so.read_bytes()
        manifest = {
            "format": FORMAT,
            "key": req.key,
            "module": req.module_name,
            "so": so.name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "name": req.spec.name,
            "kernels": kernels,
            "created": time.time(),
            "toolchain": toolchain.fingerprint,
        }
        c_file = so.with_name(f"{req.module_name}.c")
        c_file.unlink(missing_ok=True)  # the .pyx stays; the C is 5,000 lines of Cython output
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        entry = self.entry_dir(req.key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        if entry.exists():  # corrupt or foreign: we hold the lock, so nobody builds it now
            self._discard(entry)
        try:
            os.replace(tmp, entry)
        except OSError:
            if self._valid_entry(req.key) is None:  # not a concurrent `cache clear` + build
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            return
        self.builds += 1

    def _keep_failed(self, req: BuildRequest, tmp: Path, exc: CompileError) -> CompileError:
        """Move a failed build to ``failed/<key>``; the error, pointing there."""
        failed = self.root / "failed" / req.key
        if failed.exists():
            self._discard(failed)
        failed.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, failed)
        return CompileError(str(exc).replace(str(tmp), str(failed)))

    def _discard(self, path: Path) -> None:
        trash = self.root / "tmp" / f"trash-{uuid.uuid4().hex}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    # ---- maintenance (python -m opgraph cache ...)

    def entries(self) -> list[dict[str, Any]]:
        """The manifests of every module on disk (``valid`` says if it checks out,
        ``kernels`` how many C kernels it holds)."""
        out = []
        for manifest_path in sorted((self.root / "kernels").glob(f"*/*/{MANIFEST}")):
            key = manifest_path.parent.name
            try:
                manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                manifest = {"key": key}
            if not isinstance(manifest.get("kernels"), int):
                named = _BUNDLE_NAME.match(str(manifest.get("name", "")))
                manifest["kernels"] = int(named.group(1)) if named else 1
            manifest["path"] = str(manifest_path.parent)
            manifest["valid"] = self._valid_entry(key) is not None
            manifest["bytes"] = _size(manifest_path.parent)
            manifest["last_used"] = _mtime(manifest_path)
            out.append(manifest)
        return out

    def counts(self, entries: list[dict[str, Any]] | None = None) -> tuple[int, int]:
        """``(C kernels, modules)`` in the cache (or in ``entries``), as :func:`count_text`
        says them."""
        entries = self.entries() if entries is None else entries
        return sum(int(e["kernels"]) for e in entries), len(entries)

    def clear(self) -> int:
        """Delete every entry, build leftover and lock; returns how many entries there were."""
        n = len(list((self.root / "kernels").glob("*/*")))
        kernels = self.root / "kernels"
        if kernels.exists():
            self._discard(kernels)  # one rename: other processes never see half an entry
        for sub in ("index", "tmp", "failed", "locks"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        self._loaded.clear()
        return n

    def prune(self, max_age_days: float = 30.0) -> int:
        """Delete entries unused for ``max_age_days``, invalid ones, and stale leftovers."""
        now = time.time()
        limit = max_age_days * 86400
        removed = 0
        for entry in self.entries():
            if not entry["valid"] or now - entry["last_used"] > limit:
                self._discard(Path(entry["path"]))
                removed += 1
        for sub, age in (("tmp", 3600.0), ("failed", limit)):
            for path in (self.root / sub).glob("*"):
                if now - _mtime(path) > age:
                    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
        for index in (self.root / "index").glob("*/*.json"):
            try:
                bundle = json.loads(index.read_text(encoding="utf-8"))["module"]
            except (OSError, ValueError, KeyError, TypeError):
                bundle = ""
            if not bundle or self._valid_entry(str(bundle)) is None:
                index.unlink(missing_ok=True)
        for lock in (self.root / "locks").glob("*.lock"):
            if not self.entry_dir(lock.stem).exists() and now - _mtime(lock) > 3600:
                lock.unlink(missing_ok=True)
        return removed


#: A full-line Cython comment (``#`` then a space or the line's end), not a directive.
_CYTHON_COMMENT = re.compile(r"^[ \t]*#(?![ \t]*(?:cython|distutils)[ \t]*:)(?:[ \t].*)?$", re.M)
#: A C comment (in the verbatim C blocks).
_C_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def without_comments(source: str) -> str:
    """``source`` as the cache key sees it: without comments and blank lines.

    Generated modules name their Op and node in comments; two modules that differ only
    there compile to the same code, so they share one cache entry. Dropped: full-line
    Cython comments (``# ...``, but not the ``# cython:``/``# distutils:`` directives, and
    not C preprocessor lines such as ``#define``, which have no space after the ``#``) and
    C ``/* ... */`` comments.
    """
    text = _C_COMMENT.sub("", _CYTHON_COMMENT.sub("", source))
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _import(name: str, so: Path) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None:
        return module
    loader = importlib.machinery.ExtensionFileLoader(name, str(so))
    spec = importlib.util.spec_from_file_location(name, so, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {so}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    os.utime(so.parent / MANIFEST)  # last use, for `cache prune`
    return module


def _ext_suffix() -> str:
    import sysconfig

    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _cpu_count() -> int:
    """How many compiler runs go at once: more modules than this is a slow build."""
    return os.cpu_count() or 1


def _try_acquire(lock: Any, timeout: float) -> bool:
    """Acquire the file ``lock`` within ``timeout`` seconds (0: without waiting)."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        return False
    return True


def _progress(message: str, stream: Any = None) -> None:
    print(f"opgraph_c: {message}", file=stream or sys.stderr, flush=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def count_text(kernels: int, modules: int) -> str:
    """``'10 C kernels in 3 modules'``: how progress lines and ``cache info`` count."""
    return f"{_plural(kernels, 'C kernel')} in {_plural(modules, 'module')}"


class _BuildProgress:
    """The progress lines of one build (on stderr).

    A first line ("compiling 10 C kernels in 3 modules: ...") once the build has run
    :data:`PROGRESS_AFTER_S` seconds, or at once when it is known to be slow (more modules
    than CPUs: several rounds of compiler runs); after :data:`DETAIL_AFTER_S` seconds, a
    line per module done; and, after a first line, the total time at the end. A build that
    ends sooner prints nothing, and so does a load from the cache (it never gets here).
    """

    def __init__(
        self, units: list[tuple[BuildRequest, list[tuple[BuildRequest, str]]]], cpus: int
    ) -> None:
        self.kernels = sum(len(parts) for _, parts in units)
        self.modules = len(units)
        self.names = [req.spec.name for _, parts in units for req, _ in parts]
        self.parts = {unit.key: [req.spec.name for req, _ in parts] for unit, parts in units}
        self.start = time.perf_counter()
        self.done = 0
        self.started = False
        self.closed = False
        # stderr as the build starts: Cython's run redirects sys.stderr (for every thread,
        # the timer's too) into its error report while it translates a module.
        self.stream = sys.stderr
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if self.modules > cpus or PROGRESS_AFTER_S <= 0:
            self._begin()
        else:
            self._timer = threading.Timer(PROGRESS_AFTER_S, self._begin)
            self._timer.daemon = True
            self._timer.start()

    def _begin(self) -> None:
        with self._lock:
            if self.started or self.closed:  # a timer firing as the build ends
                return
            self.started = True
            what = _names_within(self.names, 80)
            _progress(f"compiling {count_text(self.kernels, self.modules)}: {what}", self.stream)

    def module_done(self, unit: BuildRequest) -> None:
        """Count ``unit`` as built; say so once the build has run :data:`DETAIL_AFTER_S`."""
        with self._lock:
            self.done += 1
            elapsed = time.perf_counter() - self.start
            if not self.started or self.modules == 1 or elapsed < DETAIL_AFTER_S:
                return
            names = self.parts.get(unit.key, [unit.spec.name])
            what = _names_within(names, 70)
            if len(names) > 1:
                what = f"{len(names)} kernels: {what}"
            _progress(f"[{self.done}/{self.modules}] {what} ({elapsed:.1f} s)", self.stream)

    def finish(self) -> None:
        """Stop the timer; after a first line, print the total time (if all modules built)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self.closed = True
            if self.started and self.done == self.modules:
                elapsed = time.perf_counter() - self.start
                total = count_text(self.kernels, self.modules)
                _progress(f"compiled {total} in {elapsed:.1f} s", self.stream)


def _names_within(names: list[str], width: int) -> str:
    """``names`` joined, as many whole ones as fit in about ``width`` characters, then how
    many more."""
    shown: list[str] = []
    for k, name in enumerate(names):
        if shown and len(", ".join([*shown, name])) > width:
            return f"{', '.join(shown)} and {len(names) - k} more"
        shown.append(name if len(name) <= width else name[: width - 4] + " ...")
    return ", ".join(shown)


_cache: KernelCache | None = None
_cache_root: str | None = None


def get_cache() -> KernelCache:
    """The process-wide cache, under the current ``config.compiledir``."""
    global _cache, _cache_root
    from opgraph.configdefaults import config

    root = str(config.compiledir)
    if _cache is None or _cache_root != root:
        _cache, _cache_root = KernelCache(Path(root) / "c"), root
    return _cache
