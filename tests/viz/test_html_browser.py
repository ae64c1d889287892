"""The HTML picture in a real browser: headless Chromium (Debian package ``chromium``) loads the page of the
ResNet fixture, runs its script (pan and zoom included, through ``#selftest``) and takes a screenshot, checked
by structure (the node boxes in the DOM, a picture that is not blank), not by pixels.

CI: .ci/run must install the browser (``apt-get install -y chromium``) for this test to run; without it the
test is skipped with that reason."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ..test_cli import stdops as cli

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install -y chromium; add it to .ci/run)"
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "resnet.html"
    r = cli("plot", str(RESNET), "--graph", "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out


def test_the_page_is_self_contained(page):
    text = page.read_text()
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", text))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace is a name, not a fetch
    assert "<link" not in text and not re.search(r"<script[^>]+src=", text)


def test_the_browser_runs_the_script_and_finds_every_node(page, tmp_path):
    import onnx

    r = chromium(tmp_path, "--dump-dom", page.as_uri() + "#selftest")
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-ready="1"' in body
    n_nodes = len(onnx.load(RESNET).graph.node)
    boxes = re.findall(r'<g class="node[^"]*" id="n\d+" data-kind="(\w+)"', dom)
    assert boxes.count("op") == n_nodes and len(boxes) == n_nodes + 2
    assert f'data-nodes="{n_nodes + 2}"' in body
    test = json.loads(re.search(r'data-selftest="([^"]*)"', body).group(1).replace("&quot;", '"'))
    assert test["zoomed"] > 1.5  # the wheel zoomed in at the pointer
    scale = lambda t: float(re.search(r"scale\(([-\d.e]+)\)", t).group(1))  # noqa: E731
    translate = lambda t: [float(v) for v in re.search(r"translate\(([-\d.e]+),([-\d.e]+)\)", t).groups()]  # noqa: E731
    assert scale(test["after"]) > scale(test["before"])
    assert translate(test["after"]) != translate(test["before"])  # and the drag moved it


def test_screenshot_is_a_picture_of_the_graph(page, tmp_path):
    from PIL import Image

    shot = tmp_path / "resnet.png"
    r = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1000", page.as_uri())
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (1000, 1280)
    ink = img.min(axis=2) < 128  # text and edges
    assert 0.005 < ink.mean() < 0.5
    conv_fill = np.array([0xDB, 0xE9, 0xF8])  # the title band of the Conv boxes
    assert (np.abs(img - conv_fill).sum(axis=2) < 6).sum() > 500
    print(f"screenshot: {shot}")
