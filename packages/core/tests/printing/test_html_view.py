"""html_view: a self-contained page (parsed here) that a headless browser renders."""

from __future__ import annotations

import html.parser
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from opgraph.printing.html import html_view, write_html


def _graphviz_missing() -> str | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return "the graphviz Python package is not installed (pip install graphviz)"
    if shutil.which("dot") is None:
        return "Graphviz's dot program is not on PATH (apt-get install graphviz)"
    return None


pytestmark = pytest.mark.skipif(_graphviz_missing() is not None, reason=str(_graphviz_missing()))


def build(toys: SimpleNamespace) -> SimpleNamespace:
    vec = toys.TensorType("float64", (False,), shape=(None,))
    x = vec("x")
    w = toys.TensorType("float64", (False, False), shape=(3, None))("w")
    ten = toys.const(np.array([10.0]))
    p = toys.pow(x, ten)
    y = toys.add(x, p)
    z = toys.exp(toys.Sum()(y))  # the line the tooltip must point at
    z.owner.tag.provenance = [
        SimpleNamespace(rewrite="local_exp_sum", location="specialize/math.py:12", replaced=p)
    ]
    f = toys.function([x, w], [z, toys.mul(w, w)], name="train")
    return SimpleNamespace(f=f, x=x, z=z)


class _Collector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)


def test_page_is_self_contained_with_tooltips(toys, tmp_path):
    g = build(toys)
    path = html_view(g.f, tmp_path / "graph.html")
    assert path == str(tmp_path / "graph.html")
    page = Path(path).read_text(encoding="utf-8")
    assert write_html is html_view
    assert html_view(g.f) == page  # no outfile: the document itself

    parser = _Collector()
    parser.feed(page)
    tags = [t for t, _ in parser.tags]
    assert "svg" in tags and "script" in tags and "style" in tags
    ids = {a.get("id") for _, a in parser.tags}
    assert {"tooltip", "viewport", "zoom-in", "zoom-out", "zoom-reset"} <= ids
    # Nothing is fetched: no external scripts, styles, images or namespace URLs.
    assert "http://" not in page and "https://" not in page
    for tag, attrs in parser.tags:
        for name in ("src", "href", "xlink:href"):
            assert not attrs.get(name), f"<{tag} {name}={attrs.get(name)!r}>"

    titles = "\n".join(parser.titles)
    assert "Op: Elemwise{exp,no_inplace}" in titles
    assert "Output type: TensorType(float64, scalar)" in titles
    assert "Shape: (?,)" in titles and "Shape: (3, ?)" in titles
    assert "Rewrite: local_exp_sum (specialize/math.py:12) replaced Elemwise{pow,no_inplace}.0" in (
        titles
    )
    assert "Value: [10.]" in titles
    created = [line for line in titles.splitlines() if line.startswith("Created at: ")]
    assert any(
        "test_html_view.py" in line and "z = toys.exp(toys.Sum()(y))" in line for line in created
    )
    assert "<title>opgraph: train</title>" in page
    # Every drawn node has a tooltip entry in the page's data.
    data = re.search(r'<script type="application/json" id="opgraph-data">(.*?)</script>', page)
    assert data is not None
    node_ids = set(re.findall(r'<g id="([av]\d+)" class="node">', page))
    assert node_ids and all(f'"{nid}"' in data.group(1) for nid in node_ids)


def test_variables_and_escaping(toys):
    x = toys.vector("</script><b>x")
    page = html_view(toys.exp(x), title="a < b")
    assert "</script><b>" not in page
    assert "<h1>a &lt; b</h1>" in page


# ---------------------------------------------------------------- headless browser


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browser_flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """Width, height, bytes per pixel and raw pixels of an 8-bit RGB/RGBA PNG (no Pillow)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = bpp = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * bpp
    out, prev = bytearray(), bytearray(stride)
    for row in range(height):
        ftype = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        out += line
        prev = line
    return width, height, bpp, bytes(out)


@pytest.mark.browser
@pytest.mark.skipif(_chromium() is None, reason="no chromium/chromium-browser on PATH")
def test_headless_browser_renders_the_graph(toys, tmp_path):
    g = build(toys)
    page = html_view(g.f, tmp_path / "graph.html")
    shot = tmp_path / "shot.png"
    cmd = [
        _chromium(),
        *_browser_flags(tmp_path / "profile"),
        f"--screenshot={shot}",
        "--window-size=1200,800",
        Path(page).as_uri() + "#node=a0",
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert len(data) > 5000
    width, height, bpp, pixels = decode_png(data)
    assert (width, height) == (1200, 800)
    px = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, bpp)[..., :3]
    colours = {tuple(c) for c in px[::4, ::4].reshape(-1, 3)}
    assert len(colours) > 20, "the screenshot is (nearly) one colour"
    assert px.std() > 10
    # Graph colours are on screen: Elemwise pink #FFAABB, inputs green, outputs blue.
    flat = px.reshape(-1, 3)
    for rgb in ((255, 170, 187), (0, 255, 0), (0, 0, 255)):
        assert (flat == rgb).all(axis=1).sum() > 100, f"colour {rgb} not rendered"
    # The tooltip of the node named in the URL is open (its pale yellow background).
    assert (flat == (255, 255, 240)).all(axis=1).sum() > 1000


@pytest.mark.browser
@pytest.mark.skipif(_chromium() is None, reason="no chromium/chromium-browser on PATH")
def test_page_script_runs_in_browser(toys, tmp_path):
    g = build(toys)
    page = html_view(g.f, tmp_path / "graph.html")
    cmd = [_chromium(), *_browser_flags(tmp_path / "profile"), "--dump-dom"]
    result = subprocess.run(
        [*cmd, Path(page).as_uri() + "#node=a0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    dom = result.stdout
    assert "<svg" in dom
    assert "<title>Op:" not in dom  # the script moved the SVG titles into its tooltip
    assert re.search(r'id="tooltip"[^>]*style="[^"]*display: block', dom)
    assert re.search(r'id="stage"[^>]*style="transform: translate\(', dom)
