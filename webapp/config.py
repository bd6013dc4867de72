"""Configuration classes.

Precedence, highest first:

1. the ``config`` mapping passed to ``create_app(config)`` (tests, embedding);
2. the environment: ``SECRET_KEY``, ``DATABASE_URL``, ``FRAMELAB_ENV``
   (``development`` | ``production`` | ``testing``), ``FRAMELAB_STUDIES_DIR``,
   ``FRAMELAB_PROXY_HOPS``, ``FRAMELAB_ACTIVE_WINDOW_MINUTES``, ``FRAMELAB_AUTO_TIMEOUT``,
   ``FRAMELAB_ENROLMENTS_PER_CLIENT``, ``FRAMELAB_ENROLMENT_WINDOW_MINUTES``,
   ``FRAMELAB_DEFINITION_CACHE_MB``, ``FRAMELAB_ASSIGNMENT_SEED`` (refused in production);
3. the defaults of the class selected by ``FRAMELAB_ENV`` (``development`` when unset).

The database defaults to ``instance/framelab.sqlite``. ``DATABASE_URL`` may use Heroku's
``postgres://`` scheme; it is normalised to ``postgresql+psycopg://`` (psycopg 3).
Production refuses to start without a ``SECRET_KEY`` of at least 256 bits of entropy (e.g.
``python -c "import secrets; print(secrets.token_hex(32))"``; see :func:`key_entropy_bits`);
development generates one into ``instance/secret_key`` so sessions survive restarts without a
secret in the repository.
"""

from __future__ import annotations

import math
import os
import secrets
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MIN_SECRET_KEY_BITS = 256
# Files of the instance folder that hold secrets or participants' data: the owner's only.
PRIVATE_FILE_MODE = 0o600


class ConfigError(RuntimeError):
    """The configuration cannot be used (e.g. production without ``SECRET_KEY``)."""


class BaseConfig:
    """Settings shared by every environment."""

    ENV_NAME = "base"
    SECRET_KEY: str | None = None
    SQLALCHEMY_DATABASE_URI: str | None = None  # None: SQLite file in the instance folder
    # Filled in by resolve_config: a pooled connection is pinged when it leaves the pool, so a
    # connection the server ended (a restart) is replaced instead of failing a request.
    SQLALCHEMY_ENGINE_OPTIONS: dict[str, Any] = {}
    WTF_CSRF_TIME_LIMIT: int | None = None  # a participant may read a page for hours
    # WTForms' own messages come from webapp.i18n.form_translations (cached), not Flask-WTF's.
    WTF_I18N_ENABLED = False
    SESSION_COOKIE_HTTPONLY = True
    SESSION_COOKIE_SAMESITE = "Lax"
    SESSION_COOKIE_SECURE = False
    # The researcher console has its own cookie (webapp.sessions): never sent on cross-site
    # requests, whatever the participant cookie needs for MTurk's iframe. Secure and HttpOnly
    # follow the SESSION_COOKIE_* settings (HttpOnly always).
    CONSOLE_SESSION_COOKIE_NAME = "framelab_console"
    CONSOLE_SESSION_COOKIE_SAMESITE = "Lax"
    # Where Prolific sends participants after the study; the code is appended as ``cc``.
    PROLIFIC_COMPLETE_URL = "https://app.prolific.com/submissions/complete"
    # Minutes after the last page view during which a started participant still counts as
    # "active" for counterbalancing (later they are treated as abandoned).
    ACTIVE_WINDOW_MINUTES = 60
    # 1: started participants idle beyond their study's time limit are marked timed out when
    # the console looks at the study (``FRAMELAB_AUTO_TIMEOUT=0`` leaves it to the researcher
    # or ``framelab timeouts``); see :mod:`webapp.services.timeouts`.
    AUTO_TIMEOUT = 1
    SQLITE_BUSY_TIMEOUT_MS = 30_000
    # Study YAML files the console offers to load (``FRAMELAB_STUDIES_DIR``); uploads resolve
    # their referenced files (e.g. product pairs) against it. None: the repository's
    # ``stimuli/studies``.
    STUDIES_DIR: str | None = None
    # An outer bound only: the request guard gives every request its own route's bound before
    # anything reads the body (webapp.request_limits), far lower except for the two uploads.
    MAX_CONTENT_LENGTH = 17 * 1024 * 1024
    # Reverse proxies in front of the app (``FRAMELAB_PROXY_HOPS``; Heroku's router is 1). Their
    # X-Forwarded-For/-Proto/-Host are trusted that many hops deep, so login rate limiting sees
    # the real client and recruitment links get the public https address.
    PROXY_HOPS = 0
    # People one client network may enrol in one study per window (0: no limit), so made-up
    # recruiter IDs sent from one place cannot fill it (webapp.services.enrol_limit). On in
    # production; off elsewhere, where `framelab bots --url` runs many bots from one machine.
    # A lab or classroom behind one address needs a higher FRAMELAB_ENROLMENTS_PER_CLIENT.
    ENROLMENTS_PER_CLIENT = 0
    ENROLMENT_WINDOW_MINUTES = 10
    # Study definitions each web process keeps parsed, in MiB of their stored JSON
    # (``FRAMELAB_DEFINITION_CACHE_MB``; least recently used dropped first; about twice this
    # in memory). A definition is at most 16 MiB (webapp.studydef.MAX_DEFINITION_BYTES).
    DEFINITION_CACHE_MB = 64
    # How researchers' passwords are hashed (werkzeug.security.generate_password_hash's
    # method; its default, scrypt at werkzeug's cost). Hashes made earlier keep their own.
    ACCOUNT_HASH_METHOD = "scrypt"
    # Seconds one study's console overview is reused across polls and tabs in a web process
    # (webapp.services.monitor.OverviewCache; 0: computed for every request).
    OVERVIEW_CACHE_SECONDS = 5.0
    # Flask-WTF's "SSL strict" check wants a Referer on every HTTPS POST, but every page is sent
    # with Referrer-Policy: no-referrer (participant URLs carry tokens), so browsers send none.
    # The CSRF token and SameSite cookies still protect every form.
    WTF_CSRF_SSL_STRICT = False
    # A whole number makes the server's assignment (each participant's seed and sequence)
    # repeatable, derived from it and the participant's platform ID; tests and bot runs set
    # it (``FRAMELAB_ASSIGNMENT_SEED``). None: drawn from ``secrets`` for every participant,
    # so nobody can predict a condition. Either way each participant's seed is recorded.
    ASSIGNMENT_SEED: int | None = None
    # The clock every recorded time comes from (a callable returning an aware UTC datetime,
    # see webapp.models.utcnow): None is the system clock; tests and in-process bot runs give
    # a webapp.clock.SimulatedClock. Set only through create_app(config).
    CLOCK = None


class DevelopmentConfig(BaseConfig):
    """Local work: SQLite in ``instance/``, generated secret key."""

    ENV_NAME = "development"


class TestingConfig(BaseConfig):
    """Tests: like development, CSRF stays on because the bots exercise it."""

    ENV_NAME = "testing"
    TESTING = True
    # Tests read the overview right after changing the database; the cache's own tests set it.
    OVERVIEW_CACHE_SECONDS = 0.0
    # The suite creates and logs in hundreds of researchers: the same method at a lower cost
    # (scrypt at werkzeug's cost is about 0.1 s of CPU and 32 MiB per hash).
    ACCOUNT_HASH_METHOD = "pbkdf2:sha256:1000"


class ProductionConfig(BaseConfig):
    """Behind gunicorn: ``SECRET_KEY`` required, secure cookies.

    Cookies use ``SameSite=None`` so the consent form's CSRF session cookie also works when MTurk
    frames the study in an iframe (MTurk ExternalQuestion; the pages after consent need none).
    """

    ENV_NAME = "production"
    ENROLMENTS_PER_CLIENT = 10
    SESSION_COOKIE_SECURE = True
    SESSION_COOKIE_SAMESITE = "None"


CONFIGS: dict[str, type[BaseConfig]] = {
    c.ENV_NAME: c for c in (DevelopmentConfig, TestingConfig, ProductionConfig)
}


# Whole-number settings that the environment may override: variable -> config key.
_INT_ENV = {
    "FRAMELAB_PROXY_HOPS": "PROXY_HOPS",
    "FRAMELAB_ACTIVE_WINDOW_MINUTES": "ACTIVE_WINDOW_MINUTES",
    "FRAMELAB_AUTO_TIMEOUT": "AUTO_TIMEOUT",
    "FRAMELAB_ENROLMENTS_PER_CLIENT": "ENROLMENTS_PER_CLIENT",
    "FRAMELAB_ENROLMENT_WINDOW_MINUTES": "ENROLMENT_WINDOW_MINUTES",
    "FRAMELAB_DEFINITION_CACHE_MB": "DEFINITION_CACHE_MB",
    "FRAMELAB_ASSIGNMENT_SEED": "ASSIGNMENT_SEED",
}
# Connection pool of each app process (SQLAlchemy's QueuePool arguments). The connections a
# deployment needs add up over processes and hosts: workers x (pool_size + max_overflow) per
# host, summed over hosts, must stay under the database's max_connections (docs/platform.md).
_POOL_ENV = {
    "FRAMELAB_DB_POOL_SIZE": ("pool_size", 1),
    "FRAMELAB_DB_MAX_OVERFLOW": ("max_overflow", 0),
    "FRAMELAB_DB_POOL_TIMEOUT": ("pool_timeout", 1),
}


def normalise_database_url(url: str) -> str:
    """Map Heroku-style and driver-less PostgreSQL URLs onto psycopg 3.

    Parameters
    ----------
    url : str
        A SQLAlchemy database URL, e.g. ``postgres://u@h/db``.

    Returns
    -------
    str
        The URL with ``postgresql+psycopg://`` for PostgreSQL; others unchanged.

    Examples
    --------
    >>> normalise_database_url("postgres://u@h:5432/db")
    'postgresql+psycopg://u@h:5432/db'
    """
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def key_entropy_bits(key: str) -> float:
    """Estimate the entropy of a secret key in bits, generously for random keys only.

    The estimate is ``len(key) * log2(alphabet)``, where the alphabet is the smallest of
    hexadecimal, decimal digits, one-case letters, letters and digits, URL-safe base64,
    standard base64 or printable ASCII that holds every character of the key (anything else:
    the printable ASCII size again). A key of fewer than 8 distinct characters (``"aaaa…"``)
    counts with those characters as its alphabet, and a key that repeats a block
    (``"0123456789" * 4``) counts the block once.

    Examples
    --------
    >>> key_entropy_bits("x" * 40)
    0.0
    >>> round(key_entropy_bits("0123456789abcdef" * 4))
    64
    >>> key_entropy_bits(secrets.token_hex(32)) >= 256
    True
    """
    if not key:
        return 0.0
    chars = set(key)
    alphabets = (
        set(string.hexdigits.lower()),
        set(string.hexdigits.upper()),
        set(string.digits),
        set(string.ascii_lowercase),
        set(string.ascii_uppercase),
        set(string.ascii_letters + string.digits),
        set(string.ascii_letters + string.digits + "-_"),
        set(string.ascii_letters + string.digits + "+/="),
    )
    size = min((len(a) for a in alphabets if chars <= a), default=95)
    # A key that is one block repeated is worth one block.
    period = next(
        p for p in range(1, len(key) + 1) if len(key) % p == 0 and key == key[:p] * (len(key) // p)
    )
    return period * math.log2(size if len(chars) >= 8 else len(chars))


def check_secret_key(key: str) -> None:
    """Refuse a production ``SECRET_KEY`` with less than :data:`MIN_SECRET_KEY_BITS` of entropy.

    Raises
    ------
    ConfigError
        Naming the variable and how to make a good key.
    """
    bits = key_entropy_bits(key)
    if bits < MIN_SECRET_KEY_BITS:
        raise ConfigError(
            f"SECRET_KEY is too weak for production (about {bits:.0f} bits of entropy; at least "
            f"{MIN_SECRET_KEY_BITS} are required). Generate one with: python -c "
            '"import secrets; print(secrets.token_hex(32))"'
        )


def _dev_secret_key(instance_path: Path) -> str:
    """Read or create ``instance/secret_key`` (development only), readable by its owner only."""
    path = instance_path / "secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_hex(32)
    # Written whole to a private file of our own (mode 0600 at creation rather than chmod-ed
    # after writing, which would leave the key readable by everyone in between), then linked
    # into place: a link never replaces a file, so two processes starting at once keep one
    # key, and the loser reads the winner's whole key, never a file still being written.
    own = instance_path / f".secret_key.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key)
        os.link(own, path)
    except FileExistsError:
        return path.read_text().strip()
    finally:
        own.unlink(missing_ok=True)
    return key


def private_sqlite_file(uri: str, instance_path: Path) -> None:
    """Make the SQLite database file of ``uri`` readable and writable by its owner only.

    SQLite creates a missing database with the process's umask (usually ``0644``: anyone on the
    machine could read every participant's answers), and gives its ``-wal``, ``-shm`` and
    ``-journal`` files the database file's mode. So a missing file is created here first, mode
    ``0600``. The default database in the instance folder is FrameLab's own, so an existing one
    (and its companion files) that others can read is made private too; a file named elsewhere
    by ``DATABASE_URL`` keeps the mode its owner gave it.

    Parameters
    ----------
    uri : str
        The SQLAlchemy database URL; anything but a SQLite file is left alone.
    instance_path : Path
        The app's instance folder.
    """
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    name = url.database or ""
    if url.get_backend_name() != "sqlite" or name in ("", ":memory:") or name.startswith("file:"):
        return
    path = Path(name)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except FileExistsError:
        pass
    except FileNotFoundError:  # no such folder: SQLite says so when it connects
        return
    if path.resolve().parent != instance_path.resolve():
        return
    for member in (path, *(Path(f"{path}{s}") for s in ("-wal", "-shm", "-journal"))):
        if member.exists() and member.stat().st_mode & 0o077:
            member.chmod(PRIVATE_FILE_MODE)


def resolve_config(
    instance_path: Path,
    explicit: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Merge class defaults, environment and explicit settings (explicit wins).

    Parameters
    ----------
    instance_path : Path
        The app's instance folder (must exist); holds the SQLite file and dev secret.
    explicit : Mapping, optional
        Settings that override everything (``create_app(config=...)``).
    environ : Mapping, optional
        The environment to read; ``os.environ`` when omitted.

    Returns
    -------
    dict
        Flask config keys and values.

    Raises
    ------
    ConfigError
        Unknown ``FRAMELAB_ENV``, or production without a strong secret key.
    """
    env = os.environ if environ is None else environ
    explicit = dict(explicit or {})
    env_name = explicit.get("ENV_NAME") or env.get("FRAMELAB_ENV") or "development"
    if env_name not in CONFIGS:
        raise ConfigError(f"FRAMELAB_ENV={env_name!r}; expected one of {sorted(CONFIGS)}")
    cls = CONFIGS[env_name]
    settings = {k: getattr(cls, k) for k in dir(cls) if k.isupper()}

    if env.get("SECRET_KEY"):
        settings["SECRET_KEY"] = env["SECRET_KEY"]
    if env.get("DATABASE_URL"):
        settings["SQLALCHEMY_DATABASE_URI"] = env["DATABASE_URL"]
    if env.get("FRAMELAB_STUDIES_DIR"):
        settings["STUDIES_DIR"] = env["FRAMELAB_STUDIES_DIR"]
    for var, key in _INT_ENV.items():
        if env.get(var):
            try:
                settings[key] = int(env[var])
            except ValueError:
                raise ConfigError(f"{var}={env[var]!r} is not a whole number") from None
    settings.update(explicit)
    if not settings.get("STUDIES_DIR"):
        settings["STUDIES_DIR"] = str(
            Path(__file__).resolve().parent.parent / "stimuli" / "studies"
        )

    if not settings.get("SQLALCHEMY_DATABASE_URI"):
        settings["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{instance_path / 'framelab.sqlite'}"
    settings["SQLALCHEMY_DATABASE_URI"] = normalise_database_url(
        str(settings["SQLALCHEMY_DATABASE_URI"])
    )
    options = dict(settings.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    options.setdefault("pool_pre_ping", True)
    for var, (option, minimum) in _POOL_ENV.items():
        if env.get(var):
            try:
                value = int(env[var])
            except ValueError:
                raise ConfigError(f"{var}={env[var]!r} is not a whole number") from None
            if value < minimum:
                raise ConfigError(f"{var}={value} must be at least {minimum}")
            options[option] = value
    if env.get("FRAMELAB_PGBOUNCER", "").strip().lower() in ("1", "true", "yes", "transaction"):
        # Behind PgBouncer in transaction mode a transaction may run on any server connection,
        # so a statement psycopg prepared on one is unknown on the next: prepare none.
        connect_args = dict(options.get("connect_args") or {})
        connect_args["prepare_threshold"] = None
        options["connect_args"] = connect_args
    settings["SQLALCHEMY_ENGINE_OPTIONS"] = options
    if not settings.get("SECRET_KEY"):
        if env_name == "production":
            raise ConfigError("SECRET_KEY must be set in production (FRAMELAB_ENV=production)")
        settings["SECRET_KEY"] = _dev_secret_key(instance_path)
    elif env_name == "production":
        check_secret_key(str(settings["SECRET_KEY"]))
    if env_name == "production":
        # Repeatable assignment would let anyone who knows the seed predict a condition.
        for key, var in (("ASSIGNMENT_SEED", "FRAMELAB_ASSIGNMENT_SEED"), ("CLOCK", "CLOCK")):
            if settings.get(key) is not None:
                raise ConfigError(f"{var} is for tests and bot runs; production refuses it")
        if settings["ACCOUNT_HASH_METHOD"] != BaseConfig.ACCOUNT_HASH_METHOD:
            raise ConfigError("production hashes passwords with werkzeug's default (scrypt)")
    return settings
