"""docs/plugin-guide.md cannot drift: every Python block of it is checked or run.

- A block whose first line is ``# file: <path>`` (Python or TOML) is a file of the example
  plugin: it must equal ``tests/example_plugin/<path>``, and for the package's modules the
  module Python imports (the installed plugin) must be that file. The plugin's own suite
  runs those files.
- Every other ``python`` block runs, in order, in one namespace per ``## `` section, in a
  temporary working directory. A hookimpl a block defines is then called with fresh
  arguments (a private plugin manager, a new Config, a fresh rewrite database), after
  checking its arguments against the hookspec as pluggy does, and its result is checked.
- ``bash`` and ``text`` blocks show commands and output and are not run; any other fence
  label fails, so a Python block cannot hide under another name.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.needs_example_plugin

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugin-guide.md"
PLUGIN = ROOT / "tests" / "example_plugin"
FILE_MARK = "# file: "
#: Fence labels the guide may use: python and toml (file blocks) are checked, python run.
LANGS = {"python", "toml", "bash", "text"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of the guide."""

    lang: str
    text: str
    section: str
    line: int  # the line of the block's first line of code

    @property
    def file(self) -> str | None:
        """The example plugin's file this block is, or None."""
        first = self.text.split("\n", 1)[0]
        return first[len(FILE_MARK) :].strip() if first.startswith(FILE_MARK) else None

    @property
    def body(self) -> str:
        """The code without the ``# file:`` line."""
        return self.text.split("\n", 1)[1] if self.file else self.text

    def where(self) -> str:
        return f"docs/plugin-guide.md:{self.line}"


def parse(text: str) -> list[Block]:
    """The fenced blocks of ``text`` with their ``## `` section (fences may be indented)."""
    blocks: list[Block] = []
    section = ""
    fence: tuple[str, int, int, list[str]] | None = None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.lstrip(" ")
        if fence is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif stripped.startswith("```"):
                fence = (stripped[3:].strip(), len(line) - len(stripped), number + 1, [])
            continue
        lang, indent, start, lines = fence
        if stripped.rstrip() == "```":
            blocks.append(Block(lang, "".join(lines), section, start))
            fence = None
        else:
            lines.append(line[indent:] if not line[:indent].strip() else line)
    assert fence is None, (
        f"docs/plugin-guide.md: the fence opened at line {fence[2] - 1} never closes"
    )
    return blocks


BLOCKS = parse(GUIDE.read_text(encoding="utf-8")) if GUIDE.exists() else []
FILE_BLOCKS = [b for b in BLOCKS if b.file]
RUN_BLOCKS = [b for b in BLOCKS if b.lang == "python" and not b.file]
SECTIONS = list(dict.fromkeys(b.section for b in RUN_BLOCKS))


def test_the_guide_is_found_and_has_blocks_of_each_kind() -> None:
    assert GUIDE.exists(), GUIDE
    assert len(FILE_BLOCKS) >= 7 and len(RUN_BLOCKS) >= 10 and len(SECTIONS) >= 5


def test_every_block_has_a_known_label() -> None:
    for block in BLOCKS:
        assert block.lang in LANGS, (
            f"{block.where()}: a ```{block.lang} block; label Python ```python (it is run) "
            "and commands or output ```bash or ```text (shown only)"
        )
        if block.lang == "toml":
            assert block.file, f"{block.where()}: a toml block must be a `# file:` block"


@pytest.mark.parametrize("block", FILE_BLOCKS, ids=[b.file or "" for b in FILE_BLOCKS])
def test_a_file_block_is_the_example_plugin_file(block: Block) -> None:
    path = PLUGIN / str(block.file)
    assert path.is_file(), f"{block.where()} names {path}, which does not exist"
    assert block.body == path.read_text(encoding="utf-8"), (
        f"{block.where()} differs from tests/example_plugin/{block.file}: the guide shows the "
        "plugin's files verbatim, so change both"
    )


def test_the_guide_shows_every_file_of_the_package() -> None:
    shown = {b.file for b in FILE_BLOCKS}
    package = {"pyproject.toml"} | {
        str(p.relative_to(PLUGIN)) for p in (PLUGIN / "src" / "example_plugin").glob("*.py")
    }
    assert package <= shown, f"not in docs/plugin-guide.md: {sorted(package - shown)}"


@pytest.mark.parametrize(
    "block",
    [b for b in FILE_BLOCKS if str(b.file).startswith("src/")],
    ids=[str(b.file) for b in FILE_BLOCKS if str(b.file).startswith("src/")],
)
def test_the_installed_plugin_is_the_guide(block: Block) -> None:
    """The module Python imports (and the plugin's suite tests) is the guide's block."""
    if "c_kernels" in str(block.file):
        pytest.importorskip("opgraph_c", reason="c_kernels needs opgraph-backend-c")
    name = str(block.file).removeprefix("src/").removesuffix(".py").replace("/", ".")
    module = importlib.import_module(name.removesuffix(".__init__"))
    installed = Path(str(module.__file__)).read_text(encoding="utf-8")
    assert installed == block.body, (
        f"{module.__file__} is not {block.where()}: reinstall the example plugin "
        "(pip install ./tests/example_plugin)"
    )


@pytest.mark.parametrize("section", SECTIONS)
def test_the_python_blocks_of_a_section_run(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("opgraph_c", reason="the guide's C kernel needs opgraph-backend-c")
    monkeypatch.chdir(tmp_path)
    slug = re.sub(r"\W+", "_", section).strip("_").lower()
    namespace: dict[str, Any] = {"__name__": f"plugin_guide_{slug}"}
    blocks = [b for b in RUN_BLOCKS if b.section == section]
    for block in blocks:
        before = dict(namespace)
        code = compile("\n" * (block.line - 1) + block.text, str(GUIDE), "exec")
        try:
            exec(code, namespace)
            for name, value in namespace.items():
                if before.get(name) is not value and getattr(value, "opgraph_impl", None):
                    exercise_hookimpl(name, value)
        except Exception as exc:
            exc.add_note(f"in the block at {block.where()} (section {section!r})")
            raise


# ------------------------------------------------------------------------------------------
# hookimpls defined by the guide's blocks: checked against their hookspec, then called


def hookspec_caller(name: str) -> Any:
    """The hook caller of ``name`` in a manager knowing core's and backend-c's hookspecs."""
    from opgraph.plugins import OpgraphPluginManager
    from opgraph_c import hookspecs as c_hookspecs

    pm = OpgraphPluginManager()
    pm.add_hookspecs(c_hookspecs)
    caller = getattr(pm.hook, name, None)
    assert caller is not None and caller.spec is not None, f"no hookspec named {name}"
    return caller


def fresh_arguments() -> dict[str, Any]:
    """A new object for every argument a hook can receive."""
    from opgraph.configparser import Config
    from opgraph.link.dispatch import KernelRegistry
    from opgraph.plugins import OpgraphPluginManager
    from opgraph.rewriting import make_optdb
    from opgraph.tensor.type import TensorType

    return {
        "pluginmanager": OpgraphPluginManager(),
        "config": Config(),
        "optdb": make_optdb(),
        "registry": KernelRegistry("c"),
        "value": np.zeros(3),
        "name": "v",
        "strict": False,
        "allow_downcast": None,
        "borrow": False,
        "options": {},
        "var": TensorType("float32", (False,))("x"),
        "target": "cuda",
    }


def exercise_hookimpl(name: str, fn: Callable[..., Any]) -> None:
    """Check ``fn``'s arguments against hook ``name``'s spec, call it, check the result."""
    caller = hookspec_caller(name)
    params = list(inspect.signature(fn).parameters)
    unknown = set(params) - set(caller.spec.argnames)
    assert not unknown, f"{name} takes {sorted(unknown)}, which its hookspec does not give"
    args = fresh_arguments()
    result = fn(**{p: args[p] for p in params})
    CHECKS.get(name, check_returns_none)(result, args)


def check_returns_none(result: Any, args: dict[str, Any]) -> None:
    assert result is None


def check_factories(kind: type) -> Callable[[Any, dict[str, Any]], None]:
    def check(result: Any, args: dict[str, Any]) -> None:
        assert isinstance(result, Mapping) and result
        for key, factory in result.items():
            assert isinstance(key, str) and isinstance(factory(), kind), (key, factory)

    return check


def check_preference(result: Any, args: dict[str, Any]) -> None:
    assert result and all(isinstance(p, int | float) and isinstance(n, str) for p, n in result)


def check_namespaces(result: Any, args: dict[str, Any]) -> None:
    assert result and all(
        k.startswith("opgraph.") and isinstance(v, str) for k, v in result.items()
    )


def check_commands(result: Any, args: dict[str, Any]) -> None:
    from opgraph.plugins import Command

    for command in result.values():
        parser = argparse.ArgumentParser()
        if isinstance(command, Command):
            if command.configure is not None:
                command.configure(parser)
            assert command.run(parser.parse_args([])) in (0, None)
        else:
            assert callable(command) and command.__doc__


def check_config(result: Any, args: dict[str, Any]) -> None:
    assert result is None and len(list(args["config"].flags())) > 0


def check_rewrites(result: Any, args: dict[str, Any]) -> None:
    names = [path for path, _ in args["optdb"].walk()]
    assert result is None and any("/" in p and "cube" in p for p in names), names


def check_addhooks(result: Any, args: dict[str, Any]) -> None:
    assert result is None and args["pluginmanager"].hook.opgraph_c_kernels.has_spec()


def check_transfer(result: Any, args: dict[str, Any]) -> None:
    from opgraph.graph.basic import Variable

    assert result is None or isinstance(result, Variable), result


def check_lines(result: Any, args: dict[str, Any]) -> None:
    assert result is None or isinstance(result, str) or all(isinstance(x, str) for x in result)


def _linker_and_mode_types() -> tuple[type, type]:
    from opgraph.compile.mode import Mode
    from opgraph.link.basic import Linker

    return Linker, Mode


CHECKS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "opgraph_linkers": check_factories(_linker_and_mode_types()[0]),
    "opgraph_modes": check_factories(_linker_and_mode_types()[1]),
    "opgraph_linker_preference": check_preference,
    "opgraph_namespaces": check_namespaces,
    "opgraph_commands": check_commands,
    "opgraph_add_config": check_config,
    "opgraph_register_rewrites": check_rewrites,
    "opgraph_addhooks": check_addhooks,
    "opgraph_transfer": check_transfer,
    "opgraph_cache_info": check_lines,
}
