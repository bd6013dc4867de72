"""Forms of the participant blueprint (task pages bring their own forms)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import HiddenField, SubmitField


class ConsentForm(FlaskForm):
    """Agree or decline; the entry parameters ride along as hidden fields."""

    PROLIFIC_PID = HiddenField()
    STUDY_ID = HiddenField()
    SESSION_ID = HiddenField()
    workerId = HiddenField()  # noqa: N815  (MTurk's parameter names)
    hitId = HiddenField()  # noqa: N815
    assignmentId = HiddenField()  # noqa: N815
    turkSubmitTo = HiddenField()  # noqa: N815
    participant = HiddenField()
    test_key = HiddenField()  # a bot's test entry key (webapp.services.testmark)
    agree = SubmitField()
    decline = SubmitField()

    def entry_params(self) -> dict[str, str]:
        """The non-empty entry parameters (as a query string would carry them)."""
        names = (
            "PROLIFIC_PID",
            "STUDY_ID",
            "SESSION_ID",
            "workerId",
            "hitId",
            "assignmentId",
            "turkSubmitTo",
            "participant",
            "test_key",
        )
        return {n: self[n].data for n in names if self[n].data}
