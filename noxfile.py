"""Every developer command for the opgraph monorepo: ``nox -l`` lists them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests", "tests_modes"]

ROOT = Path(__file__).parent
# Core first: every other package depends on it.
PACKAGES = [
    "core",
    *sorted(
        p.parent.name
        for p in (ROOT / "packages").glob("*/pyproject.toml")
        if p.parent.name != "core"
    ),
]
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6", "graphviz>=0.20"]
#: pytest-xdist: one worker per CPU (``-n auto``). Put ``-n 0`` (or ``-p no:xdist``) after
#: ``--`` to run in one process, e.g. under a debugger.
PARALLEL = ["-n", "auto"]


#: Packages with compiled extensions: built once into a wheel per source state and Python,
#: which every session installs, instead of compiling them again in each session's venv.
COMPILED = {"backend-c"}
#: What a compiled package's wheel is built from (generated .c files and build/ are not).
BUILD_INPUTS = (".py", ".pyx", ".pxd", ".h", ".toml")


def compiled_wheel(session: nox.Session, name: str) -> str:
    """The path of ``packages/<name>``'s wheel for this session's Python, built if missing.

    Wheels live in ``.nox/_wheels/<hash of the sources and Python>/``, so ``tests`` and
    ``tests_modes`` (and a second ``nox -s tests``) share one build of backend-c, and an edit
    to any of its sources builds a new one.
    """
    src = ROOT / "packages" / name
    # run_install: these also run under ``nox --install-only``, where session.run does nothing.
    python = session.run_install(
        "python", "-c", "import sys; print(sys.version)", silent=True
    ).strip()
    digest = hashlib.sha256(python.encode())
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.suffix in BUILD_INPUTS and path.is_file() and rel.parts[0] != "build":
            digest.update(str(rel).encode() + b"\0" + path.read_bytes())
    out = ROOT / ".nox" / "_wheels" / f"{name}-{digest.hexdigest()[:16]}"
    wheels = sorted(out.glob("*.whl"))
    if not wheels:
        session.log(f"building {name}'s wheel into {out.relative_to(ROOT)}")
        python_path = str(Path(session.bin) / "python")
        session.run_install(
            "uv",
            "build",
            "-q",
            "--wheel",
            "--python",
            python_path,
            "-o",
            str(out),
            str(src),
            external=True,
        )
        wheels = sorted(out.glob("*.whl"))
    return str(wheels[-1])


def install_packages(session: nox.Session, editable: bool = True) -> None:
    """Install every package in packages/ (core first) into the session's venv.

    Pure-Python packages are installed editable when ``editable``; compiled ones always
    from their shared wheel (see ``compiled_wheel``).
    """
    args: list[str] = []
    for name in PACKAGES:
        if name in COMPILED:
            args.append(compiled_wheel(session, name))
        else:
            args += ["-e", f"packages/{name}"] if editable else [f"packages/{name}"]
    session.install(*args)


@nox.session
def tests(session: nox.Session) -> None:
    """Install every package plus the example plugin and run all test suites."""
    install_packages(session)
    session.install("./tests/example_plugin")
    session.install(*TEST_DEPS)
    suites = [
        f"packages/{name}/tests"
        for name in PACKAGES
        if (ROOT / "packages" / name / "tests").is_dir()
    ]
    session.run("python", "-m", "pytest", *PARALLEL, *suites, "tests", *session.posargs)


#: What tests_modes runs core's and the optimizers' suites under, besides the default.
MODE_FLAGS = {
    # every node runs its perform (the default run uses backend-c's c linker)
    "py": "linker=py",
    # every rewrite checked against the replaced value, every C kernel against perform, every
    # output for NaN/inf (tests marked nonfinite feed such values on purpose: check off)
    "debug_mode": "mode=DEBUG_MODE",
}


@nox.session
def tests_modes(session: nox.Session) -> None:
    """Core's and the optimizers' suites again with the ``py`` linker and under DEBUG_MODE.

    ``nox -s tests_modes -- py`` (or ``debug_mode``) runs one of them; other arguments go
    to pytest.
    """
    install_packages(session)
    session.install("./tests/example_plugin")
    session.install(*TEST_DEPS)
    chosen = [a for a in session.posargs if a in MODE_FLAGS] or list(MODE_FLAGS)
    args = [a for a in session.posargs if a not in MODE_FLAGS]
    suites = ["packages/core/tests", "packages/optimizers/tests"]
    for name in chosen:
        session.log(f"{name}: OPGRAPH_FLAGS={MODE_FLAGS[name]}")
        session.run(
            "python",
            "-m",
            "pytest",
            *PARALLEL,
            *suites,
            *args,
            env={"OPGRAPH_FLAGS": MODE_FLAGS[name]},
        )


@nox.session
def core_alone(session: nox.Session) -> None:
    """Only opgraph-core installed: core's tests still pass (everything runs, only slower)."""
    session.install("-e", "packages/core", *TEST_DEPS)
    session.run("python", "-m", "pytest", "packages/core/tests", *session.posargs)


@nox.session
def sparse_alone(session: nox.Session) -> None:
    """opgraph-sparse with core only (no backend-c, no optimizers): every sparse Op runs its
    ``perform``, and the package's tests pass (the C-kernel tests skip)."""
    session.install("-e", "packages/core", "-e", "packages/sparse", *TEST_DEPS)
    session.run("python", "-m", "pytest", "packages/sparse/tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole repository."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


#: Source files the size caps count (generated .c files are not sources).
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".h")
#: Lines allowed in core's sources (issue 11: 20,000 now, on the way to 15,000).
CORE_CAP = 20_000
#: Lines allowed in any one source file.
FILE_CAP = 1_000


@nox.session(venv_backend="none")
def size(session: nox.Session) -> None:
    """Line caps over every package's sources (.py, .pyx, .pxd, .h): core under CORE_CAP
    lines, no file over FILE_CAP."""
    too_big = []
    totals: dict[str, int] = {}
    for path in sorted((ROOT / "packages").glob("*/src/**/*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        n = sum(1 for _ in path.open(encoding="utf-8"))
        package = path.relative_to(ROOT / "packages").parts[0]
        totals[package] = totals.get(package, 0) + n
        if n > FILE_CAP:
            too_big.append(f"{path.relative_to(ROOT)}: {n} lines (cap {FILE_CAP})")
    for package, n in sorted(totals.items()):
        session.log(f"packages/{package}/src: {n} lines")
    if totals.get("core", 0) > CORE_CAP:
        too_big.append(f"packages/core/src: {totals['core']} lines (cap {CORE_CAP})")
    if too_big:
        session.error("size caps exceeded:\n" + "\n".join(too_big))


@nox.session
def demo(session: nox.Session) -> None:
    """Install opgraph and run the first programs in examples/ (the README's first command)."""
    install_packages(session, editable=False)
    session.run("python", "-m", "opgraph", "plugins")
    for example in sorted((ROOT / "examples").glob("*.py")):
        session.log(f"running {example.name}")
        session.run("python", str(example))


@nox.session
def bench(session: nox.Session) -> None:
    """Run the speed suite in benchmarks/ and print medians beside NumPy (and installed peers).

    Packages are installed with their bytecode compiled, as pip does by default (uv does not):
    W5 and W8 time fresh processes, whose imports would otherwise compile every module.
    """
    session.env["UV_COMPILE_BYTECODE"] = "1"
    install_packages(session, editable=False)
    session.install("./tests/example_plugin")  # W19 compiles its C kernel
    session.run("python", "benchmarks/run.py", *session.posargs)
