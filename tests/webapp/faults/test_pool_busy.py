"""Every pooled connection busy past the pool's timeout: the friendly retry page, never a 500."""

from __future__ import annotations

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db

from ..conftest import load_demo, make_app


def test_a_request_that_gets_no_connection_gets_the_retry_page_and_goes_on(tmp_path):
    app = make_app(
        f"sqlite:///{tmp_path / 'pool.sqlite'}",
        SQLALCHEMY_ENGINE_OPTIONS={"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2},
    )
    definition = load_demo(app)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="pb1")
    page = bot.open()
    while page.kind != "choice":
        page = bot.step()
    url = page.url
    with app.app_context():
        held = db.engine.connect()  # the pool's only connection, busy elsewhere
        try:
            status, _, body = bot.transport.request("GET", url, None)
        finally:
            held.close()
    assert status == 503 and "E503-BUSY" in body, (status, body[:300])
    assert bot.reload().kind == "choice"  # the connection is back: the page is served again
    app_done = bot.run()
    assert app_done.outcome == "completed"
