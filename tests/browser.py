"""Headless Chromium (Debian's `chromium`) on a Snakemake report: the page after a view is opened, as DOM and
screenshot. The report has no address for a view, so a script added to a copy of the page opens it.

Also the screenshot of the demo report in docs/pipeline.md:
    python tests/browser.py results/report.html docs/report.png --item results/demo/table1.html Tables table1 html
"""

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium")
# Offline and as root: no sandbox, no background connections (the machine has no network), a fresh profile.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",
]


def render(report_html: Path, script: str, work: Path, size: str = "1400,1000") -> tuple[str, bytes]:
    """The report rendered after `script` ran in it: the page's DOM and a PNG screenshot."""
    page = work / "page.html"
    head, body_end, tail = report_html.read_text(encoding="utf-8").rpartition("</body>")
    hook = f"<script>window.addEventListener('load', () => setTimeout(() => {{ {script} }}, 200));</script>"
    page.write_text(head + hook + body_end + tail, encoding="utf-8")
    screenshot = work / "page.png"
    flags = [*CHROMIUM_FLAGS, f"--window-size={size}", f"--user-data-dir={tempfile.mkdtemp(dir=work)}"]
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120, check=True
    )
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return dom, screenshot.read_bytes()


def show_item(path: str, category: str, subcategory: str, content: str) -> str:
    """Script that opens one result of the report (content: img or html) with its information panel."""
    return (
        f"app.setView({{navbarMode: 'resultinfo', category: '{category}', subcategory: '{subcategory}', "
        f"resultPath: '{path}', content: '{content}', contentPath: results['{path}'].data_uri}})"
    )


def show_subcategory(category: str, subcategory: str) -> str:
    return f"app.setView({{navbarMode: 'subcategory', category: '{category}', subcategory: '{subcategory}'}})"


def colours(png: bytes) -> int:
    """How many distinct colours a PNG has (a blank page has one or two)."""
    from PIL import Image

    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--item", nargs=4, metavar=("PATH", "CATEGORY", "SUBCATEGORY", "CONTENT"))
    parser.add_argument("--size", default="1400,900")
    args = parser.parse_args()
    if CHROMIUM is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    from PIL import Image

    with tempfile.TemporaryDirectory() as work:
        _, png = render(args.report, show_item(*args.item) if args.item else "", Path(work), args.size)
    # a palette of 256 colours: a third of the size, the same to the eye
    Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(args.output, optimize=True)
    print(f"{args.output}: {args.output.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
