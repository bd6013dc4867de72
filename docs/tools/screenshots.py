"""Regenerate docs/screenshots/: every participant page type and the console overview.

Usage (``make screenshots``)::

    python docs/tools/screenshots.py --out docs/screenshots [--chromium /usr/bin/chromium]

A fresh SQLite platform is served on a free port; the four demo studies are loaded, bots move
participants to each page type and headless Chromium photographs it at 1280 and 375 px
(the viewport, not the whole page, to keep the files small). The console overview is shot
after 20 bots took part. PNGs are reduced to a 64-colour palette when Pillow is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the page tour lives with the browser tests

WIDTHS = {"1280": {"width": 1280, "height": 800}, "375": {"width": 375, "height": 740}}
PASSWORD = "screenshots only, never a real account"  # noqa: S105  (a throwaway database)


def _name(page_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", page_type.lower()).strip("-")


def _shrink(path: Path) -> None:
    try:
        from PIL import Image
    except ImportError:  # the PNG stays as Chromium wrote it
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument(
        "--chromium",
        default=os.environ.get("FRAMELAB_CHROMIUM") or shutil.which("chromium") or "",
    )
    args = parser.parse_args(argv)
    if not args.chromium:
        parser.error("no Chromium: pass --chromium or set FRAMELAB_CHROMIUM")

    from playwright.sync_api import sync_playwright
    from werkzeug.serving import make_server

    from tests.e2e.tour import tour
    from tests.webapp.conftest import make_app
    from webapp.bots import run_bots
    from webapp.services.studies import get_study

    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=args.chromium, headless=True, args=["--no-sandbox"]
        )
        for width, viewport in WIDTHS.items():
            # A fresh platform per width, so every tour starts from the same state.
            app = make_app(f"sqlite:///{Path(tmp) / f'shots-{width}.sqlite'}")
            server = make_server("127.0.0.1", 0, app, threaded=True)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            base = f"http://127.0.0.1:{server.server_port}"
            context = browser.new_context(viewport=viewport)
            page = context.new_page()

            def shoot(page_type: str, page=page, width=width, kind="participant") -> None:
                path = args.out / f"{kind}-{_name(page_type)}-{width}.png"
                page.screenshot(path=str(path))
                written.append(path)

            tour(app, base, page, shoot)
            # The console overview of the product-choice demo while it fills.
            from webapp.services.researchers import set_researcher

            with app.app_context():
                set_researcher("screenshots", PASSWORD, is_admin=True)
                definition = get_study("product-choice-demo").definition
            run_bots(
                app,
                definition,
                n=20,
                fail_quiz_share=0.1,
                abandon_share=0.2,
                seed=1,
            )
            page.goto(f"{base}/researcher/login")
            page.locator("input[name=username]").fill("screenshots")
            page.locator("input[name=password]").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.goto(f"{base}/researcher/studies/product-choice-demo")
            page.wait_for_load_state("networkidle")
            overview = page.locator("#progress")  # the live overview section, when there is one
            if overview.count():
                overview.evaluate("e => e.scrollIntoView()")
            shoot("overview", kind="console")
            context.close()
            server.shutdown()
            server.server_close()
        browser.close()
    for path in written:
        _shrink(path)
    total = sum(p.stat().st_size for p in written)
    print(f"{len(written)} screenshots in {args.out} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
