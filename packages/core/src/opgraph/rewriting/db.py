"""Rewrite databases: rewriters indexed by name and tags, turned into rewriters by queries.

A mode is a query: ``RewriteDatabaseQuery(include=["fast_run"]).excluding("inplace")``. An
entry is selected if it has *any* include tag, *all* require tags and *no* exclude tag; its
name counts as a tag, so ``excluding("local_mul_one")`` turns off one rewrite. Databases
nest: a selected sub-database is queried in turn (with ``subquery[name]`` if given), and
the result is a rewriter: a :class:`SequenceDB` gives a ``SequentialGraphRewriter`` in
position order, an :class:`EquilibriumDB` an ``EquilibriumGraphRewriter``, a
:class:`LocalGroupDB` one ``in2out`` walk.

Packages declare rewrites on a :class:`RewriteSet` with decorators and install it from
their ``opgraph_register_rewrites`` hook, so that nothing is registered as a side effect of
an import and listings can say which plugin added which rewrite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opgraph.rewriting.basic import (
    EquilibriumGraphRewriter,
    GraphRewriter,
    NodeRewriter,
    Rewriter,
    SequentialGraphRewriter,
    WalkingGraphRewriter,
    walk_one,
)

__all__ = [
    "EquilibriumDB",
    "LocalGroupDB",
    "ProxyDB",
    "RewriteDatabase",
    "RewriteDatabaseQuery",
    "RewriteEntry",
    "RewriteSet",
    "SequenceDB",
]


@dataclass
class RewriteEntry:
    """One registration: a rewriter (or sub-database) under a name, with tags and position."""

    name: str
    rewriter: Any
    tags: set[str]
    position: float = 0.0
    plugin: str | None = None
    use_db_name_as_tag: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    order: int = 0


class RewriteDatabaseQuery:
    """Which entries of a database to use.

    Parameters
    ----------
    include
        An entry needs at least one of these tags (or names).
    require
        An entry needs all of these tags.
    exclude
        An entry with any of these tags is left out.
    subquery
        ``{sub-database name: query}`` to use for that sub-database instead of this one.
    position_cutoff
        Only entries of a :class:`SequenceDB` at a position below this are used.
    extra_rewrites
        Rewriters added to the result (``(rewriter, position)`` pairs for a SequenceDB).
    """

    def __init__(
        self,
        include: Iterable[str],
        require: Iterable[str] = (),
        exclude: Iterable[str] = (),
        subquery: Mapping[str, RewriteDatabaseQuery] | None = None,
        position_cutoff: float = math.inf,
        extra_rewrites: Sequence[Any] = (),
    ) -> None:
        for arg, value in (("include", include), ("require", require), ("exclude", exclude)):
            if isinstance(value, str):
                raise TypeError(f"{arg} must be a list of tags, got the string {value!r}")
        self.include = frozenset(include)
        self.require = frozenset(require)
        self.exclude = frozenset(exclude)
        self.subquery = dict(subquery or {})
        self.position_cutoff = position_cutoff
        self.extra_rewrites = list(extra_rewrites)

    def _copy(self, **changes: Any) -> RewriteDatabaseQuery:
        args = {
            "include": self.include,
            "require": self.require,
            "exclude": self.exclude,
            "subquery": self.subquery,
            "position_cutoff": self.position_cutoff,
            "extra_rewrites": self.extra_rewrites,
        }
        args.update(changes)
        return RewriteDatabaseQuery(**args)

    def including(self, *tags: str) -> RewriteDatabaseQuery:
        """A copy that also includes entries with any of ``tags``."""
        return self._copy(include=self.include | set(tags))

    def excluding(self, *tags: str) -> RewriteDatabaseQuery:
        """A copy that also leaves out entries with any of ``tags`` (or named so)."""
        return self._copy(exclude=self.exclude | set(tags))

    def requiring(self, *tags: str) -> RewriteDatabaseQuery:
        """A copy that also requires all of ``tags``."""
        return self._copy(require=self.require | set(tags))

    def register(self, *rewriters: Any) -> RewriteDatabaseQuery:
        """A copy with ``rewriters`` added to the result (``(rewriter, position)`` pairs)."""
        return self._copy(extra_rewrites=[*self.extra_rewrites, *rewriters])

    def selects(self, tags: set[str]) -> bool:
        """True if an entry with ``tags`` is selected by this query."""
        return (
            not self.include.isdisjoint(tags)
            and self.require <= tags
            and self.exclude.isdisjoint(tags)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RewriteDatabaseQuery):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key()[:4])

    def _key(self) -> tuple[Any, ...]:
        return (
            self.include,
            self.require,
            self.exclude,
            self.position_cutoff,
            tuple(sorted(self.subquery.items(), key=lambda kv: kv[0])),
            tuple(map(id, self.extra_rewrites)),
        )

    def __str__(self) -> str:
        parts = [f"include={sorted(self.include)}"]
        if self.require:
            parts.append(f"require={sorted(self.require)}")
        if self.exclude:
            parts.append(f"exclude={sorted(self.exclude)}")
        if self.position_cutoff != math.inf:
            parts.append(f"position_cutoff={self.position_cutoff}")
        if self.subquery:
            parts.append(f"subquery={self.subquery}")
        return f"RewriteDatabaseQuery({', '.join(parts)})"

    __repr__ = __str__


def _parse_tags(tags: Sequence[str], kwtags: Mapping[str, Any]) -> RewriteDatabaseQuery:
    """Theano's string form: ``"+tag"`` or ``"tag"`` includes, ``"-tag"`` excludes,
    ``"&tag"`` requires."""
    include, require, exclude = set(), set(), set()
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"query tags must be strings, got {tag!r}")
        if tag.startswith("-"):
            exclude.add(tag[1:])
        elif tag.startswith("&"):
            require.add(tag[1:])
        else:
            include.add(tag[1:] if tag.startswith("+") else tag)
    return RewriteDatabaseQuery(include, require, exclude, **kwtags)


class RewriteDatabase:
    """Rewriters (and sub-databases) by name, selected by tags.

    ``query`` returns the selected rewriters as a list, in registration order (sub-classes
    turn them into one rewriter). ``current_plugin``, set by the plugin manager while a
    plugin installs its rewrites, is recorded on each entry registered meanwhile.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._current_plugin: str | None = None
        self._parent: RewriteDatabase | None = None
        self._entries: dict[str, RewriteEntry] = {}
        self._order = 0

    @property
    def current_plugin(self) -> str | None:
        """The plugin installing rewrites right now (set by the plugin manager on the root
        database; sub-databases see their parent's)."""
        db: RewriteDatabase | None = self
        while db is not None:
            if db._current_plugin is not None:
                return db._current_plugin
            db = db._parent
        return None

    @current_plugin.setter
    def current_plugin(self, value: str | None) -> None:
        self._current_plugin = value

    # -- registering
    def register(
        self,
        name: str,
        rewriter: Any,
        *tags: str,
        use_db_name_as_tag: bool = True,
        position: float | str = "last",
        plugin: str | None = None,
        **options: Any,
    ) -> Any:
        """Register ``rewriter`` under ``name`` with ``tags``; return the rewriter.

        Parameters
        ----------
        name
            Unique in this database; also a tag (``excluding(name)`` turns the entry off).
        rewriter
            A NodeRewriter, GraphRewriter or a sub-database.
        tags
            When the entry runs (``fast_run``, ``fast_compile``) and what it is.
        use_db_name_as_tag
            Also tag the entry with this database's name.
        position
            Order in a SequenceDB (a float, or ``"last"``); ignored by other databases.
        plugin
            The plugin registering it; default ``self.current_plugin``.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a rewrite needs a non-empty string name, got {name!r}")
        if not isinstance(rewriter, Rewriter | RewriteDatabase):
            raise TypeError(
                f"cannot register {rewriter!r} as {name!r}: expected a NodeRewriter, "
                "GraphRewriter or rewrite database."
            )
        for tag in tags:
            if not isinstance(tag, str):
                raise TypeError(f"tags of {name!r} must be strings, got {tag!r}")
        existing = self._entries.get(name)
        if existing is not None:
            by = f" by {existing.plugin}" if existing.plugin else ""
            raise ValueError(
                f"a rewrite named {name!r} is already registered in {self.name or 'this db'}"
                f"{by}. HINT: pick another name, or unregister the old one first."
            )
        self._check_options(name, options)
        if isinstance(rewriter, RewriteDatabase):
            if rewriter.name is None:
                rewriter.name = name
            rewriter._parent = self
        entry = RewriteEntry(
            name=name,
            rewriter=rewriter,
            tags={name, *tags},
            position=self._position(position),
            plugin=plugin if plugin is not None else self.current_plugin,
            use_db_name_as_tag=use_db_name_as_tag,
            options=dict(options),
            order=self._order,
        )
        self._order += 1
        self._entries[name] = entry
        return rewriter

    def _check_options(self, name: str, options: Mapping[str, Any]) -> None:
        if options:
            raise TypeError(
                f"{type(self).__name__}.register({name!r}) got unknown options {sorted(options)}"
            )

    def _position(self, position: float | str) -> float:
        if position == "last":
            return max((e.position for e in self._entries.values()), default=-1.0) + 1.0
        if isinstance(position, str):
            raise ValueError(f"position must be a number or 'last', got {position!r}")
        return float(position)

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (KeyError if absent)."""
        del self._entries[name]

    def add_tags(self, name: str, *tags: str) -> None:
        """Add ``tags`` to the entry ``name``."""
        self._entries[name].tags.update(tags)

    def remove_tags(self, name: str, *tags: str) -> None:
        """Remove ``tags`` from the entry ``name`` (its name always stays a tag)."""
        self._entries[name].tags.difference_update(set(tags) - {name})

    # -- looking up
    def __getitem__(self, name: str) -> Any:
        entry = self._entries.get(name)
        if entry is None:
            raise KeyError(
                f"no rewrite or database named {name!r} in {self.name or 'this db'}; "
                f"it has: {', '.join(self._entries) or 'nothing'}"
            )
        return entry.rewriter

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, name: str) -> RewriteEntry:
        """The :class:`RewriteEntry` registered as ``name``."""
        return self._entries[name]

    def entries(self) -> list[RewriteEntry]:
        """This database's entries in registration order."""
        return list(self._entries.values())

    def walk(self, prefix: str = "") -> Iterator[tuple[str, RewriteEntry]]:
        """Yield ``(path, entry)`` for every entry here and in sub-databases, depth first
        (``path`` like ``"canonicalize/local_mul_one"``), iteratively."""
        stack: list[tuple[str, Iterator[RewriteEntry]]] = [(prefix, iter(self.entries()))]
        while stack:
            path, it = stack[-1]
            entry = next(it, None)
            if entry is None:
                stack.pop()
                continue
            full = f"{path}/{entry.name}" if path else entry.name
            yield full, entry
            if isinstance(entry.rewriter, RewriteDatabase):
                stack.append((full, iter(entry.rewriter.entries())))

    def find(self, name: str) -> RewriteDatabase | None:
        """The database called ``name``: this one, or a nested sub-database."""
        if self.name == name:
            return self
        for _, entry in self.walk():
            if entry.name == name and isinstance(entry.rewriter, RewriteDatabase):
                return entry.rewriter
        return None

    # -- querying
    def _tags(self, entry: RewriteEntry) -> set[str]:
        if entry.use_db_name_as_tag and self.name:
            return entry.tags | {self.name}
        return entry.tags

    def _select(self, q: RewriteDatabaseQuery) -> list[tuple[RewriteEntry, Any]]:
        """Selected entries with their rewriter (sub-databases replaced by their query)."""
        selected = []
        for entry in self._entries.values():
            if not q.selects(self._tags(entry)):
                continue
            rw = entry.rewriter
            if isinstance(rw, RewriteDatabase):
                # position_cutoff counts in the database queried, not in sub-databases
                default = q._copy(extra_rewrites=(), position_cutoff=math.inf)
                is_proxy = isinstance(rw, ProxyDB)
                rw = rw.query(q.subquery.get(entry.name, default))
                if isinstance(rw, Rewriter) and not is_proxy:
                    rw.name = entry.name
            selected.append((entry, rw))
        return selected

    def query(self, *tags: Any, **kwtags: Any) -> Any:
        """Select entries with a :class:`RewriteDatabaseQuery`, or with tag strings
        (``"fast_run"``, ``"-inplace"``, ``"&stable"``); return the selected rewriters."""
        q = self._as_query(tags, kwtags)
        result = [rw for _, rw in self._select(q)]
        return result + [r[0] if isinstance(r, tuple) else r for r in q.extra_rewrites]

    @staticmethod
    def _as_query(tags: Sequence[Any], kwtags: Mapping[str, Any]) -> RewriteDatabaseQuery:
        if len(tags) == 1 and isinstance(tags[0], RewriteDatabaseQuery):
            if kwtags:
                raise TypeError("pass either a RewriteDatabaseQuery or tags, not both")
            return tags[0]
        return _parse_tags(tags, kwtags)

    def print_summary(self, stream: Any = None) -> None:
        """Print every entry (recursively) with its tags, position and plugin."""
        print(self.describe(), file=stream)

    def describe(self) -> str:
        """Every entry, one per line: path, position, tags and the plugin that added it."""
        lines = [f"{type(self).__name__} {self.name or ''}".rstrip()]
        for path, e in self.walk():
            depth = path.count("/")
            by = f"  (from {e.plugin})" if e.plugin else ""
            lines.append(
                f"{'  ' * (depth + 1)}{e.name} @{e.position:g} "
                f"[{', '.join(sorted(e.tags - {e.name}))}]{by}"
            )
        return "\n".join(lines)

    def _location(self) -> str:
        """What a rewriter built by :meth:`query` reports as its location."""
        return f"<{type(self).__name__} {self.name or '?'}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.name or ''}: {', '.join(self._entries)})"


class SequenceDB(RewriteDatabase):
    """Entries run one after the other in the order of their float ``position``.

    ``query`` returns a :class:`SequentialGraphRewriter`; node rewriters are wrapped in
    ``in2out``; entries at or past ``query.position_cutoff`` are left out. Ties keep
    registration order.
    """

    def __init__(self, name: str | None = None, failure_callback: Any = None) -> None:
        super().__init__(name)
        self.failure_callback = failure_callback

    def query(self, *tags: Any, **kwtags: Any) -> SequentialGraphRewriter:
        q = self._as_query(tags, kwtags)
        items = [
            (e.position, e.order, rw) for e, rw in self._select(q) if e.position < q.position_cutoff
        ]
        order = len(self._entries)
        for extra in q.extra_rewrites:
            rw, pos = extra if isinstance(extra, tuple) else (extra, math.inf)
            items.append((float(pos), order, rw))
            order += 1
        items.sort(key=lambda t: (t[0], t[1]))
        seq = SequentialGraphRewriter(
            [rw for _, _, rw in items],
            failure_callback=self.failure_callback,
            name=self.name or "sequence",
        )
        seq.location = self._location()
        return seq

    def positions(self) -> dict[str, float]:
        """``{name: position}`` of every entry."""
        return {name: e.position for name, e in self._entries.items()}


class EquilibriumDB(RewriteDatabase):
    """Entries applied together until a fixed point: ``query`` returns an
    :class:`EquilibriumGraphRewriter` over the selected node and graph rewriters.

    ``register(..., final_rewriter=True)`` runs a graph rewriter at the end of each pass,
    ``cleanup=True`` after each phase that changed the graph (e.g. a merge).
    """

    def __init__(
        self,
        name: str | None = None,
        ignore_newtrees: bool = True,
        tracks_on_change_inputs: bool = False,
        max_use_ratio: float | None = None,
    ) -> None:
        super().__init__(name)
        self.ignore_newtrees = ignore_newtrees
        self.tracks_on_change_inputs = tracks_on_change_inputs
        self.max_use_ratio = max_use_ratio

    def _check_options(self, name: str, options: Mapping[str, Any]) -> None:
        unknown = set(options) - {"final_rewriter", "cleanup"}
        if unknown:
            raise TypeError(f"EquilibriumDB.register({name!r}) got unknown options {unknown}")
        if options.get("final_rewriter") and options.get("cleanup"):
            raise ValueError(f"{name!r} cannot be both a final rewriter and a cleanup rewriter")

    def query(self, *tags: Any, **kwtags: Any) -> EquilibriumGraphRewriter:
        q = self._as_query(tags, kwtags)
        main: list[Any] = []
        final: list[GraphRewriter] = []
        cleanup: list[GraphRewriter] = []
        for entry, rw in self._select(q):
            if isinstance(rw, NodeRewriter) and (
                entry.options.get("final_rewriter") or entry.options.get("cleanup")
            ):
                rw = walk_one(rw, name=entry.name)
            if entry.options.get("final_rewriter"):
                final.append(rw)
            elif entry.options.get("cleanup"):
                cleanup.append(rw)
            else:
                main.append(rw)
        main += [r[0] if isinstance(r, tuple) else r for r in q.extra_rewrites]
        eq = EquilibriumGraphRewriter(
            main,
            max_use_ratio=self.max_use_ratio,
            ignore_newtrees=self.ignore_newtrees,
            tracks_on_change_inputs=self.tracks_on_change_inputs,
            final_rewriters=final,
            cleanup_rewriters=cleanup,
            name=self.name or "equilibrium",
        )
        eq.location = self._location()
        return eq


class LocalGroupDB(RewriteDatabase):
    """Node rewriters grouped into one walk: ``query`` returns a single ``in2out`` (or
    ``out2in``, by ``order``) over the selected rewriters, in position order."""

    def __init__(
        self, name: str | None = None, order: str = "in_to_out", ignore_newtrees: bool = True
    ) -> None:
        super().__init__(name)
        self.order = order
        self.ignore_newtrees = ignore_newtrees

    def register(self, name: str, rewriter: Any, *tags: str, **kwargs: Any) -> Any:
        if not isinstance(rewriter, NodeRewriter):
            raise TypeError(f"a LocalGroupDB holds NodeRewriters; {name!r} is {rewriter!r}")
        return super().register(name, rewriter, *tags, **kwargs)

    def query(self, *tags: Any, **kwtags: Any) -> WalkingGraphRewriter:
        q = self._as_query(tags, kwtags)
        selected = sorted(self._select(q), key=lambda t: (t[0].position, t[0].order))
        rws = [rw for _, rw in selected]
        rws += [r[0] if isinstance(r, tuple) else r for r in q.extra_rewrites]
        walker = WalkingGraphRewriter(
            rws, order=self.order, ignore_newtrees=self.ignore_newtrees, name=self.name
        )
        walker.location = self._location()
        return walker


class ProxyDB(RewriteDatabase):
    """A database standing for one prebuilt rewriter: every query returns it."""

    def __init__(self, rewriter: Rewriter, name: str | None = None) -> None:
        if not isinstance(rewriter, Rewriter):
            raise TypeError(f"ProxyDB wraps a rewriter, got {rewriter!r}")
        super().__init__(name)
        self.rewriter = rewriter

    def register(self, name: str, rewriter: Any, *tags: str, **kwargs: Any) -> Any:
        raise TypeError("a ProxyDB wraps one rewriter; nothing can be registered into it")

    def query(self, *tags: Any, **kwtags: Any) -> Rewriter:
        return self.rewriter


# ---------------------------------------------------------------------------- RewriteSet

#: Tags a rewrite gets by default in the three equilibrium stages (PyTensor's helpers).
DEFAULT_STAGE_TAGS: dict[str, tuple[str, ...]] = {
    "canonicalize": ("fast_run", "fast_compile"),
    "stabilize": ("fast_run",),
    "specialize": ("fast_run",),
}


@dataclass
class RewriteSetEntry:
    """A rewrite declared on a RewriteSet, waiting to be installed."""

    db_name: str
    rewriter: Rewriter
    tags: tuple[str, ...]
    name: str
    options: dict[str, Any]


class RewriteSet:
    """A package's rewrites, declared with decorators and installed by its plugin hook.

    ::

        rewrites = RewriteSet("opgraph-optimizers")

        @rewrites.canonicalize("fast_compile")
        @rewrites.stabilize
        @node_rewriter([Elemwise])
        def local_log1p_exp_to_softplus(fgraph, node): ...

        @hookimpl
        def opgraph_register_rewrites(optdb):
            rewrites.install(optdb)

    Each decorator records (database, tags, position) and returns the rewriter unchanged.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.entries: list[RewriteSetEntry] = []

    def __iter__(self) -> Iterator[RewriteSetEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def _record(
        self, db_name: str, default_tags: tuple[str, ...], args: tuple[Any, ...], kwargs: dict
    ) -> Any:
        name = kwargs.pop("name", None)

        def record(rewriter: Rewriter, extra_tags: tuple[str, ...]) -> Rewriter:
            if not isinstance(rewriter, Rewriter | RewriteDatabase):
                raise TypeError(
                    f"RewriteSet.{db_name} decorates rewriters (apply @node_rewriter first), "
                    f"got {rewriter!r}"
                )
            tags = tuple(dict.fromkeys((*default_tags, *extra_tags)))
            entry_name = name or getattr(rewriter, "name", None) or str(rewriter)
            self.entries.append(RewriteSetEntry(db_name, rewriter, tags, entry_name, kwargs))
            return rewriter

        if args and isinstance(args[0], Rewriter | RewriteDatabase):
            return record(args[0], tuple(args[1:]))
        for arg in args:
            if not isinstance(arg, str):
                raise TypeError(
                    f"RewriteSet.{db_name} takes a rewriter (apply @node_rewriter first) or "
                    f"tag strings, got {arg!r}"
                )

        def decorator(rewriter: Rewriter) -> Rewriter:
            return record(rewriter, tuple(args))

        return decorator

    def register(self, db_name: str, *args: Any, **kwargs: Any) -> Any:
        """Declare a rewrite for database ``db_name``: ``@rewrites.register("fusion",
        "fast_run", position=10)`` or ``rewrites.register("fusion", rw, "fast_run")``.

        Keyword arguments: ``name`` (default the rewriter's), ``position``, and the target
        database's options (``final_rewriter``, ``cleanup``, ``use_db_name_as_tag``).
        """
        return self._record(db_name, (), args, kwargs)

    def canonicalize(self, *args: Any, **kwargs: Any) -> Any:
        """Declare a canonicalize rewrite (tags fast_run, fast_compile, plus ``args``)."""
        return self._record("canonicalize", DEFAULT_STAGE_TAGS["canonicalize"], args, kwargs)

    def stabilize(self, *args: Any, **kwargs: Any) -> Any:
        """Declare a stabilize rewrite (tag fast_run, plus ``args``)."""
        return self._record("stabilize", DEFAULT_STAGE_TAGS["stabilize"], args, kwargs)

    def specialize(self, *args: Any, **kwargs: Any) -> Any:
        """Declare a specialize rewrite (tag fast_run, plus ``args``)."""
        return self._record("specialize", DEFAULT_STAGE_TAGS["specialize"], args, kwargs)

    def install(self, optdb: RewriteDatabase) -> None:
        """Register every declared rewrite into the named sub-databases of ``optdb``.

        Databases are found by name anywhere under ``optdb`` (``"optdb"`` or the root's own
        name means the root). Each entry records ``optdb.current_plugin`` (set by the plugin
        manager during the hook), else this set's name.
        """
        plugin = getattr(optdb, "current_plugin", None) or self.name
        for e in self.entries:
            db = optdb if e.db_name in ("optdb", optdb.name) else optdb.find(e.db_name)
            if db is None:
                names = [p for p, en in optdb.walk() if isinstance(en.rewriter, RewriteDatabase)]
                raise KeyError(
                    f"cannot install {e.name!r}: no database named {e.db_name!r} in "
                    f"{optdb.name or 'optdb'}. Known databases: {', '.join(names)}"
                )
            db.register(e.name, e.rewriter, *e.tags, plugin=plugin, **e.options)
