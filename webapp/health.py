"""``GET /healthz``: whether this app process can reach its database, for a load balancer.

Cheap enough to poll every few seconds from several balancers: one ``SELECT 1`` on a pooled
connection (never a session cookie, never an audit row, no template), answered as JSON:
``200 {"status": "ok"}`` or ``503 {"status": "unavailable", "database": "unreachable"}``, so
the balancer takes the host out of rotation until its database comes back. The answer names
no study, version or error text: the endpoint is public.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from webapp.extensions import db

log = logging.getLogger(__name__)
_PING = text("SELECT 1")


def healthz() -> tuple[Response, int]:
    """Answer 200 when a ``SELECT 1`` succeeds on the app's database, else 503."""
    try:
        with db.engine.connect() as conn:
            conn.execute(_PING)
    except SQLAlchemyError as exc:
        log.warning("health check: database unreachable (%s)", type(exc).__name__)
        return jsonify(status="unavailable", database="unreachable"), 503
    return jsonify(status="ok", database="ok"), 200


def register(app: Flask) -> None:
    """Add ``/healthz`` (GET and HEAD) to ``app``."""
    app.add_url_rule("/healthz", "healthz", healthz, methods=["GET"])
