"""``python -m opgraph cache info|clear|prune``: the compile cache from the command line."""

from __future__ import annotations

import argparse
import json
import time

__all__ = ["configure_cache_command", "run_cache_command"]


def configure_cache_command(parser: argparse.ArgumentParser) -> None:
    """Add ``info``, ``clear`` and ``prune`` to the ``cache`` command's parser."""
    sub = parser.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    info = sub.add_parser("info", help="Where the cache is, what it holds, how big it is.")
    info.add_argument("--json", action="store_true", help="Print JSON.")
    info.add_argument("--list", action="store_true", help="List every module.")
    sub.add_parser("clear", help="Delete every compiled C kernel.")
    prune = sub.add_parser(
        "prune", help="Delete modules unused for --days, broken ones and stale leftovers."
    )
    prune.add_argument("--days", type=float, default=30.0, help="Age limit (default 30).")


def run_cache_command(args: argparse.Namespace) -> int:
    """Run ``cache <action>``; returns the exit status.

    Every count is said as the compile's progress lines say it (:func:`count_text`:
    "10 C kernels in 3 modules"), so the two agree.
    """
    from opgraph_c.cache import count_text, get_cache

    cache = get_cache()
    if args.cache_command == "clear":
        kernels, modules = cache.counts()
        cache.clear()
        print(f"removed {count_text(kernels, modules)} from {cache.root}")
        return 0
    if args.cache_command == "prune":
        kernels, modules = cache.counts()
        cache.prune(args.days)
        left_k, left_m = cache.counts()
        print(
            f"pruned {count_text(kernels - left_k, modules - left_m)} from {cache.root} "
            f"(unused for {args.days:g} days or broken)"
        )
        return 0
    entries = cache.entries()
    kernels, modules = cache.counts(entries)
    total = sum(e["bytes"] for e in entries)
    broken = sum(not e["valid"] for e in entries)
    if args.json:
        report = {
            "root": str(cache.root),
            "kernels": kernels,
            "modules": modules,
            "bytes": total,
            "broken": broken,
            "entries": entries if args.list else None,
        }
        print(json.dumps(report, indent=1, default=str))
        return 0
    print(f"cache directory: {cache.root}")
    problems = f", {broken} broken" if broken else ""
    print(f"holds: {count_text(kernels, modules)} ({total / 1e6:.1f} MB){problems}")
    if entries:
        newest = max(e["last_used"] for e in entries)
        print(f"last used: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(newest))}")
    if args.list:
        for e in entries:
            state = "" if e["valid"] else "  [broken]"
            print(f"  {e.get('key', '?')[:16]}  {e.get('name', '?')}{state}")
    return 0
