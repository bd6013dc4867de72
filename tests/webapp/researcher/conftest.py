"""Console fixtures: researcher accounts and logged-in test clients."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

PASSWORD = "correct horse battery"


def csrf_from(html: str) -> str:
    """The CSRF token of the first form on a page."""
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or re.search(
        r'name="csrf_token" value="([^"]+)"', html
    )
    assert match, "no CSRF token on the page"
    return match.group(1)


def login(client: Any, username: str, password: str = PASSWORD) -> Any:
    """Post the login form (with its CSRF token); return the response."""
    token = csrf_from(client.get("/researcher/login").get_data(as_text=True))
    return client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": username, "password": password},
    )


@pytest.fixture
def make_researcher(app) -> Callable[..., Any]:
    """``make_researcher("ana", admin=False)`` creates an account; returns a logged-in client."""

    def factory(username: str, *, admin: bool = False) -> Any:
        from webapp.services.researchers import set_researcher

        with app.app_context():
            set_researcher(username, PASSWORD, is_admin=admin)
        client = app.test_client()
        assert login(client, username).status_code == 302
        return client

    return factory


def page_token(client: Any, url: str) -> str:
    """The CSRF token of the page at ``url``."""
    return csrf_from(client.get(url).get_data(as_text=True))


def own_demo(app, username: str) -> None:
    """Give the (command-line loaded, live) demo study to ``username``."""
    from webapp.extensions import db
    from webapp.services.accounts import get_researcher
    from webapp.services.studies import get_study

    with app.app_context():
        get_study("product-choice-demo").owner_id = get_researcher(username).id
        db.session.commit()
