"""The study's ``analysis:`` block: the pre-registered primary test, planned N and interim looks.

Its schema is :mod:`framelab_schema.analysis_block`, which the research package reads it with
too; this module validates it against the study's product-choice formats when a study is
loaded and locates every mistake like every other key (``demo.yaml: analysis.looks.at[2]: the
last look must be at 1 (the planned N), got 0.9 (line 40)``). The typed block is the
definition's ``analysis`` and shown on the console's study page. ``docs/analysis.md`` ("Plan,
pre-register, stop") describes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from framelab_schema.analysis_block import AnalysisBlock, AnalysisBlockError, parse_analysis_block
from webapp.definition import TaskBlock
from webapp.services.design import study_formats
from webapp.validation import StudyDefinitionErrors, Where


def validate_analysis(raw: Any, where: Where, blocks: Sequence[TaskBlock]) -> AnalysisBlock:
    """Validate a study's ``analysis:`` block; return it normalised.

    Parameters
    ----------
    raw : Any
        The parsed block.
    where : Where
        Its place (``analysis``).
    blocks : sequence of TaskBlock
        The study's task blocks validated so far.

    Returns
    -------
    AnalysisBlock
        Its levels are two of the study's product-choice formats.

    Raises
    ------
    StudyDefinitionError
        Every mistake of the block, located.
    """
    try:
        block = parse_analysis_block(raw, formats=study_formats(blocks), path=where.path)
    except AnalysisBlockError as exc:
        errors = [replace(where, path=issue.path).error(issue.reason) for issue in exc.issues]
        raise errors[0] if len(errors) == 1 else StudyDefinitionErrors(errors) from None
    return block
