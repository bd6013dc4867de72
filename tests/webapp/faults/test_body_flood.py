"""Fifty oversized anonymous request bodies at once against a real gunicorn (on SQLite): the
workers' memory stays under a stated ceiling and a genuine participant's page still answers.

The flood is the one ``bench/body_flood.py`` measures on PostgreSQL: 15 MiB of urlencoded
``k=v`` fields (1.4 million) per request, sent in turn to a participant page with a made-up
token, the consent form and the console login.
"""

from __future__ import annotations

import importlib.util
import secrets
import sys
import threading
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.webapp.conftest import ROOT, load_demo, make_app

pytestmark = pytest.mark.slow

# Growth of the workers' resident memory over their size before the flood, at its peak and
# once it is over. One such body parsed took about 450 MiB before the bodies were bounded.
PEAK_CEILING_MIB = 100
AFTER_CEILING_MIB = 50
ATTACKERS = 50


def _body_flood(loadtest: ModuleType) -> ModuleType:
    name = "framelab_bench_body_flood"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "body_flood.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_fifty_oversized_bodies_at_once_leave_the_memory_and_the_participant_alone(
    loadtest, tmp_path: Path
):
    from urllib.parse import urlsplit

    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.extensions import dispose_engines

    flood = _body_flood(loadtest)
    url = f"sqlite:///{tmp_path / 'flood.sqlite'}"
    app = make_app(url)
    definition = load_demo(app)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="g1")
    bot.open()
    bot.step()
    page = urlsplit(bot.page.url).path
    slug = definition.slug
    with app.app_context():
        dispose_engines()
    env = {
        "DATABASE_URL": url,
        "SECRET_KEY": app.config["SECRET_KEY"],
        "FRAMELAB_ENV": "production",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    with loadtest.Gunicorn(env, 2, 4, logs) as server:
        warm = flood.reload_page(server.url + page, 1.0)  # the page's first requests
        assert warm["statuses"] == {"200": warm["requests"]}
        before = flood.rss_mib(server.worker_pids())
        targets = [
            f"/s/{slug}/p/{secrets.token_urlsafe(24)}",
            f"/s/{slug}/start",
            "/researcher/login",
        ]
        outcomes: Counter[str] = Counter()
        with flood.RssSampler(server.worker_pids) as rss:
            attack = threading.Thread(
                target=lambda: outcomes.update(
                    flood.flood("127.0.0.1", server.port, targets, ATTACKERS, 0)
                )
            )
            attack.start()
            during = flood.reload_page(server.url + page, 3.0)
            attack.join(timeout=120)
            assert not attack.is_alive(), "the flood's requests were not answered in 2 minutes"
        after = flood.rss_mib(server.worker_pids())
        still = flood.reload_page(server.url + page, 1.0)
        log = server.error_log()
    assert rss.peak - before < PEAK_CEILING_MIB, (before, rss.peak, after)
    assert after - before < AFTER_CEILING_MIB, (before, after)
    assert sum(outcomes.values()) == ATTACKERS
    # Each request is answered with a refusal (413, or 404 for the made-up token) before its
    # body is read, or the connection is closed while the client is still sending.
    assert set(outcomes) <= {"404", "413", "ConnectionResetError", "BrokenPipeError"}, outcomes
    assert during["statuses"] == {"200": during["requests"]} and during["requests"] > 0
    assert still["statuses"] == {"200": still["requests"]}
    assert "Traceback" not in log
