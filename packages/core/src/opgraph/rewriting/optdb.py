"""The global rewrite database: Theano's stages at PyTensor's positions, and the standard queries.

=====================  ========  ==============  ===================================
stage                  position  kind            tags
=====================  ========  ==============  ===================================
merge1                 0         SequenceDB      fast_run, fast_compile, merge
shape                  0.1       SequenceDB      fast_run, fast_compile, shape
canonicalize           1         EquilibriumDB   fast_run, fast_compile
stabilize              1.5       EquilibriumDB   fast_run
blas                   1.7       SequenceDB      fast_run
specialize             2         EquilibriumDB   fast_run
uncanonicalize         3         EquilibriumDB   fast_run
merge2                 49        SequenceDB      fast_run, merge
fusion                 49        SequenceDB      fast_run
add_destroy_handler    49.5      ProxyDB         fast_run, inplace
inplace                75        SequenceDB      fast_run, inplace
merge3                 100       SequenceDB      fast_run, fast_compile, merge
=====================  ========  ==============  ===================================

Core registers no rewrites into the stages (they live in ``opgraph-optimizers`` and other
plugins); it only creates them, so that plugins have somewhere to register. An entry inside
a stage is selected by a query only if it has an include tag of its own: the
``register_*`` helpers and :class:`~opgraph.rewriting.db.RewriteSet` add ``fast_run``
(and ``fast_compile`` for canonicalize); a merge rewriter in ``merge1`` should also be
tagged ``merge`` so that ``optimizer=merge`` runs it.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from opgraph.graph.destroyhandler import attach_destroy_handler
from opgraph.plugins import get_plugin_manager
from opgraph.rewriting.basic import GraphRewriter, NodeRewriter, Rewriter
from opgraph.rewriting.db import (
    DEFAULT_STAGE_TAGS,
    EquilibriumDB,
    ProxyDB,
    RewriteDatabaseQuery,
    SequenceDB,
)

__all__ = [
    "OPT_FAST_COMPILE",
    "OPT_FAST_RUN",
    "OPT_MERGE",
    "OPT_NONE",
    "OPT_STABILIZE",
    "OPT_UNSAFE",
    "PREDEFINED_OPTIMIZERS",
    "STAGES",
    "AddDestroyHandler",
    "get_optdb",
    "make_optdb",
    "register_canonicalize",
    "register_specialize",
    "register_stabilize",
]

OPT_FAST_RUN = RewriteDatabaseQuery(include=["fast_run"])
OPT_FAST_COMPILE = RewriteDatabaseQuery(include=["fast_compile"])
OPT_STABILIZE = RewriteDatabaseQuery(include=["fast_run"], position_cutoff=1.5000001)
OPT_MERGE = RewriteDatabaseQuery(include=["merge"])
OPT_NONE = RewriteDatabaseQuery(include=[])
#: Theano's ``optimizer=unsafe``: every fast_run rewrite plus those tagged ``unsafe``.
OPT_UNSAFE = RewriteDatabaseQuery(include=["fast_run", "unsafe"])

#: ``config.optimizer`` value -> query.
PREDEFINED_OPTIMIZERS: dict[str | None, RewriteDatabaseQuery] = {
    None: OPT_NONE,
    "None": OPT_NONE,
    "merge": OPT_MERGE,
    "fast_run": OPT_FAST_RUN,
    "fast_compile": OPT_FAST_COMPILE,
    "stabilize": OPT_STABILIZE,
    "unsafe": OPT_UNSAFE,
    "o4": OPT_FAST_RUN,
}


class AddDestroyHandler(GraphRewriter):
    """Attach a DestroyHandler before the in-place stage, so in-place rewrites stay correct."""

    name = "add_destroy_handler"

    def add_requirements(self, fgraph: Any) -> None:
        attach_destroy_handler(fgraph)

    def apply(self, fgraph: Any) -> None:
        attach_destroy_handler(fgraph)


def _eq_db_newtrees() -> EquilibriumDB:
    return EquilibriumDB(ignore_newtrees=False)


def _destroy_proxy() -> ProxyDB:
    return ProxyDB(AddDestroyHandler())


def _stages() -> list[tuple[str, Callable[[], Any], float, tuple[str, ...]]]:
    return [
        ("merge1", SequenceDB, 0, ("fast_run", "fast_compile", "merge")),
        ("shape", SequenceDB, 0.1, ("fast_run", "fast_compile", "shape")),
        ("canonicalize", _eq_db_newtrees, 1, ("fast_run", "fast_compile")),
        ("stabilize", EquilibriumDB, 1.5, ("fast_run",)),
        ("blas", SequenceDB, 1.7, ("fast_run",)),
        ("specialize", _eq_db_newtrees, 2, ("fast_run",)),
        ("uncanonicalize", EquilibriumDB, 3, ("fast_run",)),
        ("merge2", SequenceDB, 49, ("fast_run", "merge")),
        ("fusion", SequenceDB, 49, ("fast_run",)),
        ("add_destroy_handler", _destroy_proxy, 49.5, ("fast_run", "inplace")),
        ("inplace", SequenceDB, 75, ("fast_run", "inplace")),
        ("merge3", SequenceDB, 100, ("fast_run", "fast_compile", "merge")),
    ]


#: The stage names, in position order.
STAGES: tuple[str, ...] = tuple(name for name, *_ in _stages())


def make_optdb() -> SequenceDB:
    """A fresh database holding core's (empty) stages and no plugin's rewrites.

    Tests build one and install a single :class:`~opgraph.rewriting.db.RewriteSet` into it.
    """
    optdb = SequenceDB(name="optdb")
    for name, factory, position, tags in _stages():
        optdb.register(name, factory(), *tags, position=position, plugin="opgraph-core")
    return optdb


_optdb: SequenceDB | None = None
_lock = threading.RLock()


def get_optdb() -> SequenceDB:
    """The process-wide rewrite database, with every plugin's rewrites installed.

    On the first call the plugin manager installs the plugins' rewrites
    (``opgraph_register_rewrites``). If that machinery fails, a warning says so and
    compilation goes on with core alone.
    """
    global _optdb
    if _optdb is not None:
        return _optdb
    with _lock:
        if _optdb is None:
            optdb = make_optdb()
            _optdb = optdb  # set first: a plugin's hook may call get_optdb() again
            try:
                get_plugin_manager().install_rewrites(optdb)
            except Exception as exc:
                warnings.warn(
                    f"could not install the plugins' rewrites ({type(exc).__name__}: {exc}); "
                    "compiling with core's rewrite stages only.\n"
                    "HINT: run `python -m opgraph plugins` to see which plugin fails.",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return _optdb


def _register_in(
    stage: str, rewriter: Any, tags: tuple[Any, ...], name: str | None, **kwargs: Any
) -> Any:
    """``register_<stage>(rw, *tags)`` or, as a decorator, ``@register_<stage>(*tags)``."""
    if not isinstance(rewriter, Rewriter):
        if rewriter is not None and not isinstance(rewriter, str):
            raise TypeError(f"register_{stage} takes a rewriter or tags, got {rewriter!r}")
        extra = (rewriter, *tags) if isinstance(rewriter, str) else tags

        def decorator(rw: Rewriter) -> Rewriter:
            return _register_in(stage, rw, extra, name, **kwargs)

        return decorator
    optdb = get_optdb()
    all_tags = tuple(dict.fromkeys((*DEFAULT_STAGE_TAGS[stage], *tags)))
    optdb[stage].register(
        name or rewriter.name or str(rewriter),
        rewriter,
        *all_tags,
        plugin=optdb.current_plugin,
        **kwargs,
    )
    return rewriter


def register_canonicalize(
    rewriter: NodeRewriter | GraphRewriter | str | None = None,
    *tags: str,
    name: str | None = None,
    **kwargs: Any,
) -> Any:
    """Register a rewriter in ``canonicalize`` (tags fast_run, fast_compile, plus ``tags``).

    Also a decorator: ``@register_canonicalize`` or ``@register_canonicalize("shape")``.
    Prefer a package-level :class:`~opgraph.rewriting.db.RewriteSet` in plugins.
    """
    return _register_in("canonicalize", rewriter, tags, name, **kwargs)


def register_stabilize(
    rewriter: NodeRewriter | GraphRewriter | str | None = None,
    *tags: str,
    name: str | None = None,
    **kwargs: Any,
) -> Any:
    """Register a rewriter in ``stabilize`` (tag fast_run, plus ``tags``); also a decorator."""
    return _register_in("stabilize", rewriter, tags, name, **kwargs)


def register_specialize(
    rewriter: NodeRewriter | GraphRewriter | str | None = None,
    *tags: str,
    name: str | None = None,
    **kwargs: Any,
) -> Any:
    """Register a rewriter in ``specialize`` (tag fast_run, plus ``tags``); also a decorator."""
    return _register_in("specialize", rewriter, tags, name, **kwargs)


def __getattr__(name: str) -> Any:
    # ``from opgraph.rewriting.optdb import optdb`` gives the global database, lazily.
    if name == "optdb":
        return get_optdb()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
