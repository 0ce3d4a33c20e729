"""``python -m opgraph``: list plugins, show the config, and run plugins' commands.

Usage::

    python -m opgraph --version
    python -m opgraph plugins [--json] [--all]
    python -m opgraph config
    python -m opgraph <command from a plugin> ...   (e.g. ``cache info`` from backend-c)

``cache info`` also prints what other plugins keep in the compile cache (the
``opgraph_cache_info`` hook: backend-cuda's CUDA kernel modules), and exists with those
lines alone when no plugin provides ``cache``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from opgraph.configdefaults import AUTO_LINKER_MEANING
from opgraph.configdefaults import config as default_config
from opgraph.plugins.manager import (
    RESERVED_COMMANDS,
    OpgraphPluginManager,
    PluginError,
    conflict_error,
    get_plugin_manager,
)
from opgraph.rewriting.db import RewriteDatabase
from opgraph.rewriting.optdb import get_optdb

__all__ = ["build_parser", "format_report", "main", "output_width"]

#: The width of listings when stdout is not a terminal (a pipe, a file, a test).
DEFAULT_WIDTH = 100
#: A list longer than this is summarized (its count, by stage for rewrites) unless
#: ``--all`` is given.
SHORT_LIST = 12


def _version() -> str:
    opgraph = sys.modules.get("opgraph")
    version = getattr(opgraph, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("opgraph-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


# ---- plugins


def output_width() -> int:
    """The terminal's width when stdout is one, else :data:`DEFAULT_WIDTH` columns."""
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


def format_report(report: dict[str, Any], width: int | None = None, show_all: bool = False) -> str:
    """The text ``python -m opgraph plugins`` prints for a :meth:`report` dict, wrapped to
    ``width`` columns (default :func:`output_width`); long lists are summarized with their
    count unless ``show_all``."""
    width = output_width() if width is None else width
    plugins = report["plugins"]
    counts = {s: sum(p["status"] == s for p in plugins) for s in ("loaded", "failed", "skipped")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"opgraph {_version()}: {len(plugins)} plugins ({summary or 'none'})"]
    autoload = "on" if report["autoload"] else "off (OPGRAPH_DISABLE_PLUGIN_AUTOLOAD=1)"
    lines.append(f"entry-point autoload: {autoload}")
    if report["requested"]:
        lines.append(f"OPGRAPH_PLUGINS: {', '.join(report['requested'])}")
    if report["strict"]:
        lines.append("strict: a failing plugin raises (OPGRAPH_STRICT_PLUGINS=1)")
    resolved = report.get("auto_linker") or _auto_linker(report)
    lines += _wrap(f"linker={resolved} here; {AUTO_LINKER_MEANING}.", width, "  ")
    for message in report["conflicts"]:
        lines.append("ERROR: " + message.replace("\n", "\n       "))
    for p in plugins:
        lines.append("")
        lines += _format_plugin(p, width, show_all)
    return "\n".join(lines)


def _auto_linker(report: dict[str, Any]) -> str:
    """``'auto -> cvm (CLinker)'`` for a report made without it (the words of
    :func:`opgraph.compile.mode.describe_linker`)."""
    from opgraph.compile.mode import describe_linker

    if report.get("best_linker") is None:
        return "auto -> none (no installed plugin recommends a linker)"
    return describe_linker("auto")


#: Marks a space the wrapping must not break at ("canonicalize 26", a command to type).
_KEEP = "\x00"


def _unbroken(text: str) -> str:
    """``text`` kept on one line by :func:`_wrap`."""
    return text.replace(" ", _KEEP)


def _wrap(text: str, width: int, indent: str, first: str = "") -> list[str]:
    """``first + text`` wrapped to ``width`` columns, continuation lines under ``indent``."""
    lines = textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]
    return [line.replace(_KEEP, " ") for line in lines]


def _summarize(label: str, items: list[str], show_all: bool) -> str:
    """``items`` joined, or, past :data:`SHORT_LIST` items, their count (rewrites by stage)
    and how to see them all."""
    if show_all or len(items) <= SHORT_LIST:
        return ", ".join(items)
    hint = f"{_unbroken('python -m opgraph plugins --all')} lists each"
    if label != "rewrites":
        return f"{len(items)}: {', '.join(items[:SHORT_LIST])}, ... ({hint})"
    stages: dict[str, int] = {}
    for path in items:
        stage = path.rsplit("/", 1)[0] if "/" in path else "top-level"
        stages[stage] = stages.get(stage, 0) + 1
    by_stage = ", ".join(_unbroken(f"{stage} {n}") for stage, n in stages.items())
    return f"{len(items)} in {len(stages)} stages: {by_stage} ({hint}, --json too)"


def _format_plugin(p: dict[str, Any], width: int, show_all: bool = False) -> list[str]:
    dist = " ".join(x for x in (p["distribution"], p["version"]) if x) or "no distribution"
    status = {"loaded": "loaded", "failed": "FAILED", "skipped": "skipped"}[p["status"]]
    lines = [f"{p['name']}  [{status}]  {dist}  ({p['source']})"]
    rows: list[tuple[str, str]] = [("module", p["module"] or "")]
    if p["error"]:
        rows.append(("error", p["error"]))
    if p["reason"]:
        rows.append(("reason", p["reason"]))
    if p.get("state"):
        rows.append(("state", p["state"]))
    namespaces = [f"{k} -> {v}" for k, v in p["namespaces"].items()]
    preference = [f"{linker} ({prio:g})" for prio, linker in p["linker_preference"]]
    for label, items in (
        ("linkers", p["linkers"]),
        ("prefers", preference),
        ("modes", p["modes"]),
        ("rewrites", p.get("rewrites", [])),
        ("namespaces", namespaces),
        ("commands", p["commands"]),
        ("config flags", p["config_flags"]),
        ("hookspecs", p["hookspecs"]),
        ("hooks", p["hooks"]),
    ):
        if items:
            rows.append((label, _summarize(label, list(items), show_all)))
    label_width = max(len(label) for label, _ in rows)
    indent = " " * (label_width + 4)
    for label, text in rows:
        if not text:
            continue
        head = f"  {label + ':':<{label_width + 1}} "
        for k, paragraph in enumerate(str(text).splitlines()):  # an error's lines stay lines
            lines += _wrap(paragraph, width, indent, head if k == 0 else indent)
    return lines


def _rewrites_by_plugin() -> dict[str, list[str]]:
    """``{plugin name: ['stage/rewrite', ...]}`` from the installed rewrite database."""
    found: dict[str, list[str]] = {}
    for path, entry in get_optdb().walk():
        if entry.plugin and not isinstance(entry.rewriter, RewriteDatabase):
            found.setdefault(entry.plugin, []).append(path)
    return found


def _run_plugins(args: argparse.Namespace) -> int:
    report = get_plugin_manager().report()
    report["auto_linker"] = _auto_linker(report)
    rewrites = _rewrites_by_plugin()
    for plugin in report["plugins"]:
        plugin["rewrites"] = rewrites.get(plugin["name"], [])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report, show_all=getattr(args, "all", False)))
    return 1 if report["conflicts"] else 0


# ---- config


def _run_config(args: argparse.Namespace) -> int:
    pm = get_plugin_manager()
    config = pm.config if pm.config is not None else default_config
    describe = getattr(config, "describe", None)
    print(describe() if callable(describe) else str(config))
    return 0


# ---- the parser


def build_parser(pm: OpgraphPluginManager | None = None) -> argparse.ArgumentParser:
    """The ``python -m opgraph`` parser: core's commands plus every plugin's."""
    pm = get_plugin_manager() if pm is None else pm
    parser = argparse.ArgumentParser(
        prog="python -m opgraph", description="opgraph: plugins, config and tools."
    )
    parser.add_argument("--version", action="version", version=f"opgraph {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plugins", help="list installed plugins and what each contributed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--all", action="store_true", help="list every item of long lists (e.g. rewrites)"
    )
    p.set_defaults(_run=_run_plugins)
    p = sub.add_parser("config", help="print every config flag, its value and where it came from")
    p.set_defaults(_run=_run_config)

    for name, entries in sorted(pm.contributions("commands").items()):
        if name in RESERVED_COMMANDS:
            error = PluginError(
                f"{entries[0].plugin.describe()} provides command {name!r}, which is "
                f"opgraph's own.\nHINT: rename the command in that plugin."
            )
            print(f"opgraph: {error}", file=sys.stderr)
            continue
        if len(entries) > 1:
            p = sub.add_parser(name, help="(conflict: see `python -m opgraph plugins`)")
            p.set_defaults(_run=_failing(conflict_error("command", name, entries)))
            continue
        command = pm.commands()[name]
        p = sub.add_parser(name, help=command.help, description=command.help)
        if command.configure is not None:
            command.configure(p)
        p.set_defaults(_run=_with_cache_info(command.run, pm) if name == "cache" else command.run)
    if "cache" not in pm.contributions("commands") and pm.hook.opgraph_cache_info.get_hookimpls():
        _add_cache_info_command(sub, pm)
    return parser


# ---- cache info: lines from every plugin with a cache of its own (opgraph_cache_info)


def _with_cache_info(run: Any, pm: OpgraphPluginManager) -> Any:
    """The ``cache`` command's ``run``, followed, for ``cache info``, by the plugins' own
    lines (``--json``: merged into the owner's JSON object under ``"plugins"``)."""

    def wrapped(args: argparse.Namespace) -> int | None:
        if getattr(args, "cache_command", None) != "info":
            return run(args)
        if not getattr(args, "json", False):
            status = run(args)
            _print_cache_info(pm.cache_info())
            return status
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            status = run(args)
        try:
            report = json.loads(buffer.getvalue())
        except ValueError:
            report = None
        if not isinstance(report, dict):
            print(buffer.getvalue(), end="")  # not an object: leave the owner's text alone
            return status
        report["plugins"] = pm.cache_info()
        print(json.dumps(report, indent=1, default=str))
        return status

    return wrapped


def _print_cache_info(found: dict[str, list[str]]) -> None:
    for name, lines in found.items():
        print(f"{name}:")
        for line in lines:
            print(f"  {line}")


def _add_cache_info_command(sub: Any, pm: OpgraphPluginManager) -> None:
    """``cache info`` when no plugin provides ``cache`` (backend-c does): the lines of the
    plugins implementing ``opgraph_cache_info``."""
    p = sub.add_parser("cache", help="what the plugins keep in the compile cache (info)")
    actions = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="what each plugin's compile cache holds")
    info.add_argument("--json", action="store_true", help="print JSON")

    def run(args: argparse.Namespace) -> int:
        found = pm.cache_info()
        if args.json:
            print(json.dumps({"plugins": found}, indent=1))
        else:
            _print_cache_info(found)
        return 0

    p.set_defaults(_run=run)


def _failing(error: Exception) -> Any:
    def run(args: argparse.Namespace) -> int:
        print(f"opgraph: {error}", file=sys.stderr)
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m opgraph`` with ``argv`` (default ``sys.argv[1:]``); returns the status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return 0
    status = run(args)
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
