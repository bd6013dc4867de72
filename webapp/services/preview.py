"""Researcher previews that start at any block of a study (the preview's page list)."""

from __future__ import annotations

import random
from datetime import datetime

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import Participant, Platform, Study
from webapp.services.testmark import reserved_id


def preview_at(study: Study, block_index: int, token: str, now: datetime) -> Participant:
    """Create a preview participant placed at the start of one block and commit.

    A preview is a test participant with an ID in the reserved test form
    (:mod:`webapp.services.testmark`): it never counts (balance, slots, exports, bonuses), so
    skipping the blocks before (consent, the quiz) changes nothing for real participants.
    The sequence is A and the seed fixed by the token, so the same page list link shows the
    same trials.

    Raises
    ------
    ValueError
        ``block_index`` is not a block of the study.
    """
    from webapp.services.entry import add_participant

    blocks = study_definition(study).tasks
    if not 0 <= block_index < len(blocks):
        raise ValueError(f"the study has no block {block_index}")
    platforms = study_definition(study).recruitment.platforms
    # A plain link when the study takes one; else Prolific, so the preview never needs an
    # MTurk assignment to finish.
    platform = Platform.link if "link" in platforms else Platform.prolific
    external = reserved_id(platform.value, f"preview:{token}")
    participant = add_participant(
        study,
        platform=platform,
        external_id=external,
        now=now,
        seed=random.Random(token).randrange(2**31),
        sequence="A",
        block_index=block_index,
        is_preview=True,
    )
    db.session.commit()
    return participant
