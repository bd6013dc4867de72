"""Text-only task types: consent, instructions and debrief.

Consent is shown on the study's entry page (before any participant record exists), so link
scanners and previews create nothing; instructions and debrief are ordinary pages whose only
input is a continue/finish button.
"""

from __future__ import annotations

from typing import Any

from webapp.definition import TaskBlock
from webapp.i18n import N_, default_text
from webapp.tasks.base import TaskType
from webapp.validation import Where, check_keys, get_line, get_str


class _TextTask(TaskType):
    """A page with a heading, paragraphs and one button."""

    default_heading: str = ""
    default_button: str = N_("Continue")

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"heading", "text", "button"}, where)
        return {
            "heading": get_line(body, "heading", where, default=default_text(self.default_heading)),
            "text": get_str(body, "text", where),
            "button": get_line(body, "button", where, default=default_text(self.default_button)),
        }


class ConsentTask(_TextTask):
    """Information sheet and consent; agreeing starts the session."""

    name = "consent"
    position = "first"
    template = "consent.html"
    default_heading = N_("Consent to take part")
    default_button = N_("I agree, start the study")

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"heading", "text", "button", "decline_button"}, where)
        out = super().validate({k: v for k, v in body.items() if k != "decline_button"}, where)
        out["decline_button"] = get_line(
            body, "decline_button", where, default=default_text("I do not agree")
        )
        return out

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        return {"agree": "y"}


class InstructionsTask(_TextTask):
    """Instructions before the tasks."""

    name = "instructions"
    template = "text.html"
    default_heading = N_("Instructions")


class DebriefTask(_TextTask):
    """What the study was about; its button completes the session."""

    name = "debrief"
    position = "last"
    template = "text.html"
    default_heading = N_("Thank you")
    default_button = N_("Finish and submit")
