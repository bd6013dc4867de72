"""Recruiters: run a study on Prolific or MTurk from FrameLab (create, publish, watch, approve,
pay). The interface is :class:`webapp.recruit.base.Recruiter`; docs/recruit.md walks through a
real study. Nothing is imported here at package import (the CLI lists commands cheaply)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webapp.recruit.base import Recruiter

# What ``framelab recruit SLUG ACTION`` and the console can do (here, so the CLI lists them
# without importing the recruiters).
ACTIONS = (
    "plan",
    "create",
    "publish",
    "status",
    "approve",
    "reject",
    "bonus",
    "settle",
    "pause",
    "close",
)


def get_recruiter(study: Any, *, actor: Any = "cli", **options: Any) -> Recruiter:
    """The recruiter the study's YAML names, ready to use.

    Parameters
    ----------
    study : Study
    actor : Researcher or str
        For the audit log.
    **options
        Passed to the platform's recruiter (``production=True`` for live MTurk, ``sleep``
        and ``client`` for tests).

    Raises
    ------
    webapp.recruit.base.RecruitError
        The study has no ``recruiter:`` block, or the platform's client is missing.
    """
    from webapp.definition_cache import study_definition
    from webapp.recruit.base import RecruitError

    settings = study_definition(study).recruiter
    if settings is None:
        raise RecruitError(
            f"study {study.slug!r} has no recruiter: block in its YAML (see docs/recruit.md)"
        )
    if settings.platform == "prolific":
        from webapp.recruit.prolific import ProlificRecruiter

        if options.pop("production", False):
            raise RecruitError("--production is for MTurk; Prolific has no sandbox")
        return ProlificRecruiter(study, settings, actor=actor, **options)
    from webapp.recruit.mturk import MTurkRecruiter

    return MTurkRecruiter(study, settings, actor=actor, **options)
