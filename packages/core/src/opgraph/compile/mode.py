"""Compilation modes: which rewrites run (a query over the rewrite database) and which linker.

A :class:`Mode` pairs a linker (a name such as ``"py"``, ``"vm"``, ``"cvm"`` or ``"auto"``,
or a Linker object) with an optimizer (a rewrite query name such as ``"fast_run"`` or
``"fast_compile"``, a ``RewriteDatabaseQuery``, or a rewriter object). Modes are looked up
by name through :func:`get_mode`: ``FAST_RUN``, ``FAST_COMPILE``, ``DEBUG_MODE``,
``PROFILE_MODE``, ``NanGuardMode`` and ``Mode`` come from core, and plugins add theirs with
the ``opgraph_modes`` hook. ``linker="auto"`` picks the installed linker that the plugins
rank highest (``opgraph_linker_preference``): ``cvm`` with opgraph-backend-c, ``vm`` with
core alone (:data:`~opgraph.configdefaults.AUTO_LINKER_MEANING`).

Compiling with the ``fast_run`` rewrites while opgraph-optimizers is not installed warns
once per process (:class:`OptimizersMissingWarning`): those rewrites come from that package.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from opgraph.configdefaults import AUTO_LINKER_MEANING, config
from opgraph.link.basic import Linker
from opgraph.plugins import get_plugin_manager
from opgraph.plugins.manager import _user_stacklevel
from opgraph.rewriting import PREDEFINED_OPTIMIZERS, RewriteDatabaseQuery, get_optdb

__all__ = [
    "AUTO_LINKER_MEANING",
    "FAST_COMPILE",
    "FAST_RUN",
    "PROFILE_MODE",
    "Mode",
    "OptimizersMissingWarning",
    "compiling_mode",
    "compiling_profiled",
    "compiling_with",
    "describe_linker",
    "get_default_mode",
    "get_mode",
    "register_mode",
    "resolve_linker",
    "resolve_optimizer",
]

#: Theano linker names served by a plugin that may not be installed.
_LINKER_PACKAGES = {
    "c": "opgraph-backend-c",
    "cvm": "opgraph-backend-c",
    "c|py": "opgraph-backend-c",
    "c|py_nogc": "opgraph-backend-c",
}
#: Linker names that name no linker on purpose, and what to do instead.
_LINKER_ADVICE = {
    "cuda": (
        "the GPU is not a linker: opgraph-backend-cuda moves graphs to the device with a "
        "rewrite, under any linker. Install it and set device=cuda "
        "(OPGRAPH_FLAGS=device=cuda,floatX=float32) or cuda__lift=always, and keep "
        "linker=auto"
    ),
}


def missing_linker_hint(name: str) -> str | None:
    """What to do about linker ``name`` (or ``<name>_nogc``) when it is not installed: the
    advice for a name that is no linker, else the package providing it; None if unknown."""
    base = name[: -len("_nogc")] if name.endswith("_nogc") else name
    if base in _LINKER_ADVICE:
        return _LINKER_ADVICE[base]
    package = _LINKER_PACKAGES.get(name) or _LINKER_PACKAGES.get(base)
    return f"install {package}, which provides it" if package else None


def resolve_linker(spec: str | Linker | None) -> Linker:
    """A fresh Linker for a name (``None`` means ``config.linker``), or ``spec`` itself.

    ``"auto"`` is the installed linker ranked highest by the plugins; a ``_nogc`` suffix
    (``vm_nogc``) turns garbage collection of intermediates off.
    """
    if isinstance(spec, Linker):
        return spec
    if spec is not None and not isinstance(spec, str):
        raise TypeError(f"a linker must be a name or a Linker instance, got {spec!r}")
    pm = get_plugin_manager()
    name = spec or config.linker
    if name == "auto":
        name = pm.best_linker()
    factories = pm.linkers()
    base, nogc = (name[: -len("_nogc")], True) if name.endswith("_nogc") else (name, False)
    if base not in factories:
        hint = missing_linker_hint(name) or (
            "use one of the known linkers, or install the plugin that provides it"
        )
        raise ValueError(
            f"unknown linker {name!r}. Known linkers are: {', '.join(sorted(factories))} "
            f"(and 'auto', plus '<name>_nogc').\nHINT: {hint}."
        )
    linker = factories[base]()
    if not isinstance(linker, Linker):
        raise TypeError(
            f"the factory of linker {base!r} (from {pm.linkers().providers[base].label}) "
            f"returned {linker!r}, not an opgraph.link.basic.Linker"
        )
    if nogc:
        linker.allow_gc = False
    return linker


def describe_linker(spec: str = "auto") -> str:
    """``'auto -> cvm (CLinker)'``: a linker name and what it resolves to here (the name
    alone for a name that is not ``auto``). ``python -m opgraph plugins`` and a Mode's
    repr say ``linker=auto`` this way; :data:`AUTO_LINKER_MEANING` says what it means."""
    if spec != "auto":
        return spec
    try:
        name = get_plugin_manager().best_linker()
        return f"auto -> {name} ({type(resolve_linker(name)).__name__})"
    except Exception as exc:  # printing must not fail: say why auto has no answer
        return f"auto -> none ({str(exc).splitlines()[0]})"


class OptimizersMissingWarning(UserWarning):
    """FAST_RUN (any mode running the ``fast_run`` rewrites) compiled a function while
    opgraph-optimizers, which provides those rewrites, is not installed."""


#: What FAST_RUN loses without opgraph-optimizers (the warning names it).
MISSING_OPTIMIZERS_MESSAGE = (
    "FAST_RUN (a mode running the fast_run rewrites) compiled this function without "
    "opgraph-optimizers, which provides those rewrites: it is not installed (or failed to "
    "load: see `python -m opgraph plugins`). Lost: stabilization (such as "
    "log(1 + exp(x)) -> softplus(x); without it a cross-entropy cost can come out nan or "
    "inf), elementwise fusion, BLAS (dot -> gemm/gemv), in-place operations and the "
    "convolution GEMM rewrites. The function still runs, unstabilized and slower.\n"
    "HINT: pip install opgraph-optimizers (this warning is shown once per process)."
)
_optimizers_warned = False


def optimizers_installed() -> bool:
    """Whether the opgraph-optimizers plugin is loaded (it provides FAST_RUN's rewrites)."""
    return any(
        info.status == "loaded"
        and (
            info.distribution == "opgraph-optimizers"
            or (info.module or "").startswith("opgraph_optimizers")
        )
        for info in get_plugin_manager().plugin_infos()
    )


def _warn_if_optimizers_missing(query: RewriteDatabaseQuery) -> None:
    """Warn once per process when ``query`` runs the fast_run rewrites without
    opgraph-optimizers (:data:`MISSING_OPTIMIZERS_MESSAGE`)."""
    global _optimizers_warned
    if _optimizers_warned or "fast_run" not in query.include or optimizers_installed():
        return
    _optimizers_warned = True
    warnings.warn(
        MISSING_OPTIMIZERS_MESSAGE, OptimizersMissingWarning, stacklevel=_user_stacklevel()
    )


def resolve_optimizer(spec: Any) -> Any:
    """The rewrite query (or rewriter object) an optimizer spec stands for.

    ``"default"`` means ``config.optimizer``; names are Theano's (``fast_run``,
    ``fast_compile``, ``merge``, ``None``, ``stabilize``, ``unsafe``); a query or any
    object with a ``rewrite(fgraph)`` method is used as is.
    """
    if isinstance(spec, str) and spec == "default":
        spec = config.optimizer
    if isinstance(spec, RewriteDatabaseQuery):
        return spec
    if spec is None or isinstance(spec, str):
        if spec in PREDEFINED_OPTIMIZERS:
            return PREDEFINED_OPTIMIZERS[spec]
        known = ", ".join(sorted(str(k) for k in PREDEFINED_OPTIMIZERS if k is not None))
        raise ValueError(f"unknown optimizer {spec!r}. Known optimizers are: {known}.")
    if callable(getattr(spec, "rewrite", None)) or callable(getattr(spec, "optimize", None)):
        return spec
    raise TypeError(
        f"an optimizer must be a name, a RewriteDatabaseQuery or a rewriter, got {spec!r}"
    )


class Mode:
    """How to compile: a rewrite query and a linker (Theano's ``Mode``).

    Parameters
    ----------
    linker
        A linker name (``"py"``, ``"vm"``, ``"cvm"``, ``"auto"``, ``"vm_nogc"``) or Linker
        object; None means ``config.linker``.
    optimizer
        ``"default"`` (``config.optimizer``), a name such as ``"fast_run"``,
        ``"fast_compile"``, ``"merge"`` or ``"None"``, a ``RewriteDatabaseQuery``, or an
        object with ``rewrite(fgraph)``.
    profile
        Profile every function compiled with this mode (what ``PROFILE_MODE`` sets).

    Examples
    --------
    >>> mode = Mode(linker="py", optimizer="fast_run").excluding("fusion")
    """

    def __init__(
        self,
        linker: str | Linker | None = None,
        optimizer: Any = "default",
        *,
        profile: bool = False,
    ) -> None:
        self.provided_linker = linker
        self.provided_optimizer = optimizer
        self.profile = profile
        self._optimizer: Any = None

    # --- the two halves

    @property
    def linker(self) -> Linker:
        """The Linker this mode compiles with (a fresh one for a linker name)."""
        return resolve_linker(self.provided_linker)

    @property
    def optimizer(self) -> Any:
        """The rewrite query (or rewriter object) this mode runs."""
        if self._optimizer is None:
            self._optimizer = resolve_optimizer(self.provided_optimizer)
        return self._optimizer

    def get_rewriter(self) -> Any:
        """The graph rewriter to run on a FunctionGraph (``rewriter.rewrite(fgraph)``), or
        None when the query selects nothing."""
        opt = self.optimizer
        if isinstance(opt, RewriteDatabaseQuery):
            if not opt.include and not opt.extra_rewrites:
                return None  # optimizer=None: selects nothing, so skip the walk
            _warn_if_optimizers_missing(opt)
            return get_optdb().query(opt)
        return opt

    def prepare_fgraph(self, fgraph: Any) -> None:
        """Called on each FunctionGraph before rewriting (DebugMode attaches a recorder)."""

    # --- derived modes

    def _with_query(self, method: str, tags: tuple[str, ...]) -> Mode:
        opt = self.optimizer
        if not isinstance(opt, RewriteDatabaseQuery):
            raise TypeError(
                f"cannot call {method}() on a mode whose optimizer is {opt!r} rather than a "
                "rewrite query. HINT: build the mode with optimizer='fast_run' (or another "
                "query name)."
            )
        return self.clone(optimizer=getattr(opt, method)(*tags))

    def including(self, *tags: str) -> Mode:
        """A copy that also runs the rewrites with any of ``tags`` (tag or rewrite names)."""
        return self._with_query("including", tags)

    def excluding(self, *tags: str) -> Mode:
        """A copy that leaves out the rewrites with any of ``tags`` (tag or rewrite names)."""
        return self._with_query("excluding", tags)

    def requiring(self, *tags: str) -> Mode:
        """A copy that runs only rewrites having all of ``tags``."""
        return self._with_query("requiring", tags)

    def clone(
        self,
        link_kwargs: dict[str, Any] | None = None,
        optimizer: Any = "",
        *,
        linker: str | Linker | None = None,
        **attrs: Any,
    ) -> Mode:
        """A copy of this mode, with another optimizer or linker if given.

        ``link_kwargs`` sets attributes of the linker (e.g. ``{"allow_gc": False}``);
        other keyword arguments set attributes of the copy.
        """
        new = copy.copy(self)
        if optimizer != "":
            new.provided_optimizer = optimizer
            new._optimizer = None
        if linker is not None:
            new.provided_linker = linker
        if link_kwargs:
            resolved = resolve_linker(new.provided_linker).clone()
            for key, value in link_kwargs.items():
                setattr(resolved, key, value)
            new.provided_linker = resolved
        for key, value in attrs.items():
            setattr(new, key, value)
        return new

    # --- printing and pickling

    def __str__(self) -> str:
        linker = self.provided_linker
        shown = describe_linker(linker) if linker == "auto" else linker
        return f"{type(self).__name__}(linker={shown}, optimizer={self.provided_optimizer})"

    def __repr__(self) -> str:
        return str(self)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_optimizer"] = None  # re-resolved after unpickling
        return state


_registered: dict[str, Mode] = {}


def register_mode(name: str, mode: Mode) -> None:
    """Make ``mode`` available by name in this process (plugins use ``opgraph_modes``)."""
    if name in _registered:
        raise ValueError(f"a mode named {name!r} is already registered")
    _registered[name] = mode


def _named_mode(name: str) -> Mode:
    if name in _registered:
        return _registered[name]
    if name == "Mode":
        return Mode()
    modes = get_plugin_manager().modes()
    factory = modes.get(name)
    if factory is None:
        known = ", ".join(sorted({"Mode", *modes, *_registered}))
        raise ValueError(
            f"unknown mode {name!r}. Known modes are: {known}.\n"
            "HINT: check the spelling, or install the plugin that provides the mode."
        )
    mode = factory()
    if not isinstance(mode, Mode):
        raise TypeError(
            f"the factory of mode {name!r} (from {modes.providers[name].label}) returned "
            f"{mode!r}, not an opgraph.compile.mode.Mode"
        )
    return mode


def get_mode(mode: Mode | str | None = None) -> Mode:
    """The Mode for ``mode``: a Mode, a mode name, or None for ``config.mode``.

    Only the default mode (None) gets ``config.optimizer_including``/``excluding``/
    ``requiring`` applied, as in Theano.
    """
    if isinstance(mode, Mode):
        return mode
    if mode is None:
        result = _named_mode(config.mode)
        for method in ("excluding", "including", "requiring"):
            tags = [t for t in getattr(config, f"optimizer_{method}").split(":") if t]
            if tags:
                result = getattr(result, method)(*tags)
        return result
    if isinstance(mode, str):
        return _named_mode(mode)
    raise TypeError(f"mode must be a Mode, a mode name or None, got {mode!r}")


def get_default_mode() -> Mode:
    """The mode ``function()`` uses when none is given (``config.mode``)."""
    return get_mode(None)


#: The mode of the function being linked (inner graphs of Scan and OpFromGraph compile with it).
_compiling: ContextVar[Mode | None] = ContextVar("opgraph_compiling_mode", default=None)
#: Whether the function being linked is profiled (its inner graphs are then profiled too).
_profiling: ContextVar[bool] = ContextVar("opgraph_compiling_profiled", default=False)


def compiling_mode() -> Mode | None:
    """The mode of the function whose nodes are being linked now, or None outside linking.

    An Op with an inner graph (Scan, OpFromGraph) built without a mode of its own compiles
    that graph with the mode of the function it is part of: a DEBUG_MODE function checks the
    inner nodes too, and a ``linker="py"`` function runs them with ``perform``.
    """
    return _compiling.get()


def compiling_profiled() -> bool:
    """True while linking a profiled function: inner graphs compile with a profile of their
    own, which the outer profile's summary prints per loop."""
    return _profiling.get()


@contextlib.contextmanager
def compiling_with(mode: Mode, profiled: bool = False) -> Iterator[None]:
    """Make ``mode`` the :func:`compiling_mode` (and ``profiled`` the
    :func:`compiling_profiled`) while the block runs (``FunctionMaker`` links inside one)."""
    token = _compiling.set(mode)
    token_p = _profiling.set(bool(profiled))
    try:
        yield
    finally:
        _profiling.reset(token_p)
        _compiling.reset(token)


# Theano's predefined modes. FAST_RUN takes the best installed linker.
FAST_RUN = Mode("auto", "fast_run")
FAST_COMPILE = Mode("vm", "fast_compile")
PROFILE_MODE = Mode("auto", "fast_run", profile=True)
