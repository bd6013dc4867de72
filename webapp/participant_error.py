"""The error shown to a participant as a page with a code, raised anywhere on their path.

Apart from :mod:`webapp.errors` (which renders it) so that modules the error handlers call,
such as :mod:`webapp.request_limits`, can raise it without an import circle.
"""

from __future__ import annotations


class ParticipantError(Exception):
    """An error to show a participant with a code such as ``E404-STUDY``."""

    def __init__(self, code: str, message: str, status: int = 400, link: str | None = None):
        super().__init__(message)
        self.code, self.message, self.status, self.link = code, message, status, link
