"""Researcher accounts (passwords hashed with werkzeug)."""

from __future__ import annotations

from sqlalchemy import select
from werkzeug.security import check_password_hash, generate_password_hash

from webapp.extensions import db
from webapp.models import Researcher


def set_researcher(username: str, password: str) -> Researcher:
    """Create the account or reset its password, and commit."""
    if not username.strip() or len(password) < 8:
        raise ValueError("a username and a password of at least 8 characters are required")
    researcher = db.session.scalar(select(Researcher).where(Researcher.username == username))
    if researcher is None:
        researcher = Researcher(username=username, password_hash="")
        db.session.add(researcher)
    researcher.password_hash = generate_password_hash(password)
    db.session.commit()
    return researcher


def authenticate(username: str, password: str) -> Researcher | None:
    """Return the researcher if the password matches, else ``None``."""
    researcher = db.session.scalar(select(Researcher).where(Researcher.username == username))
    if researcher is None or not check_password_hash(researcher.password_hash, password):
        return None
    return researcher
