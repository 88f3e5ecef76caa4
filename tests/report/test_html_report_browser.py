"""report.html in a real browser: headless Chromium loads each page with no console message,
decodes every image and shows the section headings (skipped where no Chromium is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = next(
    (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")

# appended to a copy of the page: after the load event, count the images the browser could not
# decode and say so in the DOM and on the console (the one console line a good page gives)
IMAGE_CHECK = (
    "<script>window.addEventListener('load', () => {"
    " const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).length;"
    " document.body.setAttribute('data-broken-images', String(broken));"
    " console.log('image-check ' + document.images.length + ' images, ' + broken + ' broken');"
    " });</script>"
)
CONSOLE = re.compile(r":CONSOLE[^\]]*\] \"(.*)\", source:")


def load(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM Chromium builds from ``page`` (plus the image check) and its console messages."""
    checked = tmp_path / f"checked-{page.parent.name}.html"
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", IMAGE_CHECK + "</body>"))
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        checked.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, CONSOLE.findall(done.stderr)


def headings(dom: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", text) for text in re.findall(r"<h2[^>]*>(.*?)</h2>", dom)]


@pytest.mark.parametrize(
    ("kind", "sections"),
    [
        (
            "run",
            ["Key numbers", "Breakdown", "Timeline", "Link utilization", "Queues", "Slowest collectives"],
        ),
        ("compare", ["Side by side", "Breakdown", "Timeline", "Link utilization", "Slowest collectives"]),
        ("sweep", ["Metrics", "Over seeds", "Variants"]),
    ],
)
def test_page_loads_in_chromium_with_no_console_errors(report_outputs, tmp_path, kind, sections):
    page = report_outputs[kind] / "report.html"
    dom, console = load(page, tmp_path)
    images = page.read_text(encoding="utf-8").count("<img ")
    assert console == [f"image-check {images} images, 0 broken"]
    assert 'data-broken-images="0"' in dom
    shown = headings(dom)
    assert [title for title in shown if title in sections] == sections


def test_the_check_sees_a_broken_image_and_a_script_error(tmp_path):
    """The harness itself: a page with an undecodable image and a failing script is caught."""
    page = tmp_path / "bad" / "report.html"
    page.parent.mkdir()
    page.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body><h2>Key numbers</h2>"
        '<img src="data:image/png;base64,AAAA"><script>no_such_function();</script></body></html>'
    )
    dom, console = load(page, tmp_path)
    assert 'data-broken-images="1"' in dom
    assert any("no_such_function is not defined" in line for line in console)
