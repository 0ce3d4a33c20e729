"""The special functions in fused C loops: SciPy's own C code, from ``cython_special``.

The ``perform`` of ``gamma``, ``gammaln``, ``psi``, the Bessel functions, ``erfcx``,
``erfinv``, ``erfcinv`` and ``chi2sf`` calls SciPy's ufuncs. SciPy exports the same C code
in ``scipy.special.cython_special``: each ``cpdef`` function there is a PyCapsule of the
module's ``__pyx_capi__`` holding its C address, named by its C signature (``"double
(double, int __pyx_skip_dispatch)"``); a fused function has one capsule per type, under
``__pyx_fuse_<k><name>``. A generated module that calls one declares a static pointer
``opg_sf_<name>`` and sets it from :func:`function_address` when it loads (see
:func:`opgraph_c.codegen.elemwise.assemble`). So:

- the loop calls SciPy's implementation and never goes back to Python, and its results are
  ``perform``'s bit for bit. SciPy's float32 loops compute in double and round, as the
  entries here do, except two: ``erfinv`` has its own float version, which float32 calls,
  and ``psi`` returns a NaN argument as it is (a signalling NaN stays signalling);
- compiling needs nothing of SciPy (no header, no library to link) and the cache key does
  not depend on its version: the pointer comes from the SciPy the process runs, the one
  ``perform`` would call.

SciPy's error actions (``scipy.special.seterr``) are not applied: the C kernels return
what ``perform`` returns under SciPy's default actions (``'ignore'``), where under
``'raise'`` ``perform`` would raise. Of the functions here only ``erfinv`` reports errors
from ``cython_special`` (outside ``[-1, 1]``; Boost's policy calls ``sf_error``, which takes
the GIL to warn or to set an exception when the action is not ``'ignore'``); its entry
returns SciPy's NaN there without calling it, so no kernel touches Python state.

``trigamma`` (``tri_gamma``) and ``polygamma(2, x)`` have no entry: SciPy computes them as
``zeta(n + 1, x)`` times a constant, and its Hurwitz zeta is not in ``cython_special``;
they run ``perform``.
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "SciPyFunction",
    "chi2sf",
    "erfinv",
    "function",
    "function_address",
    "functions_in",
    "nan_passthrough_float32",
    "scipy_code",
    "signature",
]

#: ``entry(dtype, *args) -> C expression | None`` (kernels/scalar.py's ScalarCode)
_Code = Callable[..., "str | None"]


def _capsule_api() -> tuple[Callable[..., bytes | None], Callable[..., int | None]]:
    """PyCapsule_GetName and PyCapsule_GetPointer, as private prototypes (setting
    ``restype`` on ``ctypes.pythonapi``'s would change them for every other user)."""
    api = ctypes.pythonapi
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", api))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", api)
    )
    return get_name, get_pointer


def signature(name: str, arity: int, ctype: str = "double") -> str:
    """The C signature ``cython_special`` gives a ``cpdef`` function of ``arity`` arguments
    of C type ``ctype`` returning ``ctype`` (its capsule's name)."""
    return f"{ctype} ({', '.join([ctype] * arity)}, int __pyx_skip_dispatch)"


@functools.cache
def function_address(name: str, arity: int, ctype: str = "double") -> int:
    """The address of ``scipy.special.cython_special.<name>`` taking ``arity`` arguments of
    C type ``ctype`` (``"double"`` or ``"float"``) and returning one.

    Of a fused function, the capsule with that signature is taken, whichever its fuse index.
    Raises LookupError naming the function if SciPy cannot be imported or has no such one.
    """
    wanted = signature(name, arity, ctype)
    try:
        import scipy
        from scipy.special import cython_special
    except ImportError as exc:
        raise LookupError(
            f"opgraph_c: the C kernel of {name} calls scipy.special.cython_special.{name}, "
            f"but SciPy cannot be imported: {exc}"
        ) from None
    get_name, get_pointer = _capsule_api()
    capi = getattr(cython_special, "__pyx_capi__", {})
    own = re.compile(rf"(?:__pyx_fuse_\d+)*{re.escape(name)}")
    found = []
    for key, capsule in capi.items():
        if own.fullmatch(key):
            text = (get_name(capsule) or b"").decode()
            if text == wanted:
                address = get_pointer(capsule, text.encode())
                if address:
                    return address
            found.append(text)
    has = f"it has {', '.join(repr(f) for f in found)}" if found else "it has no such function"
    raise LookupError(
        f"opgraph_c: scipy.special.cython_special.{name} with the C signature {wanted!r} "
        f"is needed by the C kernel of {name}, but SciPy {scipy.__version__} does not "
        f"export it ({has})."
    )


@dataclass(frozen=True)
class SciPyFunction:
    """A function of ``cython_special`` that generated C calls through ``opg_sf_<name>``
    (``opg_sf_<name>_float`` for a float version)."""

    name: str
    arity: int
    ctype: str = "double"

    @property
    def c_name(self) -> str:
        return f"opg_sf_{self.name}" + ("" if self.ctype == "double" else f"_{self.ctype}")

    @property
    def signature(self) -> str:
        return signature(self.name, self.arity, self.ctype)

    def available(self) -> bool:
        """SciPy exports it (else the op keeps its ``perform``)."""
        try:
            function_address(self.name, self.arity, self.ctype)
        except LookupError:
            return False
        return True

    def call(self, *args: str) -> str:
        """The C call on ``args`` (C atoms of type ``ctype``); ``__pyx_skip_dispatch`` is 0."""
        return f"{self.c_name}({', '.join(args)}, 0)"

    def _pointer_type(self, name: str = "") -> str:
        params = ", ".join([self.ctype] * self.arity + ["int"])
        return f"{self.ctype} (*{name})({params})"

    def c_declaration(self) -> str:
        """The static pointer, in the module's verbatim C."""
        return f"static {self._pointer_type(self.c_name)};  /* {self.name}: {self.signature} */"

    def cython_declaration(self) -> str:
        """The pointer as Cython sees it (to set it)."""
        return f"{self._pointer_type(self.c_name)} noexcept nogil"

    def cython_binding(self) -> str:
        """Module-level Cython setting the pointer when the module loads."""
        return (
            f"{self.c_name} = <{self._pointer_type()} noexcept nogil><size_t>function_address("
            f'"{self.name}", {self.arity}, "{self.ctype}")'
        )


_FUNCTIONS: dict[str, SciPyFunction] = {}
_C_NAME = re.compile(r"\bopg_sf_\w+(?=\()")


def function(name: str, arity: int, ctype: str = "double") -> SciPyFunction:
    """The :class:`SciPyFunction`, recorded under its C name for :func:`functions_in`."""
    fn = SciPyFunction(name, arity, ctype)
    known = _FUNCTIONS.setdefault(fn.c_name, fn)
    if known != fn:
        raise ValueError(f"opgraph_c: {fn.c_name} is already {known}, not {fn}")
    return fn


def functions_in(c_code: str) -> Iterator[SciPyFunction]:
    """The SciPy functions ``c_code`` calls, each once, in their order of first use."""
    for c_name in dict.fromkeys(_C_NAME.findall(c_code)):
        fn = _FUNCTIONS.get(c_name)
        if fn is None:
            raise KeyError(f"opgraph_c: {c_name} is called but no SciPy function has that name")
        yield fn


def scipy_code(name: str, arity: int = 1, *, float32: str = "double") -> _Code:
    """An entry calling ``cython_special.<name>``: float64 directly; float32 in double,
    rounded (``float32="double"``, what SciPy's float32 loops do) or through SciPy's float
    version (``float32="float"``); nothing for integers (they are cast to a float first)."""
    double = function(name, arity)
    single = function(name, arity, "float") if float32 == "float" else None

    def code(dtype: str, *args: str) -> str | None:
        if dtype == "float64":
            return double.call(*args) if double.available() else None
        if dtype != "float32":
            return None
        if single is not None:
            return single.call(*args) if single.available() else None
        if not double.available():
            return None
        return f"((opg_float32){double.call(*(f'(opg_float64){a}' for a in args))})"

    return code


def nan_passthrough_float32(code: _Code) -> _Code:
    """``code``, returning a float32 NaN argument unchanged: SciPy's float32 loop of ``psi``
    does (a signalling NaN stays signalling, where going through double would quiet it)."""

    def wrapped(dtype: str, x: str) -> str | None:
        expr = code(dtype, x)
        if expr is None or dtype != "float32":
            return expr
        return f"(isnan({x}) ? {x} : {expr})"

    return wrapped


_erfinv = scipy_code("erfinv", float32="float")


def erfinv(dtype: str, x: str) -> str | None:
    """``erfinv``, with SciPy's NaN outside ``[-1, 1]`` returned here: SciPy's Boost code
    reports that domain error through ``sf_error``, which may take the GIL."""
    expr = _erfinv(dtype, x)
    if expr is None:
        return None
    if dtype == "float64":
        return f"(fabs({x}) > 1 ? NAN : {expr})"
    return f"(fabsf({x}) > 1 ? ((opg_float32)NAN) : {expr})"


_chdtrc = function("chdtrc", 2)


def chi2sf(dtype: str, x: str, k: str) -> str | None:
    """``scipy.stats.chi2.sf(x, k)``: ``chdtrc(k, x)`` on the open support, and what
    ``rv_continuous.sf`` puts elsewhere: NaN for ``k <= 0`` or a NaN ``k`` or ``x``, 1 for
    ``x <= 0``, 0 for ``x = inf``. Always float64."""
    if dtype != "float64" or not _chdtrc.available():
        return None
    return (
        f"((!({k} > 0) || isnan({x})) ? NAN : {x} <= 0 ? 1.0 : "
        f"{x} < INFINITY ? {_chdtrc.call(k, x)} : 0.0)"
    )
