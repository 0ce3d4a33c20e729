"""Every hookspec, and every argument of it, is documented in docs/plugin-guide.md."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from opgraph.plugins import hookspecs

GUIDE = Path(__file__).resolve().parents[4] / "docs" / "plugin-guide.md"

HOOKSPECS = sorted(
    (name, fn)
    for name, fn in vars(hookspecs).items()
    if callable(fn) and getattr(fn, "opgraph_spec", None) is not None
)


@pytest.fixture(scope="module")
def guide() -> str:
    if not GUIDE.exists():
        pytest.skip(f"{GUIDE} is not part of this checkout (installed from a wheel?)")
    return GUIDE.read_text(encoding="utf-8")


def test_the_core_hookspecs_are_found() -> None:
    names = {name for name, _ in HOOKSPECS}
    assert {"opgraph_addhooks", "opgraph_add_config", "opgraph_linkers"} <= names
    assert all(name.startswith("opgraph_") for name in names)


@pytest.mark.parametrize(("name", "fn"), HOOKSPECS, ids=[name for name, _ in HOOKSPECS])
def test_hookspec_has_a_section_with_its_signature(guide: str, name: str, fn: object) -> None:
    args = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    heading = f"### {name}({', '.join(args)})"
    assert heading in guide, f"docs/plugin-guide.md needs a section headed {heading!r}"
    section = guide.split(heading, 1)[1].split("\n### ", 1)[0]
    for arg in args:
        assert f"`{arg}`" in section, f"the {name} section should explain `{arg}`"


@pytest.mark.parametrize(("name", "fn"), HOOKSPECS, ids=[name for name, _ in HOOKSPECS])
def test_hookspec_docstring_says_when_and_what(name: str, fn: object) -> None:
    doc = inspect.getdoc(fn) or ""
    assert len(doc.splitlines()) >= 3, f"{name} needs a docstring: when called, what to return"
    assert "called" in doc.lower(), f"{name}'s docstring should say when it is called"


def test_hookspec_arguments_are_keyword_friendly() -> None:
    for name, fn in HOOKSPECS:
        for param in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
            assert param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (name, param)
            assert param.default is inspect.Parameter.empty, (name, param)
