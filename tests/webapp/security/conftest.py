"""Helpers of the security tests: URLs for every rule of the URL map, CSRF tokens, logins."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from werkzeug.routing import Rule

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
SLUG = "product-choice-demo"
_INT_ARG_RE = re.compile(r"<int:(\w+)>")
_TOKEN_RE = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


def csrf_token(html: str) -> str:
    """The CSRF token of the first form in ``html``."""
    match = _TOKEN_RE.search(html)
    assert match is not None, "page has no CSRF token"
    return match.group(1)


def rules(app: Any) -> Iterator[Rule]:
    """Every rule of the app's URL map except static files."""
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint.endswith(".static"):
            continue
        yield rule


def int_arguments(rule: Rule) -> set[str]:
    """The ``<int:…>`` arguments of ``rule``: the URL map builds only digits there."""
    return set(_INT_ARG_RE.findall(rule.rule))


def build(app: Any, rule: Rule, **values: str) -> str:
    """A concrete URL for ``rule``: known arguments get plausible values, others ``x``.

    An ``<int:…>`` argument gets ``1`` unless the value given is digits: the URL map cannot
    build anything else there, and the int converter answers 404 to any other segment itself.
    """
    defaults = {"slug": SLUG, "fmt": "long", "ext": "csv", "token": "x", "code": "x"}
    int_args = int_arguments(rule)
    args = {a: values.get(a, defaults.get(a, "x")) for a in rule.arguments}
    for name in int_args & set(args):
        if not str(args[name]).isdigit():
            args[name] = "1"
    with app.test_request_context():
        adapter = app.url_map.bind("localhost")
        return adapter.build(rule.endpoint, args, force_external=False)


def login(
    app: Any, client: Any, username: str = "sec-admin", password: str = "pw-9f3k2-lq"
) -> None:
    """Create a researcher and log ``client`` in."""
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher(username, password)
    token = csrf_token(client.get("/researcher/login").get_data(as_text=True))
    resp = client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": username, "password": password},
    )
    assert resp.status_code == 302, resp.get_data(as_text=True)[:500]
