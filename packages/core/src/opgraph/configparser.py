"""Typed configuration flags read from OPGRAPH_FLAGS, an rc file and code.

This is the machinery behind ``opgraph.config`` (Theano's ``theano.config``).
A :class:`Config` holds declared flags, each checked by a :class:`ConfigParam`.
Values come from, highest priority first: assignment or :meth:`Config.change_flags`,
the ``OPGRAPH_FLAGS`` environment variable, the rc file (``OPGRAPHRC`` or
``~/.opgraphrc``), and the flag's default. Raw strings from the environment and the
rc file are kept until the flag is declared, so plugins may declare flags late;
:meth:`Config.check_unknown_flags` reports the ones nobody declared.

Theano's sources are read in their place when opgraph's are absent, so job files written
for Theano keep working: ``THEANO_FLAGS`` when ``OPGRAPH_FLAGS`` is not set, and
``THEANORC`` (default ``~/.theanorc:~/.theanorc.txt``) when neither ``OPGRAPHRC`` nor
``~/.opgraphrc`` exists. opgraph's source wins when both are there (a warning says that the
Theano one is ignored). A flag that no one declared is an error in opgraph's sources and a
warning in Theano's (as Theano itself does), since Theano job files name flags of older
Theano versions.

Nested names use ``__`` (``gcc__cxxflags``); in OPGRAPH_FLAGS and the rc file a dot
works too (``gcc.cxxflags=-O3``), and ``config.gcc.cxxflags`` reads like Theano's.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

__all__ = [
    "BoolParam",
    "ChangeFlags",
    "Config",
    "ConfigParam",
    "DeviceParam",
    "EnumStr",
    "FloatParam",
    "IntParam",
    "PathParam",
    "StrParam",
    "change_flags",
    "parse_flags_string",
    "read_rc_files",
]

FLAGS_ENV_VAR = "OPGRAPH_FLAGS"
RC_ENV_VAR = "OPGRAPHRC"
DEFAULT_RC_PATH = "~/.opgraphrc"
#: Theano's names for the same sources, read when opgraph's are absent.
THEANO_FLAGS_ENV_VAR = "THEANO_FLAGS"
THEANO_RC_ENV_VAR = "THEANORC"
DEFAULT_THEANO_RC_PATHS = ("~/.theanorc", "~/.theanorc.txt")
#: The Python package of the GPU backend, which ``device=cuda*`` needs.
CUDA_BACKEND_MODULE = "opgraph_cuda"

_MISSING: Any = object()
_F = TypeVar("_F", bound=Callable[..., Any])


# --------------------------------------------------------------------------- params


class ConfigParam:
    """One flag's type: converts strings from the environment and validates values.

    Parameters
    ----------
    default
        The default value, or a zero-argument callable evaluated at first read.
    doc
        What the flag does (``Config.add`` may supply it instead).
    mutable
        If False, the flag cannot be changed once its value has been read.
    validator
        Optional ``callable(value) -> bool`` run after conversion.
    valid_desc
        Sentence telling the user what is valid, used in error messages.
    """

    valid_text = "Expected a valid value."

    def __init__(
        self,
        default: Any,
        *,
        doc: str = "",
        mutable: bool = True,
        validator: Callable[[Any], bool] | None = None,
        valid_desc: str | None = None,
    ) -> None:
        self.default = default
        self.doc = doc
        self.mutable = mutable
        self.validator = validator
        self._valid_desc = valid_desc
        self.name = "<undeclared>"

    def valid_desc(self) -> str:
        """One sentence saying which values this flag accepts."""
        return self._valid_desc or self.valid_text

    def convert(self, value: Any) -> Any:
        """Turn ``value`` (often a string) into this flag's type, or raise ValueError."""
        return value

    def filter(self, value: Any) -> Any:
        """Return ``value`` converted and validated, or raise ValueError naming the flag."""
        try:
            converted = self.convert(value)
            ok = self.validator is None or self.validator(converted)
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise ValueError(
                f"Invalid value for opgraph flag {self.name!r}: got {value!r}. {self.valid_desc()}"
            )
        return converted

    def default_value(self) -> Any:
        """The default, evaluated (if callable) and filtered."""
        default = self.default() if callable(self.default) else self.default
        return self.filter(default)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.default!r})"


class BoolParam(ConfigParam):
    """A boolean flag: True/False, 1/0, or the strings true/false/yes/no/1/0 (any case)."""

    valid_text = "Valid values: True, False, 1, 0, true, false, yes, no."
    _STRINGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}

    def convert(self, value: Any) -> bool:
        if isinstance(value, str):
            value = self._STRINGS.get(value.strip().lower(), value)
        if value in (True, False):  # also 1 and 0
            return bool(value)
        raise ValueError(value)


class IntParam(ConfigParam):
    """An integer flag."""

    valid_text = "Expected an integer, e.g. 8."

    def convert(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(value)
        return int(value)


class FloatParam(ConfigParam):
    """A floating-point flag."""

    valid_text = "Expected a number, e.g. 8.0."

    def convert(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError(value)
        return float(value)


class StrParam(ConfigParam):
    """A string flag, optionally checked by ``validator(value) -> bool``."""

    valid_text = "Expected a string."

    def __init__(
        self,
        default: Any,
        validator: Callable[[str], bool] | None = None,
        *,
        doc: str = "",
        mutable: bool = True,
        valid_desc: str | None = None,
    ) -> None:
        super().__init__(
            default, doc=doc, mutable=mutable, validator=validator, valid_desc=valid_desc
        )

    def convert(self, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(value)
        return value


class EnumStr(ConfigParam):
    """A string flag whose value must be one of ``options`` (the default always is)."""

    def __init__(
        self, default: str, options: Sequence[str], *, doc: str = "", mutable: bool = True
    ) -> None:
        if isinstance(options, str):
            raise TypeError("EnumStr options must be a sequence of strings, not a string")
        super().__init__(default, doc=doc, mutable=mutable)
        self.options: tuple[str, ...] = tuple(dict.fromkeys([default, *options]))

    def valid_desc(self) -> str:
        return "Valid values: " + ", ".join(repr(o) for o in self.options) + "."

    def convert(self, value: Any) -> str:
        if value is None and "None" in self.options:
            return "None"
        if isinstance(value, str) and value in self.options:
            return value
        raise ValueError(value)


class PathParam(ConfigParam):
    """A filesystem path flag; ``~`` and environment variables are expanded."""

    valid_text = "Expected a non-empty filesystem path."

    def convert(self, value: Any) -> str:
        path = os.fspath(value)
        if not isinstance(path, str) or not path:
            raise ValueError(value)
        return os.path.expanduser(os.path.expandvars(path))


class DeviceParam(ConfigParam):
    """A device name: ``cpu``, ``cuda``, ``cudaN``, ``gpu`` or ``gpuN`` (N a number)."""

    valid_text = (
        "Valid devices: 'cpu', 'cuda', 'cudaN' (e.g. 'cuda0'), 'gpu', 'gpuN' (e.g. 'gpu1')."
    )
    _PATTERN = re.compile(r"cpu|cuda\d*|gpu\d*")

    def convert(self, value: Any) -> str:
        if isinstance(value, str) and self._PATTERN.fullmatch(value.strip()):
            return value.strip()
        raise ValueError(value)


# --------------------------------------------------------------------------- sources


def _normalize_name(name: str) -> str:
    """``gcc.cxxflags`` -> ``gcc__cxxflags``."""
    return name.strip().replace(".", "__")


def parse_flags_string(flags: str, source: str = FLAGS_ENV_VAR) -> dict[str, str]:
    """Parse THEANO_FLAGS-style ``name=value,name2=value2`` into ``{name: value}``.

    Whitespace around items is ignored, empty items are skipped, dots in names become
    ``__`` and a later item wins over an earlier one. A bare name raises ValueError.
    """
    result: dict[str, str] = {}
    for item in flags.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = _normalize_name(name)
        if not sep or not name:
            raise ValueError(
                f"{source} item {item!r} is not of the form name=value.\n"
                f"HINT: write e.g. {source}=floatX=float32,device=cpu"
            )
        result[name] = value.strip()
    return result


def read_rc_files(
    paths: Iterable[str | os.PathLike[str]],
) -> dict[str, tuple[str, str]]:
    """Read INI rc files into ``{flag_name: (raw_value, path)}``; later files win.

    Keys of ``[global]`` are flag names; key ``k`` of ``[sec]`` is flag ``sec__k``.
    Missing files are skipped; a malformed file raises ValueError naming it.
    """
    import configparser as _stdlib_configparser  # lazily: most users have no rc file

    result: dict[str, tuple[str, str]] = {}
    for raw_path in paths:
        path = os.path.expanduser(os.fspath(raw_path))
        if not os.path.isfile(path):
            continue
        parser = _stdlib_configparser.ConfigParser(
            interpolation=None, default_section="\0no-default-section"
        )
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep floatX's case
        try:
            with open(path, encoding="utf-8") as fh:
                parser.read_file(fh, source=path)
        except (_stdlib_configparser.Error, UnicodeDecodeError) as exc:
            raise ValueError(f"Cannot parse opgraph rc file {path}: {exc}") from exc
        for section in parser.sections():
            for key, value in parser.items(section):
                name = _normalize_name(key)
                if section != "global":
                    name = f"{_normalize_name(section)}__{name}"
                result[name] = (value.strip(), path)
    return result


def _unknown_flag_message(
    name: str, where: str, valid: Iterable[str], list_valid: bool = True
) -> str:
    """The "Unknown opgraph flag 'floatx' in OPGRAPH_FLAGS. Did you mean 'floatX'?" text."""
    import difflib

    valid = sorted(valid)
    matches = [v for v in valid if v.lower() == name.lower()]
    matches += [m for m in difflib.get_close_matches(name, valid, n=3) if m not in matches]
    message = f"Unknown opgraph flag {name!r} in {where}."
    if matches:
        message += f" Did you mean {matches[0]!r}?"
    if list_valid:
        message += f" Valid flags: {', '.join(valid)}"
    return message


# --------------------------------------------------------------------------- Config


class Config:
    """The registry of declared flags and their current values (``opgraph.config``).

    Parameters
    ----------
    flags_string
        Text in OPGRAPH_FLAGS format (``name=value,...``).
    rc_paths
        rc files to read, lowest priority first; missing ones are skipped.
    flags_source
        How ``flags_string`` is named in error messages.
    lenient_sources
        Sources whose undeclared flags only warn (Theano's): ``"THEANO_FLAGS"`` for the
        flags string, or rc file paths.

    Examples
    --------
    >>> cfg = Config("floatX=float32")
    >>> cfg.add("floatX", "Default float dtype.", EnumStr("float64", ["float32"]))
    >>> cfg.floatX
    'float32'
    """

    def __init__(
        self,
        flags_string: str = "",
        rc_paths: Iterable[str | os.PathLike[str]] = (),
        *,
        flags_source: str = FLAGS_ENV_VAR,
        lenient_sources: Iterable[str] = (),
    ) -> None:
        self._params: dict[str, ConfigParam] = {}
        self._values: dict[str, Any] = {}
        self._sources: dict[str, str] = {}
        self._read: set[str] = set()
        self._flags_source = flags_source
        self._env_raw = parse_flags_string(flags_string, flags_source)
        self._rc_raw = read_rc_files(rc_paths)
        self._lenient = {
            s if s == flags_source else os.path.expanduser(os.fspath(s)) for s in lenient_sources
        }

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Build a Config from the environment (default ``os.environ``).

        Flags: ``OPGRAPH_FLAGS``, else ``THEANO_FLAGS``. rc files: ``OPGRAPHRC``, else
        ``~/.opgraphrc`` if it exists, else ``THEANORC``, else ``~/.theanorc`` and
        ``~/.theanorc.txt``. When both an opgraph and a Theano source are given (and differ),
        the opgraph one is used and a warning names the Theano one as ignored.
        """
        environ = os.environ if environ is None else environ
        ignored: list[str] = []
        flags_source = FLAGS_ENV_VAR
        if FLAGS_ENV_VAR not in environ and THEANO_FLAGS_ENV_VAR in environ:
            flags_source = THEANO_FLAGS_ENV_VAR
        elif environ.get(THEANO_FLAGS_ENV_VAR, "").strip() and environ.get(
            THEANO_FLAGS_ENV_VAR
        ) != environ.get(FLAGS_ENV_VAR):
            ignored.append(f"{THEANO_FLAGS_ENV_VAR} (because {FLAGS_ENV_VAR} is set)")
        rc_paths, lenient = _rc_sources(environ, ignored)
        if flags_source == THEANO_FLAGS_ENV_VAR:
            lenient.append(THEANO_FLAGS_ENV_VAR)
        config = cls(
            environ.get(flags_source, ""),
            rc_paths,
            flags_source=flags_source,
            lenient_sources=lenient,
        )
        for what in ignored:
            warnings.warn(
                f"opgraph ignores {what}: opgraph's own settings win over Theano's.\n"
                "HINT: merge the Theano settings into the opgraph ones, or remove one of them.",
                stacklevel=2,
            )
        return config

    # ---- declaring

    def add(
        self,
        name: str,
        doc: str = "",
        param: ConfigParam | None = None,
        *,
        default: Any = _MISSING,
    ) -> None:
        """Declare flag ``name`` checked by ``param`` (or one inferred from ``default``).

        A value from OPGRAPH_FLAGS or the rc file is parsed now, so a bad one raises
        ValueError naming its source.
        """
        name = _normalize_name(name)
        if not name.isidentifier() or name.startswith("_"):
            raise ValueError(
                f"opgraph flag name {name!r} must be an identifier not starting with _"
            )
        if name in self._params:
            raise ValueError(f"opgraph flag {name!r} is already declared")
        if hasattr(type(self), name):
            raise ValueError(f"opgraph flag name {name!r} clashes with a Config method")
        param = _param_for(name, param, default)
        param.name = name
        if doc:
            param.doc = doc
        if not callable(param.default):
            param.filter(param.default)  # a bad default is the declarer's bug: fail now
        self._params[name] = param
        if name in self._env_raw:
            raw, source = self._env_raw[name], self._flags_source
        elif name in self._rc_raw:
            raw, path = self._rc_raw[name]
            source = f"rc file {path}"
        else:
            return
        self._values[name] = _filter_from(param, raw, source)
        self._sources[name] = source

    # ---- reading and writing

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _normalize_name(name) in self._params

    def get_param(self, name: str) -> ConfigParam:
        """The ConfigParam declared for ``name``."""
        return self._params[self._known(name, "config.get_param")]

    def _peek(self, name: str) -> Any:
        """The current value, evaluating the default if needed, without counting as a read."""
        if name not in self._values:
            self._values[name] = self._params[name].default_value()
            self._sources[name] = "default"
        return self._values[name]

    def _get(self, name: str) -> Any:
        value = self._peek(name)
        self._read.add(name)
        return value

    def current(self, name: str) -> Any:
        """``config.<name>`` for hot paths (graph building asks for some flags per variable):
        one dictionary lookup once the flag has been read. ``name`` is the full flag name
        (``traceback__limit``)."""
        if name in self._read:
            return self._values[name]
        return self._get(self._known(name, "config.current"))

    def _set(self, name: str, value: Any, source: str = "set") -> None:
        param = self._params[name]
        value = param.filter(value)
        if not param.mutable and name in self._read and value != self._values.get(name):
            raise ValueError(
                f"opgraph flag {name!r} cannot be changed after it was read "
                f"(value {self._values.get(name)!r}, tried {value!r}).\n"
                f"HINT: set it before using opgraph: OPGRAPH_FLAGS={name}={value} "
                "or in the rc file."
            )
        self._values[name] = value
        self._sources[name] = source

    def _known(self, name: str, where: str) -> str:
        normalized = _normalize_name(name)
        if normalized not in self._params:
            raise ValueError(_unknown_flag_message(name, where, self._params))
        return normalized

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._params:
            return self._get(name)
        if any(flag.startswith(name + "__") for flag in self._params):
            return _ConfigSection(self, name)
        raise AttributeError(_unknown_flag_message(name, "config", self._params))

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        elif name in self._params:
            self._set(name, value)
        else:
            raise AttributeError(_unknown_flag_message(name, "config", self._params))

    def __dir__(self) -> list[str]:
        sections = {flag.split("__")[0] for flag in self._params if "__" in flag}
        return sorted({*super().__dir__(), *self._params, *sections})

    def change_flags(self, *args: Mapping[str, Any], **kwargs: Any) -> ChangeFlags:
        """Temporarily set flags: ``with config.change_flags(floatX="float32"):``.

        Also a decorator. Dicts may be passed positionally for dotted names
        (``change_flags({"gcc.cxxflags": "-O3"})``). Previous values come back on exit,
        even after an exception.
        """
        changes: dict[str, Any] = {}
        for mapping in (*args, kwargs):
            for name, value in mapping.items():
                normalized = _normalize_name(name)
                if normalized not in self._params:
                    raise ValueError(_unknown_flag_message(name, "change_flags", self._params))
                changes[normalized] = self._params[normalized].filter(value)
        return ChangeFlags(self, changes)

    # ---- listing

    def flags(self) -> Iterator[tuple[str, ConfigParam, Any]]:
        """Yield ``(name, param, value)`` for every declared flag, sorted by name."""
        for name in sorted(self._params):
            yield name, self._params[name], self._peek(name)

    __iter__ = flags

    def source(self, name: str) -> str:
        """Where the current value came from: ``default``, ``set``, OPGRAPH_FLAGS or an rc file."""
        name = self._known(name, "config.source")
        self._peek(name)
        return self._sources[name]

    def describe(self) -> str:
        """Every flag with its value, source, default and doc (``python -m opgraph config``)."""
        blocks = []
        for name, param, value in self.flags():
            try:
                default = param.default_value()
            except ValueError:
                default = param.default
            kind = param.valid_desc() if isinstance(param, EnumStr | DeviceParam) else ""
            lines = [f"{name} = {value!r}  ({self._sources[name]})"]
            lines.append(f"    default: {default!r}  [{type(param).__name__}] {kind}".rstrip())
            if not param.mutable:
                lines.append("    immutable once read")
            if param.doc:
                lines.append(f"    {param.doc}")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    __str__ = describe

    def __repr__(self) -> str:
        return f"<opgraph Config with {len(self._params)} flags>"

    def check_unknown_flags(self) -> None:
        """Report names in the flags string or the rc files that no one declared.

        Call after every plugin has declared its flags. In opgraph's own sources an unknown
        name raises ValueError; in Theano's (``THEANO_FLAGS``, ``.theanorc``) it warns, as
        Theano does, since those name flags of older Theano versions. Also warns when
        ``device`` asks for a GPU and the GPU backend (opgraph-backend-cuda) is not installed.
        """
        problems = [
            (name, self._flags_source, self._flags_source in self._lenient)
            for name in self._env_raw
            if name not in self._params
        ]
        problems += [
            (name, f"rc file {path}", path in self._lenient)
            for name, (_, path) in self._rc_raw.items()
            if name not in self._params
        ]
        for name, where, _ in (p for p in problems if p[2]):
            warnings.warn(
                _unknown_flag_message(name, where, self._params, False)
                + " It is ignored (a flag of another Theano version, or of a plugin that is "
                "not installed).",
                stacklevel=2,
            )
        problems = [p for p in problems if not p[2]]
        if problems:
            lines = [_unknown_flag_message(n, w, self._params, False) for n, w, _ in problems]
            lines[-1] += f" Valid flags: {', '.join(sorted(self._params))}"
            lines.append(
                "HINT: fix the name, or install the plugin that declares it "
                "(`python -m opgraph plugins` lists installed ones)."
            )
            raise ValueError("\n".join(lines))
        self._check_device()

    def _check_device(self) -> None:
        """Warn when ``device`` names a GPU and opgraph-backend-cuda is not installed.

        Theano logs an error and runs on the CPU when its GPU back-end cannot start; opgraph
        does the same, with a warning that says which package brings the GPU.
        """
        if "device" not in self._params:
            return
        device = str(self._peek("device"))
        if device == "cpu" or not device:
            return
        import importlib.util

        if importlib.util.find_spec(CUDA_BACKEND_MODULE) is None:
            warnings.warn(
                f"device={device} (from {self._sources.get('device', 'default')}) needs "
                "opgraph's GPU backend, which is not installed: computations run on the CPU.\n"
                "HINT: pip install opgraph-backend-cuda (or set device=cpu).",
                stacklevel=3,
            )


class _ConfigSection:
    """``config.gcc`` view so Theano-style ``config.gcc.cxxflags`` reads ``gcc__cxxflags``."""

    def __init__(self, config: Config, prefix: str) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._config, f"{self._prefix}__{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._config, f"{self._prefix}__{name}", value)

    def __repr__(self) -> str:
        return f"<opgraph config section {self._prefix!r}>"


class ChangeFlags:
    """Context manager and decorator made by :meth:`Config.change_flags`."""

    def __init__(self, config: Config, changes: Mapping[str, Any]) -> None:
        self.config = config
        self.changes = dict(changes)
        self._saved: list[list[tuple[str, Any, Any]]] = []

    def __enter__(self) -> Self:
        cfg = self.config
        saved = [(n, cfg._values.get(n, _MISSING), cfg._sources.get(n)) for n in self.changes]
        self._saved.append(saved)
        try:
            for name, value in self.changes.items():
                cfg._set(name, value, source="change_flags")
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._restore()

    def _restore(self) -> None:
        cfg = self.config
        for name, value, source in self._saved.pop():
            if value is _MISSING:  # back to unset: the next read takes the default again
                cfg._values.pop(name, None)
                cfg._sources.pop(name, None)
                cfg._read.discard(name)
            else:
                cfg._values[name] = value
                cfg._sources[name] = source

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _split_paths(spec: str) -> list[str]:
    return [p for p in spec.split(os.pathsep) if p.strip()]


def _rc_sources(environ: Mapping[str, str], ignored: list[str]) -> tuple[list[str], list[str]]:
    """(rc files to read, those of them that are Theano's) for ``from_environment``.

    Appends to ``ignored`` a description of each Theano rc source skipped because an opgraph
    one is present.
    """
    theano_spec = environ.get(THEANO_RC_ENV_VAR)
    theano_paths = (
        list(DEFAULT_THEANO_RC_PATHS) if theano_spec is None else _split_paths(theano_spec)
    )
    if RC_ENV_VAR in environ:
        paths = _split_paths(environ[RC_ENV_VAR])
        if theano_spec is not None and theano_spec != environ[RC_ENV_VAR]:
            ignored.append(f"{THEANO_RC_ENV_VAR} (because {RC_ENV_VAR} is set)")
        return paths, []
    if os.path.isfile(os.path.expanduser(DEFAULT_RC_PATH)):
        present = [p for p in theano_paths if os.path.isfile(os.path.expanduser(p))]
        if present:
            ignored.append(f"the rc file {present[0]} (because {DEFAULT_RC_PATH} exists)")
        return [DEFAULT_RC_PATH], []
    return theano_paths, list(theano_paths)


def _param_for(name: str, param: ConfigParam | None, default: Any) -> ConfigParam:
    """Use ``param``, or infer one from a plain ``default`` (``add("cxx", default="g++")``)."""
    if param is not None:
        if default is not _MISSING:
            raise TypeError(f"config.add({name!r}): pass either param or default, not both")
        if not isinstance(param, ConfigParam):
            raise TypeError(f"config.add({name!r}): param must be a ConfigParam, got {param!r}")
        return param
    for kind, cls in (
        (bool, BoolParam),
        (int, IntParam),
        (float, FloatParam),
        (str, StrParam),
    ):
        if isinstance(default, kind):
            return cls(default)
    raise TypeError(
        f"config.add({name!r}) needs a ConfigParam, or a default of type bool, int, float "
        f"or str (got {default!r})"
    )


def _filter_from(param: ConfigParam, raw: str, source: str) -> Any:
    """Filter a raw string from OPGRAPH_FLAGS or an rc file; errors name the source."""
    try:
        return param.filter(raw)
    except ValueError as exc:
        raise ValueError(
            f"{exc}\nThe value comes from {source}.\nHINT: fix or remove {param.name}={raw} there."
        ) from None


#: The process-wide Config, registered by ``opgraph.configdefaults`` (a module above this one)
#: when it builds it: what :func:`change_flags` changes.
_GLOBAL_CONFIG: list[Config] = []


def set_global_config(config: Config) -> None:
    """Make ``config`` the one :func:`change_flags` changes (``configdefaults`` calls this)."""
    _GLOBAL_CONFIG[:] = [config]


def change_flags(*args: Mapping[str, Any], **kwargs: Any) -> ChangeFlags:
    """Change flags of the global ``opgraph.config`` (Theano's ``configparser.change_flags``)."""
    if not _GLOBAL_CONFIG:
        raise RuntimeError("no global config yet: import opgraph.configdefaults first")
    return _GLOBAL_CONFIG[0].change_flags(*args, **kwargs)
