"""The import graph of every package points one way: no cycles, no upward imports.

Read from the sources with ``ast`` (nothing is imported): an edge is every ``import`` of a
module of ours, at module level or inside a function (a function-local import that dodges a
cycle is still a cycle), and imports under ``if TYPE_CHECKING:`` too (an annotation naming a higher module
is still a reader's upward step).
``from pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of
``pkg`` itself; the implicit import of a module's parent packages is not an edge.

Core's layers are listed bottom-up in :data:`CORE_LAYERS` (``docs/architecture.md`` says why
each sits where it does). A module belongs to the layer of its longest matching pattern; it
may import modules of its own layer and of layers below it. Plugin packages may import core
and themselves only, and must be acyclic too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Core's layers, bottom-up. ``"opgraph.x"`` matches the module and everything under it;
#: ``"=opgraph.x"`` matches that module alone (a package's ``__init__`` that is a facade).
CORE_LAYERS: list[tuple[str, list[str]]] = [
    ("config", ["opgraph.configparser", "opgraph.configdefaults"]),
    ("plugins", ["opgraph.plugins"]),
    ("graph", ["opgraph.graph"]),
    ("printing", ["opgraph.printing", "opgraph.d3viz"]),
    ("scalar", ["opgraph.scalar"]),
    ("tensor", ["opgraph.tensor", "opgraph.ifelse", "opgraph.typed_list", "opgraph.tests"]),
    ("rewriting", ["opgraph.rewriting"]),
    ("link", ["opgraph.link"]),
    (
        "compile",
        [
            "opgraph.compile",
            "opgraph.tensor.sharedvar",
            "opgraph.tensor.shared_randomstreams",
            "opgraph.sandbox",
            "opgraph.misc",
            "opgraph.updates",
        ],
    ),
    ("scan", ["opgraph.scan_module"]),
    ("gradient", ["opgraph.gradient", "opgraph.tensor.jacobian", "opgraph.tensor.gradcheck"]),
    (
        "public face",
        ["=opgraph", "=opgraph.tensor", "opgraph.gof", "opgraph.__main__", "opgraph.testing"],
    ),
]


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` at ``path:line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} -> {self.target}"


def package_modules(src: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``src`` (a ``src/`` folder): dotted name -> (file, is a package)."""
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    return [target, *(f"{target}.{alias.name}" for alias in node.names)]


def import_edges(
    modules: dict[str, tuple[Path, bool]], roots: set[str]
) -> tuple[list[Edge], list[Edge]]:
    """(edges between our modules, dynamic imports of ours by string) for ``modules``."""
    edges: list[Edge] = []
    dynamic: list[Edge] = []
    known = set(modules)
    for module, (path, is_package) in modules.items():
        rel = path.relative_to(ROOT).as_posix()
        stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    names = _imported(module, is_package, child)
                    plain = isinstance(child, ast.Import)
                    targets = set()
                    for i, name in enumerate(names):
                        if name.split(".")[0] not in roots:
                            continue
                        if i > 0 and name not in known:
                            continue  # `from pkg import name`: a name, not a module
                        while name not in known and "." in name:
                            name = name.rsplit(".", 1)[0]
                        if plain or i > 0 or not any(n in known for n in names[1:]):
                            targets.add(name)
                    edges += [Edge(module, t, rel, child.lineno) for t in targets if t != module]
                elif isinstance(child, ast.Call):
                    func = child.func
                    fname = getattr(func, "attr", getattr(func, "id", ""))
                    arg = child.args[0] if child.args else None
                    if (
                        fname in ("import_module", "__import__")
                        and isinstance(arg, ast.Constant)
                        and isinstance(arg.value, str)
                        and arg.value.split(".")[0] in roots
                    ):
                        dynamic.append(Edge(module, arg.value, rel, child.lineno))
                stack.append(child)
    return edges, dynamic


def cycles(modules: set[str], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {m: [] for m in modules}
    for e in edges:
        if e.target in graph:
            graph[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer_of(module: str, layers: list[tuple[str, list[str]]]) -> int:
    """Index of the layer whose most specific pattern matches ``module``."""
    best, best_len = -1, -1
    for i, (_, patterns) in enumerate(layers):
        for pattern in patterns:
            exact = pattern.startswith("=")
            name = pattern.lstrip("=")
            hit = module == name if exact else (module == name or module.startswith(name + "."))
            if hit and len(name) + exact > best_len:
                best, best_len = i, len(name) + exact
    return best


def _sources() -> list[tuple[str, Path]]:
    """(top-level import name, src folder) of every package in packages/."""
    found = []
    for src in sorted(ROOT.glob("packages/*/src")):
        for top in sorted(p for p in src.iterdir() if (p / "__init__.py").is_file()):
            found.append((top.name, src))
    return found


SOURCES = _sources()
ALL_ROOTS = {name for name, _ in SOURCES}


def _edges_of(name: str, src: Path) -> tuple[dict[str, tuple[Path, bool]], list[Edge], list[Edge]]:
    modules = {m: v for m, v in package_modules(src).items() if m.split(".")[0] == name}
    edges, dynamic = import_edges(modules, ALL_ROOTS)
    return modules, edges, dynamic


@pytest.mark.parametrize(("name", "src"), SOURCES, ids=[name for name, _ in SOURCES])
def test_no_import_cycles(name: str, src: Path) -> None:
    modules, edges, _ = _edges_of(name, src)
    found = cycles(set(modules), edges)
    detail = []
    for component in found:
        members = set(component)
        detail.append(f"cycle of {len(component)}: {', '.join(component)}")
        detail += [f"    {e}" for e in edges if e.source in members and e.target in members]
    assert not found, "\n".join(detail)


@pytest.mark.parametrize(("name", "src"), SOURCES, ids=[name for name, _ in SOURCES])
def test_plugin_packages_import_core_and_themselves_only(name: str, src: Path) -> None:
    _, edges, dynamic = _edges_of(name, src)
    allowed = {name, "opgraph"}
    foreign = [e for e in edges + dynamic if e.target.split(".")[0] not in allowed]
    assert not foreign, "imports of another plugin (use its hooks):\n" + "\n".join(
        map(str, foreign)
    )


def test_core_imports_point_down() -> None:
    modules, edges, dynamic = _edges_of("opgraph", ROOT / "packages/core/src")
    unplaced = sorted(m for m in modules if layer_of(m, CORE_LAYERS) < 0)
    assert not unplaced, f"modules in no layer of CORE_LAYERS: {unplaced}"
    upward = [
        f"{e}  ({CORE_LAYERS[layer_of(e.source, CORE_LAYERS)][0]} imports "
        f"{CORE_LAYERS[layer_of(e.target, CORE_LAYERS)][0]})"
        for e in edges + dynamic
        if e.target in modules and layer_of(e.target, CORE_LAYERS) > layer_of(e.source, CORE_LAYERS)
    ]
    assert not upward, f"{len(upward)} upward import(s):\n" + "\n".join(upward)


def facade_hazards(
    modules: dict[str, tuple[Path, bool]], edges: list[Edge]
) -> list[tuple[str, str, str]]:
    """(package, outside module, inside module) where a package's ``__init__`` reaches a
    module outside the package that reaches back into it.

    Importing any submodule first runs its package's ``__init__``: if that ``__init__``
    imports an outside module that imports the package's submodules, whichever of the two
    is imported first finds the other half-initialized. A facade may gather lower modules
    and its own submodules only.
    """
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        if e.target in graph:
            graph[e.source].add(e.target)

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    hazards = []
    for package, (_, is_package) in sorted(modules.items()):
        if not is_package or "." not in package:
            continue  # the top-level package contains everything
        inside = {m for m in modules if m.startswith(package + ".")}
        for outside in sorted(m for m in reach(package) if m != package and m not in inside):
            back = sorted(reach(outside) & inside)
            if back:
                hazards.append((package, outside, back[0]))
    return hazards


@pytest.mark.parametrize(("name", "src"), SOURCES, ids=[name for name, _ in SOURCES])
def test_package_facades_do_not_reach_back_into_themselves(name: str, src: Path) -> None:
    modules, edges, _ = _edges_of(name, src)
    hazards = facade_hazards(modules, edges)
    assert not hazards, "\n".join(
        f"{package}/__init__.py reaches {outside}, which imports {inside}"
        for package, outside, inside in hazards
    )


def test_the_checker_sees_function_local_imports_and_cycles(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "toy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from toy import high\n")
    (pkg / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom toy.low import f\n"
        "if TYPE_CHECKING:\n    from toy import other\n"
    )
    (pkg / "other.py").write_text("import importlib\nimportlib.import_module('toy.high')\n")
    modules = package_modules(tmp_path / "src")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        edges, dynamic = import_edges(modules, {"toy"})
    finally:
        ROOT = saved
    pairs = {(e.source, e.target) for e in edges}
    assert pairs == {("toy.low", "toy.high"), ("toy.high", "toy.low"), ("toy.high", "toy.other")}
    assert [(e.source, e.target) for e in dynamic] == [("toy.other", "toy.high")]
    assert cycles(set(modules), edges) == [["toy.high", "toy.low"]]
    sub = pkg / "sub"
    sub.mkdir()
    (sub / "__init__.py").write_text("from toy import other\n")
    (sub / "leaf.py").write_text("")
    (pkg / "other.py").write_text("from toy.sub import leaf\n")
    modules = package_modules(tmp_path / "src")
    ROOT = tmp_path
    try:
        edges, _ = import_edges(modules, {"toy"})
    finally:
        ROOT = saved
    assert facade_hazards(modules, edges) == [("toy.sub", "toy.other", "toy.sub.leaf")]
    layers = [("bottom", ["toy.low"]), ("top", ["toy", "=toy.high"])]
    assert layer_of("toy.high", layers) == 1
    assert layer_of("toy.low", layers) == 0
