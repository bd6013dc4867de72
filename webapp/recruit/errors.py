"""What can go wrong with a call to a recruiter, by what it means for money.

A call either was never sent (:class:`NotSent`: safe to send again, whatever it does), was
refused (:class:`Refused`: the platform changed nothing), or has an unknown outcome
(:class:`OutcomeUnknown`: it may have taken effect; never sent again blindly). Messages are
short and safe to show in the console: the platform's reason is cut and scrubbed of anything
that looks like a credential (:func:`safe_text`).
"""

from __future__ import annotations

import os
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
# Whatever the platform echoes back that looks like a credential: an Authorization scheme
# with its value, or a secret-looking name with a value after ":" or "=". Only names stay.
_SCHEMES = re.compile(r"\b(Token|Bearer|AWS4-HMAC-SHA256)\s+[A-Za-z0-9._~+/=,:-]{8,}")
_ASSIGNED = re.compile(
    r"(?i)\b(authorization|x-amz-security-token|aws_secret_access_key|signature|token)"
    r"(\s*[:=]\s*)\"?[^\s\",;]+"
)
_ENV_SECRETS = ("PROLIFIC_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")
TEXT_MAX = 200


def safe_text(text: object, limit: int = TEXT_MAX) -> str:
    """``text`` on one line, without credentials, at most ``limit`` characters.

    Examples
    --------
    >>> safe_text("bad\\nrequest; Authorization: Token 0123456789abcdef")
    'bad request; Authorization: *** ***'
    """
    out = _CONTROL.sub(" ", str(text))
    for name in _ENV_SECRETS:
        value = os.environ.get(name, "").strip()
        if len(value) >= 8:
            out = out.replace(value, "***")
    out = _SCHEMES.sub(lambda m: f"{m.group(1)} ***", out)
    out = _ASSIGNED.sub(lambda m: f"{m.group(1)}{m.group(2)}***", out)
    out = " ".join(out.split())
    return out if len(out) <= limit else out[: limit - 3] + "..."


class RecruitError(RuntimeError):
    """A recruiter action cannot be done or failed; the message says what and what to do."""


class NotSent(RecruitError):
    """The request never left this machine (no connection): sending it again is safe."""


class OutcomeUnknown(RecruitError):
    """The request was sent and no answer came (or a 5xx): it may have taken effect."""


class Refused(RecruitError):
    """The platform answered that it did not do it (4xx, or too many requests).

    Attributes
    ----------
    status : int or str
        The HTTP status or the platform's error code.
    reason : str
        The platform's reason, shortened and scrubbed (:func:`safe_text`).
    raw : str
        The answer's body, bounded, for matching ids in it; never shown.
    """

    def __init__(self, message: str, *, status: int | str = "", reason: str = "", raw: str = ""):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.raw = raw[:100_000]
