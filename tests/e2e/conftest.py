"""A live server on a fresh SQLite database with the demo study, for the browser tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webapp.conftest import load_demo, make_app


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple]:
    """``(app, base_url, definition)`` with the app served on a real threaded HTTP server."""
    from werkzeug.serving import make_server

    app = make_app(f"sqlite:///{tmp_path / 'e2e.sqlite'}")
    definition = load_demo(app)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield app, f"http://127.0.0.1:{server.server_port}", definition
    server.shutdown()
    server.server_close()


@pytest.fixture
def browser_page(chromium_path: str):
    """A Playwright page in Debian's headless Chromium, 360 px wide (a small phone)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(viewport={"width": 360, "height": 740})
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        context.close()
        browser.close()
