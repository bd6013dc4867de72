"""Checks on Prolific's answers that the recruiter and its bonus payments both apply."""

from __future__ import annotations

import re
from typing import Any

from webapp.recruit.errors import RecruitError, safe_text

# Prolific's ids go into URL paths: anything else in an answer is refused at the boundary.
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def prolific_id(value: Any, what: str) -> str:
    """``value`` as a Prolific id, or a clear error naming ``what`` answered without one."""
    if isinstance(value, str) and _ID.match(value):
        return value
    raise RecruitError(
        f"Prolific's answer to {what} has no usable id (got {safe_text(repr(value), 60)}); "
        "nothing more was done"
    )


def answer_dict(data: Any, what: str) -> dict[str, Any]:
    """``data`` if it is a JSON object, else a clear error naming the call."""
    if isinstance(data, dict):
        return data
    raise RecruitError(
        f"Prolific's answer to {what} is not an object (got {safe_text(repr(data), 60)}); "
        "nothing more was done"
    )
