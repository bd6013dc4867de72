"""A live server on a fresh SQLite database with the demo study, for the browser tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webapp.conftest import load_demo, make_app

# The suite's per-test timeout in milliseconds (``timeout`` under [tool.pytest.ini_options]).
SUITE_TIMEOUT_MS = 600_000


def without_time_limit(page) -> None:
    """Let ``page`` and every ``expect`` wait for as long as the test may run.

    A wall-clock limit of Playwright's own fails a test that a loaded machine only slows down;
    the suite's per-test timeout stays the one bound. ``expect.set_options`` takes 0 for "the
    default of 5 s", so its default is that timeout instead.
    """
    from playwright.sync_api import expect

    page.set_default_timeout(0)
    expect.set_options(timeout=SUITE_TIMEOUT_MS)


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    """Serve ``app`` on a real threaded HTTP server on a free loopback port; yield its URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple]:
    """``(app, base_url, definition)`` with the app served on a real threaded HTTP server."""
    app = make_app(f"sqlite:///{tmp_path / 'e2e.sqlite'}")
    definition = load_demo(app)
    with serve(app) as url:
        yield app, url, definition


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
        without_time_limit(page)
        yield page
        context.close()
        browser.close()


# axe-core (the npm package) for the accessibility tests: installed outside the repository by
# `make axe` (or here, when npm is on PATH), pinned so every run checks the same rules.
AXE_VERSION = "4.14.1"


def axe_dir() -> Path:
    """Where ``npm install --prefix`` puts axe-core (``FRAMELAB_AXE_DIR`` overrides)."""
    import os

    default = Path.home() / ".cache" / "framelab" / f"axe-core-{AXE_VERSION}"
    return Path(os.environ.get("FRAMELAB_AXE_DIR") or default)


@pytest.fixture(scope="session")
def axe_source() -> str:
    """The text of ``axe.min.js``, installed with npm on first use."""
    import shutil
    import subprocess

    from tests.conftest import require

    script = axe_dir() / "node_modules" / "axe-core" / "axe.min.js"
    npm = shutil.which("npm")
    if not script.exists() and npm:
        subprocess.run(  # noqa: S603  (a fixed command line)
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(axe_dir()),
                f"axe-core@{AXE_VERSION}",
            ],
            check=False,
            capture_output=True,
            timeout=300,
        )
    require(script.exists(), f"axe-core {AXE_VERSION} (npm, or `make axe`)")
    return script.read_text(encoding="utf-8")
