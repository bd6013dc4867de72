"""Console accounts: login rate limiting, session fingerprints, roles and study ownership.

Passwords are hashed by :mod:`webapp.services.researchers` (werkzeug's salted scrypt/pbkdf2).
The login limiter is a small table rather than Flask-Limiter: failures must be counted across
several web processes and hosts (production runs stateless gunicorn workers), and the database
is the one store they already share; Flask-Limiter would need Redis or memcached for that.

A client is its address's network (:func:`client_key`): an IPv4 address, or an IPv6 /64,
which one host gets whole and can pick a fresh address in for every guess. Failures are
counted per (account, client), so someone who knows a researcher's username
cannot lock the researcher out of their own client; per client over all accounts, so one
client cannot try a few passwords on every account; and over the whole server, so many
clients together cannot either: past :data:`MAX_FAILURES_GLOBAL` only the clients an account
has logged in from before (its *known clients*, :data:`KNOWN_CLIENT_DAYS`) may try it.

The limiter reserves an attempt *before* the password is checked (:func:`reserve_attempt`):
checking the counts and recording the attempt happen in one short transaction under a lock,
so parallel requests cannot all pass a check made before any of them was recorded. A
successful login then forgets that client's failures for the account, including its own
reservation, and remembers the client (:func:`record_login`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy import true as sa_true

from webapp.extensions import db
from webapp.models import LoginAttempt, Researcher, Study

LOGIN_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_ACCOUNT_CLIENT = 5  # one account from one client
MAX_FAILURES_PER_CLIENT = 20  # one client, all accounts together
MAX_FAILURES_GLOBAL = 100  # all clients and accounts; past it only known clients may try
KNOWN_CLIENT_DAYS = 90
FAILURE_KEPT = timedelta(days=1)


@dataclass(frozen=True)
class LoginLimit:
    """Whether a login may be tried now, and if not for how long it stays blocked."""

    allowed: bool
    retry_after_s: int = 0


def client_key(remote_addr: str | None) -> str:
    """The network a client address stands for: the IPv4 address itself, or the IPv6 /64.

    An IPv6 host usually holds a whole /64 and can change addresses inside it at will, so
    the limit counts the /64; an IPv4-mapped IPv6 address is its IPv4 address.

    Examples
    --------
    >>> client_key("203.0.113.5")
    '203.0.113.5'
    >>> client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::9")
    True
    >>> client_key("::ffff:203.0.113.5")
    '203.0.113.5'
    """
    try:
        ip = ipaddress.ip_address(remote_addr or "")
    except ValueError:
        return remote_addr or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def client_hash(remote_addr: str | None, secret: str) -> str:
    """Return a keyed hash of the client a remote address stands for (:func:`client_key`);
    raw IP addresses are never stored.

    Examples
    --------
    >>> len(client_hash("203.0.113.5", "k"))
    32
    >>> client_hash("2001:db8::1", "k") == client_hash("2001:db8::2", "k")
    True
    """
    msg = client_key(remote_addr).encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:32]


def lock_keys(*keys: str) -> None:
    """Serialise concurrent limiter transactions on the same keys until commit.

    Used by the login limiter and the enrolment limiter (:mod:`webapp.services.enrol_limit`).

    PostgreSQL: transaction-scoped advisory locks, taken in a fixed order (no deadlock).
    SQLite: nothing to do, because :func:`webapp._configure_engine` begins every transaction
    with ``BEGIN IMMEDIATE``, which holds the database's write lock from the first statement.
    """
    dialect = db.session.get_bind().dialect.name
    if dialect == "sqlite":
        db.session.execute(select(1))  # begins the (immediate) transaction now
        return
    if dialect != "postgresql":
        raise NotImplementedError(f"the rate limiters have no lock for {dialect}")
    for key in sorted(set(keys)):
        digest = hashlib.sha256(key.encode()).digest()[:8]
        db.session.execute(
            text("SELECT pg_advisory_xact_lock(:k)"),
            {"k": int.from_bytes(digest, "big", signed=True)},
        )


def _blocked(condition: Any, limit: int, now: datetime) -> LoginLimit | None:
    n, oldest = db.session.execute(
        select(func.count(), func.min(LoginAttempt.created_at)).where(
            condition,
            LoginAttempt.succeeded.is_(False),
            LoginAttempt.created_at >= now - LOGIN_WINDOW,
        )
    ).one()
    if n < limit:
        return None
    if oldest.tzinfo is None:  # SQLite returns naive UTC from an aggregate
        oldest = oldest.replace(tzinfo=UTC)
    retry = int((oldest + LOGIN_WINDOW - now).total_seconds()) + 1
    return LoginLimit(False, max(retry, 1))


def _known(username: str, client: str, now: datetime) -> bool:
    """True when ``username`` logged in from ``client`` within :data:`KNOWN_CLIENT_DAYS`."""
    return (
        db.session.scalar(
            select(LoginAttempt.id).where(
                LoginAttempt.username == username,
                LoginAttempt.client_hash == client,
                LoginAttempt.succeeded.is_(True),
                LoginAttempt.created_at >= now - timedelta(days=KNOWN_CLIENT_DAYS),
            )
        )
        is not None
    )


def reserve_attempt(username: str, client: str, now: datetime) -> LoginLimit:
    """Count a login attempt as a failure unless a limit is reached; commit.

    Within :data:`LOGIN_WINDOW`: at most :data:`MAX_FAILURES_PER_ACCOUNT_CLIENT` failures of
    one username from one client, :data:`MAX_FAILURES_PER_CLIENT` from one client, and,
    unless the client is one the account logged in from before, :data:`MAX_FAILURES_GLOBAL`
    over the whole server. A block lifts when the oldest failure it counts leaves the window.
    The checks and the record are one locked transaction, so N parallel attempts reserve at
    most the limit between them. Call it *before* checking the password;
    :func:`record_login` undoes the reservation when the password is right.

    Parameters
    ----------
    username : str
    client : str
        :func:`client_hash` of the remote address.
    now : datetime

    Returns
    -------
    LoginLimit
        ``allowed`` when the attempt was reserved (the password may be checked).
    """
    username = username[:80]
    lock_keys(f"login-user:{username}", f"login-client:{client}", "login-all")
    limits = [
        (
            (LoginAttempt.username == username) & (LoginAttempt.client_hash == client),
            MAX_FAILURES_PER_ACCOUNT_CLIENT,
        ),
        (LoginAttempt.client_hash == client, MAX_FAILURES_PER_CLIENT),
    ]
    if not _known(username, client, now):
        limits.append((sa_true(), MAX_FAILURES_GLOBAL))
    for condition, limit in limits:
        blocked = _blocked(condition, limit, now)
        if blocked is not None:
            db.session.rollback()
            return blocked
    db.session.add(LoginAttempt(username=username, client_hash=client, created_at=now))
    old = (LoginAttempt.succeeded.is_(False) & (LoginAttempt.created_at < now - FAILURE_KEPT)) | (
        LoginAttempt.created_at < now - timedelta(days=KNOWN_CLIENT_DAYS)
    )
    db.session.execute(delete(LoginAttempt).where(old))
    db.session.commit()
    return LoginLimit(True)


def record_login(username: str, client: str, now: datetime) -> None:
    """After a right password: forget this client's failures for the account (and this
    login's reservation) and remember the client as the account's own; commit.

    Failures from other clients stay counted: they are someone else's guesses.
    """
    username = username[:80]
    mine = (LoginAttempt.username == username) & (LoginAttempt.client_hash == client)
    db.session.execute(delete(LoginAttempt).where(mine))
    db.session.add(
        LoginAttempt(username=username, client_hash=client, created_at=now, succeeded=True)
    )
    db.session.commit()


def session_fingerprint(researcher: Researcher, secret: str) -> str:
    """Return a value stored in the session at login that changes with the password.

    A session whose fingerprint no longer matches (the password was reset) is logged out, so
    resetting a password ends every other session of that account.
    """
    msg = f"{researcher.id}:{researcher.password_hash}".encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:32]


def session_values(researcher: Researcher, secret: str) -> dict[str, Any]:
    """Return what a console session stores at login: id, password fingerprint, version."""
    return {
        "researcher_id": researcher.id,
        "researcher_fp": session_fingerprint(researcher, secret),
        "researcher_sv": researcher.session_version,
    }


def session_researcher(data: Mapping[str, Any], secret: str) -> Researcher | None:
    """Return the researcher a console session belongs to, or ``None`` if it is no longer valid.

    The one check for every place that trusts a console session (console views and the
    participant gate's preview): the account exists, its password is the one the session
    logged in with, and no logout or password change has ended its sessions since
    (:func:`end_sessions` bumps the version; a signed cookie copied before cannot be revoked
    any other way).

    Parameters
    ----------
    data : Mapping
        The console session's contents.
    secret : str
        The app's ``SECRET_KEY``.

    Returns
    -------
    Researcher or None
    """
    rid = data.get("researcher_id")
    if not isinstance(rid, int):
        return None
    researcher = db.session.get(Researcher, rid)
    if researcher is None:
        return None
    fingerprint = data.get("researcher_fp")
    if not isinstance(fingerprint, str) or not hmac.compare_digest(
        fingerprint, session_fingerprint(researcher, secret)
    ):
        return None
    if data.get("researcher_sv") != researcher.session_version:
        return None
    return researcher


def end_sessions(researcher: Researcher, *, commit: bool = True) -> None:
    """End every console session of ``researcher`` (logout, password change).

    The increment is done by the database, so two concurrent logouts both count.
    """
    db.session.execute(
        update(Researcher)
        .where(Researcher.id == researcher.id)
        .values(session_version=Researcher.session_version + 1)
        .execution_options(synchronize_session=False)
    )
    db.session.expire(researcher, ["session_version"])
    if commit:
        db.session.commit()


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
