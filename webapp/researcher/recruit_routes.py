"""Console views of the recruiter (webapp.recruit): buttons on the study page, each through a
confirmation page that states what the action costs before anything is sent.

Approving and paying bonuses carry exactly what their confirmation page showed: the rows and
amounts, signed with the server's secret in a hidden field. The confirmed POST does those rows
only; if any changed meanwhile nothing is done and the new confirmation is shown, and rows that
came after it (people who finished since) are shown as a new confirmation once it is done.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, flash, g, redirect, render_template, url_for
from flask_wtf import FlaskForm
from itsdangerous import BadSignature, URLSafeSerializer
from wtforms import HiddenField, SelectField, StringField, TextAreaField
from wtforms.validators import Length

from webapp.definition_cache import study_definition
from webapp.models import Study
from webapp.recruit.prolific import REJECTION_CATEGORIES
from webapp.recruit.results import Confirmation, ConfirmationChanged, Report
from webapp.researcher.blueprint import bp
from webapp.researcher.routes import login_required, public_base_url, study_or_404

# Button labels. Everything that writes to the platform goes through a confirmation page;
# status only reads and reconciles, and settle only reads the platform to resolve what an
# interrupted run left open (it pays nothing).
BUTTONS = {
    "create": "Create the listing",
    "publish": "Publish",
    "status": "Sync statuses",
    "approve": "Approve completed",
    "bonus": "Pay bonuses",
    "settle": "Settle open payments",
    "pause": "Pause",
    "close": "Close",
    "reject": "Reject",
}


_NO_CONFIRMATION = {"status", "settle"}
# Actions whose confirmation names the exact rows (and amounts) to do, and nothing else.
_EXACT = {"approve", "bonus"}
_SALT = "framelab.recruit.confirmation"
# A flash message is one line of the page: the platform's reasons are already short, and
# nothing longer reaches the page.
FLASH_MAX = 400


class RecruitForm(FlaskForm):
    """One recruiter action; ``confirm`` is set by the confirmation page."""

    confirm = HiddenField()
    confirmation = HiddenField()  # approve, bonus: the signed rows the page showed
    participants = StringField("Participants (p_… codes, space-separated)", [Length(max=2000)])
    reason = TextAreaField(
        "Message to the participant (Prolific: 100 characters or more)", [Length(max=2000)]
    )
    category = SelectField("Category", choices=list(REJECTION_CATEGORIES), default="OTHER")


def panel(s: Study) -> dict[str, Any] | None:
    """What the study page's recruiter section shows (no outbound call), or ``None``."""
    from webapp.recruit import get_recruiter
    from webapp.recruit.base import RecruitError

    if study_definition(s).recruiter is None:
        return None
    try:
        r = get_recruiter(s, actor=g.researcher)
    except RecruitError as exc:  # e.g. boto3 missing for MTurk
        return {"error": str(exc)}
    row = r.row()
    return {
        "label": r.label,
        "row": row,
        "plan": r.plan().lines,
        "buttons": BUTTONS,
        "form": RecruitForm(),
    }


@bp.context_processor
def _recruit_panel() -> dict[str, Any]:
    return {"recruit_panel": panel}


def _signer() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.secret_key, salt=_SALT)


def _signed(s: Study, confirmation: Confirmation) -> str:
    """The confirmation, signed for this study (it cannot be edited or used for another)."""
    return str(
        _signer().dumps({"study": s.slug, "action": confirmation.action, "rows": confirmation.rows})
    )


def _confirmed(s: Study, action: str, token: str) -> Confirmation | None:
    """The confirmation a page carried, if its signature holds for this study and action."""
    try:
        data = _signer().loads(token or "")
    except BadSignature:
        return None
    if not isinstance(data, dict) or data.get("study") != s.slug or data.get("action") != action:
        return None
    rows = data.get("rows")
    if not isinstance(rows, list) or not all(
        isinstance(r, list) and len(r) == 2 and isinstance(r[1], int) for r in rows
    ):
        return None
    return Confirmation.of(action, {str(k): v for k, v in rows})


def _confirm_page(
    s: Study, action: str, report: Report, form: RecruitForm, notice: list[str] | None = None
) -> str:
    return render_template(
        "researcher/recruit_confirm.html",
        s=s,
        action=action,
        label=BUTTONS[action],
        lines=report.lines,
        notice=notice or [],
        signed=_signed(s, report.confirmation) if report.confirmation else "",
        form=form,
        study=None,
    )


def recruit_action(slug: str, action: str) -> Any:
    """Show what a recruiter action costs; do it once confirmed."""
    from webapp.recruit import get_recruiter
    from webapp.recruit.base import RecruitError, safe_text

    s = study_or_404(slug)
    back = url_for("researcher.study", slug=slug) + "#recruit"
    form = RecruitForm()
    if action not in BUTTONS or not form.validate_on_submit():
        flash("That form had expired or was not valid; please try again.", "warning:recruit")
        return redirect(back)
    try:
        r = get_recruiter(s, actor=g.researcher)
        participants = (form.participants.data or "").split()
        previews = {
            "create": r.plan,
            "publish": r.plan,
            "approve": lambda: r.approval_plan()[0],
            "bonus": r.bonus_plan,
        }
        if action not in _NO_CONFIRMATION and form.confirm.data != "yes":
            preview = previews[action]() if action in previews else Report(action)
            if action == "reject":
                preview.lines = [
                    f"reject {len(participants)} submission(s): {' '.join(participants)}"
                ]
            elif action in ("pause", "close"):
                preview.lines = [
                    f"{action} the {r.label} listing; costs nothing now",
                    *r.plan().lines,
                ]
            return _confirm_page(s, action, preview, form)
        if action in _EXACT:
            confirmed = _confirmed(s, action, form.confirmation.data or "")
            if confirmed is None:
                flash("That confirmation was not valid; please look again.", "warning:recruit")
                return redirect(back)
            try:
                report = getattr(r, action)(confirmed=confirmed)
            except ConfirmationChanged as exc:
                return _confirm_page(s, action, exc.preview, form, [str(exc)])
            if report.counts.get("more"):  # done; what came after it needs its own yes
                return _confirm_page(s, action, previews[action](), form, report.lines)
        elif action == "create":
            report = r.create(public_base_url())
        elif action == "status":
            report = r.status()[0]
        elif action == "settle":
            report = r.settle()
        elif action == "reject":
            report = r.reject(participants, form.reason.data or "", form.category.data)
        else:
            report = getattr(r, action)()
    except RecruitError as exc:
        flash(safe_text(exc, FLASH_MAX), "warning:recruit")
        return redirect(back)
    for line in report.lines:
        flash(safe_text(line, FLASH_MAX), "info:recruit")
    return redirect(back)


# One endpoint per action, ``researcher.recruit_<action>`` (no free <action> in the URL: the
# console's route tests then reach each one, anonymous and as another researcher).
def _view(name: str) -> Any:
    @login_required
    def view(slug: str) -> Any:
        return recruit_action(slug, name)

    view.__name__ = view.__qualname__ = f"recruit_{name}"
    view.__doc__ = f"{BUTTONS[name]}: show the cost, then do it once confirmed."
    return view


for _name in BUTTONS:
    bp.add_url_rule(
        f"/studies/<slug>/recruit/{_name}", f"recruit_{_name}", _view(_name), methods=["POST"]
    )
