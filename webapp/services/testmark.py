"""IDs and entry keys of test participants (bots and researcher previews).

A test participant's recruiter ID starts with ``test-`` (MTurk spelling: ``TEST-``). No
recruiter issues such IDs (Prolific's are 24 hex digits, MTurk's letters and digits only), so a
test participant can never be mistaken for a real one in a payment file or on a recruiter's
site. An entry link with such an ID is accepted only with its ``test_key``, an HMAC under the
server's ``SECRET_KEY`` of the study and the ID: only someone holding that secret (``framelab
bots``, the console's preview) can make a test participant, and no URL parameter can make a
real participant a test one (their ID is not in the reserved form) or the reverse.

Kept free of database imports: the entry parser and the bots both use it.
"""

from __future__ import annotations

import hashlib
import hmac
import re

TEST_PREFIX = "test-"
TEST_KEY_PARAM = "test_key"
# The part after the prefix: what test_id makes, with room for a few hand-made names.
_TEST_RE = re.compile(r"^test-[0-9a-z]{1,40}$")


def is_test_id(external_id: str) -> bool:
    """True when a recruiter ID is in the reserved test form (any letter case).

    Examples
    --------
    >>> is_test_id("test-3f2a"), is_test_id("TEST-3F2A"), is_test_id("5f1a2b3c4d5e6f708192a3b4")
    (True, True, False)
    """
    return external_id[: len(TEST_PREFIX)].lower() == TEST_PREFIX


def valid_test_id(external_id: str) -> bool:
    """True when a test ID is well formed (``test-`` and 1 to 40 letters or digits).

    Examples
    --------
    >>> valid_test_id("TEST-ABC123"), valid_test_id("test-a b")
    (True, False)
    """
    return _TEST_RE.match(external_id.lower()) is not None


def reserved_id(platform: str, name: str) -> str:
    """Return the test ID for ``name`` in the platform's canonical spelling (upper case on MTurk).

    A valid test ID is kept (canonically spelt); any other name maps to one, the same on every
    call, so a bot built twice with one name arrives as one person.

    Examples
    --------
    >>> reserved_id("prolific", "bot1")
    'test-835e7134a02ea3162331'
    >>> reserved_id("mturk", "bot1")
    'TEST-835E7134A02EA3162331'
    """
    if valid_test_id(name):
        value = name.lower()
    else:
        value = TEST_PREFIX + hashlib.sha256(name.encode()).hexdigest()[:20]
    return value.upper() if platform in ("mturk", "mturk_batch") else value


def entry_key(secret: str, slug: str, platform: str, external_id: str) -> str:
    """Return the entry key that admits test ID ``external_id`` to study ``slug``.

    Examples
    --------
    >>> len(entry_key("secret", "demo", "prolific", "test-ab12"))
    32
    """
    message = f"test-participant:{slug}:{platform}:{external_id}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:32]


def entry_params(secret: str | None, slug: str, platform: str, external_id: str) -> dict[str, str]:
    """The query parameter that admits a test ID (none without a secret: a real arrival)."""
    if secret is None:
        return {}
    return {TEST_KEY_PARAM: entry_key(secret, slug, platform, external_id)}


def entry_key_matches(key: str, secret: str, slug: str, platform: str, external_id: str) -> bool:
    """True when ``key`` is the entry key of this test ID (compared in constant time)."""
    if not secret or not key:
        return False
    return hmac.compare_digest(key, entry_key(secret, slug, platform, external_id))
