"""``python -m opgraph``: list plugins, show the config, and run plugins' commands.

Usage::

    python -m opgraph --version
    python -m opgraph plugins [--json]
    python -m opgraph config
    python -m opgraph <command from a plugin> ...   (e.g. ``cache info`` from backend-c)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from collections.abc import Sequence
from typing import Any

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

__all__ = ["build_parser", "format_report", "main"]


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


def format_report(report: dict[str, Any]) -> str:
    """The text ``python -m opgraph plugins`` prints for a :meth:`report` dict."""
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
    lines.append(f"linker=auto means: {report['best_linker'] or '(no linker installed)'}")
    for message in report["conflicts"]:
        lines.append("ERROR: " + message.replace("\n", "\n       "))
    for p in plugins:
        lines.append("")
        lines += _format_plugin(p)
    return "\n".join(lines)


def _format_plugin(p: dict[str, Any]) -> list[str]:
    dist = " ".join(x for x in (p["distribution"], p["version"]) if x) or "no distribution"
    status = {"loaded": "loaded", "failed": "FAILED", "skipped": "skipped"}[p["status"]]
    lines = [f"{p['name']}  [{status}]  {dist}  ({p['source']})"]
    rows: list[tuple[str, str]] = [("module", p["module"] or "")]
    if p["error"]:
        rows.append(("error", p["error"]))
    if p["reason"]:
        rows.append(("reason", p["reason"]))
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
            rows.append((label, ", ".join(items)))
    width = max(len(label) for label, _ in rows)
    lines += [f"  {label + ':':<{width + 1}} {text}" for label, text in rows if text]
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
    rewrites = _rewrites_by_plugin()
    for plugin in report["plugins"]:
        plugin["rewrites"] = rewrites.get(plugin["name"], [])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
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
        p.set_defaults(_run=command.run)
    return parser


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
