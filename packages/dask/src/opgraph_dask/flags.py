"""opgraph-dask's config flags (``dask__*``), declared on core's config by the plugin.

``parse_chunks`` turns the ``dask__chunks`` string into what ``dask.array.from_array``
accepts; the linker uses it on every NumPy argument it wraps.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEDULERS", "declare_flags", "parse_chunks"]

#: Values of ``dask__scheduler``: "default" leaves the choice to dask (the current
#: ``distributed.Client`` when one exists, else the local threaded scheduler).
SCHEDULERS = ("default", "threads", "synchronous", "processes", "distributed")


def parse_chunks(text: str | int | tuple | None) -> Any:
    """The ``chunks=`` argument of ``dask.array.from_array`` for a ``dask__chunks`` value.

    ``"auto"`` (dask picks), ``"1000"`` (every axis in blocks of 1000), ``"100000,-1"``
    (axis 0 in blocks of 100000, axis 1 whole; ``-1`` means whole, ``auto`` per axis is
    allowed) or a size with units (``"64MiB"``: dask's target block size). Also accepts an
    int or a tuple, returned unchanged. Raises ValueError for anything else.
    """
    if text is None:
        return "auto"
    if isinstance(text, int | tuple | dict):
        return text
    if not isinstance(text, str):
        raise ValueError(f"chunks must be a string such as 'auto', '1000' or '1000,-1': {text!r}")
    spec = text.strip().strip("()").strip()
    if not spec:
        raise ValueError("chunks is empty; use 'auto', '1000' or '1000,-1'")
    if spec.lower() == "auto":
        return "auto"
    parts = [p.strip() for p in spec.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:  # "1000," like a 1-tuple
        parts = parts[:-1]
    out: list[Any] = []
    for part in parts:
        if part.lower() == "auto":
            out.append("auto")
            continue
        try:
            n = int(part)
        except ValueError:
            if len(parts) == 1 and _is_byte_size(part):
                return part  # e.g. "64MiB": dask's block-size target
            raise ValueError(
                f"invalid chunk size {part!r} in {text!r}: use positive integers, -1 (whole "
                "axis) or 'auto', separated by commas"
            ) from None
        if n == 0 or n < -1:
            raise ValueError(f"invalid chunk size {n} in {text!r}: use a positive integer or -1")
        out.append(n)
    if len(out) == 1:
        return out[0]
    return tuple(out)


def _is_byte_size(text: str) -> bool:
    try:
        from dask.utils import parse_bytes

        parse_bytes(text)
    except Exception:
        return False
    return True


def _valid_chunks(text: str) -> bool:
    try:
        parse_chunks(text)
    except ValueError:
        return False
    return True


def declare_flags(config: Any) -> None:
    """Declare opgraph-dask's flags on ``config`` (each once)."""
    from opgraph.configparser import BoolParam, EnumStr, StrParam

    flags = [
        (
            "dask__compute",
            "Functions compiled for the dask linker return NumPy arrays (all outputs computed "
            "together, one dask.compute per call) instead of lazy dask arrays.",
            BoolParam(False),
        ),
        (
            "dask__chunks",
            "How the dask linker chunks a NumPy argument (dask.array.from_array's chunks): "
            "'auto', one block size for every axis ('1000'), one per axis ('100000,-1'; -1 "
            "keeps the axis whole) or a block size in bytes ('64MiB').",
            StrParam(
                "auto",
                _valid_chunks,
                valid_desc="Expected 'auto', '1000', '100000,-1' or a size such as '64MiB'.",
            ),
        ),
        (
            "dask__scheduler",
            "The dask scheduler that computes outputs when they are computed (compute=True, "
            "updates of shared variables, non-array outputs): 'default' is dask's choice (the "
            "current distributed Client if there is one, else threads).",
            EnumStr("default", SCHEDULERS),
        ),
    ]
    for name, doc, param in flags:
        if name not in config:
            config.add(name, doc, param)
