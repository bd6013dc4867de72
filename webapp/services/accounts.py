"""Console accounts: login rate limiting, session fingerprints, roles and study ownership.

Passwords are hashed by :mod:`webapp.services.researchers` (werkzeug's salted scrypt/pbkdf2).
The login limiter is a small table rather than Flask-Limiter: failures must be counted across
several web processes and hosts (production runs stateless gunicorn workers), and the database
is the one store they already share; Flask-Limiter would need Redis or memcached for that.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select

from webapp.extensions import db
from webapp.models import LoginAttempt, Researcher, Study

LOGIN_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_USER = 5
MAX_FAILURES_PER_CLIENT = 20


@dataclass(frozen=True)
class LoginLimit:
    """Whether a login may be tried now, and if not for how long it stays blocked."""

    allowed: bool
    retry_after_s: int = 0


def client_hash(remote_addr: str | None, secret: str) -> str:
    """Return a keyed hash of the client address (raw IP addresses are never stored).

    Examples
    --------
    >>> len(client_hash("203.0.113.5", "k"))
    32
    """
    msg = (remote_addr or "unknown").encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:32]


def login_limit(username: str, client: str, now: datetime) -> LoginLimit:
    """Decide whether another login attempt is allowed.

    At most :data:`MAX_FAILURES_PER_USER` failures per username and
    :data:`MAX_FAILURES_PER_CLIENT` per client within :data:`LOGIN_WINDOW`; the block lifts
    when the oldest counted failure leaves the window.

    Parameters
    ----------
    username : str
    client : str
        :func:`client_hash` of the remote address.
    now : datetime

    Returns
    -------
    LoginLimit
    """
    since = now - LOGIN_WINDOW
    for column, value, limit in (
        (LoginAttempt.username, username, MAX_FAILURES_PER_USER),
        (LoginAttempt.client_hash, client, MAX_FAILURES_PER_CLIENT),
    ):
        n, oldest = db.session.execute(
            select(func.count(), func.min(LoginAttempt.created_at)).where(
                column == value, LoginAttempt.created_at >= since
            )
        ).one()
        if n >= limit:
            if oldest.tzinfo is None:  # SQLite returns naive UTC from an aggregate
                oldest = oldest.replace(tzinfo=UTC)
            retry = int((oldest + LOGIN_WINDOW - now).total_seconds()) + 1
            return LoginLimit(False, max(retry, 1))
    return LoginLimit(True)


def record_failure(username: str, client: str, now: datetime) -> None:
    """Count a failed login (and forget failures older than a day) and commit."""
    db.session.add(LoginAttempt(username=username[:80], client_hash=client, created_at=now))
    old = LoginAttempt.created_at < now - timedelta(days=1)
    db.session.execute(delete(LoginAttempt).where(old))
    db.session.commit()


def clear_failures(username: str) -> None:
    """Forget a username's failures after a successful login and commit."""
    db.session.execute(delete(LoginAttempt).where(LoginAttempt.username == username))
    db.session.commit()


def session_fingerprint(researcher: Researcher, secret: str) -> str:
    """Return a value stored in the session at login that changes with the password.

    A session whose fingerprint no longer matches (the password was reset) is logged out, so
    resetting a password ends every other session of that account.
    """
    msg = f"{researcher.id}:{researcher.password_hash}".encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:32]


def can_access(researcher: Researcher, study: Study) -> bool:
    """True if the researcher owns the study or is an admin."""
    return researcher.is_admin or study.owner_id == researcher.id


def visible_studies(researcher: Researcher) -> list[Study]:
    """Return the studies a researcher may see (admins: every study), by slug."""
    query = select(Study).order_by(Study.slug)
    if not researcher.is_admin:
        query = query.where(Study.owner_id == researcher.id)
    return list(db.session.scalars(query))


def get_researcher(username: str) -> Researcher | None:
    """Return the account called ``username``, or ``None``."""
    return db.session.scalar(select(Researcher).where(Researcher.username == username))
