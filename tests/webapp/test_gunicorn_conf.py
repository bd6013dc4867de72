"""The gunicorn settings FrameLab ships (``gunicorn.conf.py``): gunicorn takes them, and the
worker hook freezes what the app allocated while loading."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

from gunicorn.config import Config

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


def test_gunicorn_accepts_the_worker_hook() -> None:
    settings = runpy.run_path(str(CONF))
    config = Config()
    # gunicorn validates a server hook's arity when it is set (post_worker_init(worker)).
    config.set("post_worker_init", settings["post_worker_init"])
    assert config.post_worker_init is settings["post_worker_init"]


def test_the_hook_freezes_what_the_worker_loaded() -> None:
    # In a child process: freezing this one would keep the test session's objects forever.
    script = (
        "import gc, runpy, sys\n"
        "assert gc.get_freeze_count() == 0\n"
        "loaded = [[i] for i in range(1000)]  # what an app allocates while it loads\n"
        f"runpy.run_path({str(CONF)!r})['post_worker_init'](None)\n"
        "print(gc.get_freeze_count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert int(out.stdout) >= 1000
