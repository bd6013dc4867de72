"""Forms of the researcher console (every POST carries a CSRF token through Flask-WTF).

Select choices are plain strings: WTForms 3.3 deprecates (value, label) tuples.
"""

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired, MultipleFileField
from wtforms import BooleanField, HiddenField, PasswordField, SelectField, StringField
from wtforms.validators import DataRequired, InputRequired, Length, Optional


class LoginForm(FlaskForm):
    """Username and password."""

    username = StringField("Username", validators=[InputRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[InputRequired(), Length(max=200)])


# What the file picker offers for a study's files: pairs YAML, item CSV and JSONL sets, and the
# product images a pairs file may name (PNG, JPEG, WebP; judged by content when loaded).
STIMULUS_FILES = ".yaml,.yml,.csv,.jsonl,.png,.jpg,.jpeg,.webp"


class UploadForm(FlaskForm):
    """Upload a study bundle: a zip, or the study YAML with the stimulus files it names."""

    file = FileField("Study YAML or zip", validators=[FileRequired()])
    stimuli = MultipleFileField(
        "Stimulus files it names (not with a zip)", render_kw={"accept": STIMULUS_FILES}
    )
    force = BooleanField("Replace task blocks even if participants exist")
    slug = StringField(
        "Slug (optional: instead of the file's own)", validators=[Optional(), Length(max=80)]
    )


class LoadForm(FlaskForm):
    """Load a study YAML file from the studies folder, under its own slug or another."""

    name = SelectField("Study file", choices=[], validate_choice=True)
    slug = StringField(
        "Slug (optional: instead of the file's own)", validators=[Optional(), Length(max=80)]
    )


class DuplicateForm(FlaskForm):
    """Copy a study's current version into a new draft under a new slug."""

    slug = StringField("Slug of the copy", validators=[InputRequired(), Length(max=80)])


class StateForm(FlaskForm):
    """Move a study to another lifecycle state."""

    state = HiddenField(validators=[InputRequired()])
    # Closing is refused without it: the close button leads to a page naming the consequences,
    # whose button sends it.
    confirm = HiddenField()


class PreviewForm(FlaskForm):
    """Start a preview (a POST: it writes an audit row), optionally at one block."""

    block = HiddenField()


class ParticipantActionForm(FlaskForm):
    """Mark a participant returned/timed out, or exclude/re-include them."""

    # A pseudonym or a recruiter ID (Prolific: 24 characters; MTurk worker IDs are shorter,
    # link IDs up to the identity column's 128).
    participant = HiddenField(validators=[InputRequired(), Length(max=128)])
    back = HiddenField()
    action = SelectField(
        "Action",
        choices=["returned", "timed_out", "exclude", "include"],
    )
    reason = StringField("Reason", validators=[Length(max=500)])


class ClearTestDataForm(FlaskForm):
    """Delete a study's test participants (bots, previews); refused without the confirmation."""

    confirm = BooleanField(
        "I understand: every test participant of this study and all their answers are deleted",
        validators=[InputRequired()],
    )


class BonusForm(FlaskForm):
    """Issue bonuses and download the payment file."""

    platform = SelectField("Platform", choices=["prolific", "mturk"])
    force = BooleanField(
        "Write bonuses already sent by file again (never those the API pays or paid)"
    )


class FileNotUsedForm(FlaskForm):
    """Say a payment file was never uploaded: its bonuses become payable again (made with
    ``prefix="unused"``: the payments section has another platform field)."""

    platform = SelectField("The file was for", choices=["prolific", "mturk"])
    codes = StringField(
        "Participants whose file was not used (p_… codes, space-separated, or all)",
        [DataRequired(), Length(max=4000)],
    )


class ReconcileForm(FlaskForm):
    """Import a recruiter's export."""

    platform = SelectField(
        "Export from (prolific: submissions; mturk: assignments)", choices=["prolific", "mturk"]
    )
    file = FileField("CSV file", validators=[FileRequired()])
