"""Participant views: thin wrappers over :mod:`webapp.services`."""

from __future__ import annotations

from datetime import timedelta

from flask import (
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import gettext, ngettext
from flask_wtf.csrf import CSRFError
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from webapp.definition_cache import study_definition
from webapp.errors import ParticipantError
from webapp.extensions import csrf, db
from webapp.models import Participant, ParticipantStatus, Platform, Study, utcnow
from webapp.participant.blueprint import bp
from webapp.participant.forms import ConsentForm
from webapp.participant.lookup import request_page_rows, request_study
from webapp.security import allow_mturk_framing
from webapp.services import allocation, assignments, authenticity, enrol_limit, flow
from webapp.services import entry as entry_service
from webapp.services.accounts import can_access, client_hash
from webapp.services.entry import Entry, EntryError
from webapp.sessions import console_researcher
from webapp.tasks import get_task_type
from webapp.tasks.base import PageContext, PageForm, TaskType

# A refused submission's typed values and messages wait here for the GET after the redirect
# (post/redirect/get, so Back never lands on a POST). Read once, then dropped.
_REFUSED = "framelab_refused"
_NOT_KEPT = authenticity.OWN_FIELDS
# The session is a signed cookie (about 4 KB in browsers): a refusal too large to keep there
# (a very long free-text answer) is shown in place as before, so nothing typed is lost.
_REFUSED_MAX_CHARS = 3000


def _secret() -> str:
    return current_app.config["SECRET_KEY"]


def _study_or_404(slug: str) -> Study:
    study = request_study(slug)
    if study is None:
        raise ParticipantError(
            "E404-STUDY",
            gettext("We could not find this study. Please check that you used the complete link."),
            404,
        )
    return study


def _entry(study: Study, params: dict[str, str]) -> Entry:
    try:
        entry = entry_service.parse_entry(params, slug=study.slug, secret=_secret())
    except EntryError as exc:
        raise ParticipantError(exc.code, exc.message, exc.status) from None
    if entry.platform is Platform.mturk:
        allow_mturk_framing()
    if entry.platform.value not in study_definition(study).recruitment.platforms:
        raise ParticipantError(
            "E400-PLATFORM",
            gettext("This study does not take participants through this link."),
            400,
        )
    try:
        entry_service.check_verified(study, entry)
    except EntryError as exc:
        raise ParticipantError(exc.code, exc.message, exc.status) from None
    return entry


def _go(participant: Participant, entry: Entry) -> Response:
    # An MTurk visit's URL is bound to the assignment it arrived with (the completion form
    # posts that one), so a worker back through a new HIT submits the new HIT.
    assignment = entry_service.record_visit(participant, entry, utcnow())
    return redirect(
        url_for(
            "participant.page",
            slug=participant.study.slug,
            token=flow.participant_token(participant.id, _secret(), assignment),
        )
    )


def _refuse_repeat(participant: Participant) -> ParticipantError:
    return ParticipantError(
        "E409-REPEAT",
        gettext(
            "You have already taken part in this study, so you cannot take part again. Thank "
            "you for your interest! If you think this is a mistake, please contact the "
            "researchers."
        ),
        409,
    )


def _resume_or_refuse(participant: Participant, entry: Entry) -> Response | str:
    if participant.status is ParticipantStatus.started:
        return _go(participant, entry)
    if participant.status in (ParticipantStatus.completed, ParticipantStatus.screened_out):
        return _finished_again(participant, entry)
    raise _refuse_repeat(participant)


def _finished_again(participant: Participant, entry: Entry) -> str:
    """Show a returning finished participant their code and platform link again.

    Their first redirect to the platform may have failed (closed tab, blocked pop-up, lost
    connection); without the code they could not be paid. Nothing is recorded. The MTurk
    form is offered only for the assignment the study was finished with, and never sent
    automatically.
    """
    study = participant.study
    end = flow.finish(participant, study, current_app.config["PROLIFIC_COMPLETE_URL"])
    if end.kind == "mturk" and (end.fields or {}).get("assignmentId") != (
        entry.external_session_id
    ):
        end = flow.Finish("code", end.code)
    if participant.end_reason == "study_full":
        return _study_full(study, participant.platform.value, end.code, end.url)
    template = {
        ParticipantStatus.completed: "participant/completed.html",
        ParticipantStatus.screened_out: "participant/screened_out.html",
    }[participant.status]
    return render_template(template, study=study, end=end, participant=participant, returning=True)


def _keep_refused(participant: Participant, form: PageForm) -> bool:
    """Keep a refused submission for the next GET of the page; False when it is too large."""
    kept = {
        "participant": participant.id,
        "page_seq": participant.page_seq,
        "data": {k: v for k, v in request.form.lists() if k not in _NOT_KEPT},
        "errors": {
            name: [str(m) for m in messages]
            for name, messages in form.errors.items()
            if isinstance(name, str) and name not in _NOT_KEPT
        },
    }
    if len(repr(kept)) > _REFUSED_MAX_CHARS:
        return False
    session[_REFUSED] = kept
    return True


def _refused_form(participant: Participant, task: TaskType, ctx: PageContext) -> PageForm | None:
    """The page's form with the refused submission's values and messages, read once."""
    kept = session.pop(_REFUSED, None)
    if not isinstance(kept, dict) or (kept.get("participant"), kept.get("page_seq")) != (
        participant.id,
        participant.page_seq,
    ):
        return None  # none waiting, or left over from another page: show the page fresh
    data = MultiDict([(k, v) for k, values in kept["data"].items() for v in values])
    form = task.build_form(ctx, data)
    for name, messages in kept["errors"].items():
        if name in form:
            form[name].errors = list(messages)
    return form


@bp.before_request
def _keep_rows_after_commit() -> None:
    """Keep this request's loaded rows usable after a commit instead of re-reading them.

    A participant request commits once and then only renders or redirects from the rows it
    has just written; expiring them on commit (SQLAlchemy's default) cost two more SELECTs per
    page. The session ends with the request, so nothing stale outlives it.
    """
    db.session().expire_on_commit = False


@bp.get("/s/<slug>")
def entry(slug: str) -> Response | str:
    """Show the study's consent page, or resume a participant who was here before."""
    study = _study_or_404(slug)
    entry = _entry(study, request.args.to_dict())
    if entry.preview:  # MTurk preview: describe the task, consume nothing
        return render_template("participant/mturk_preview.html", study=study)
    existing = entry_service.find_participant(study, entry)
    if existing is not None:
        return _resume_or_refuse(existing, entry)
    if entry_service.is_excluded(study, entry):
        raise ParticipantError(
            "E403-EXCLUDED",
            gettext(
                "Thank you for your interest. Because you took part in a related study, you "
                "cannot take part in this one. Please return the submission (no penalty)."
            ),
            403,
        )
    if allocation.study_is_full(study, utcnow()):
        return _study_full(study, entry.platform.value)
    form = ConsentForm(data=entry.params())
    consent = study_definition(study).tasks[0]
    page = get_task_type(consent.type).template_name
    return render_template(page, study=study, block=consent, form=form)


@bp.post("/s/<slug>/start")
@csrf.exempt  # checked here, so that a copy without a usable token is answered kindly
def start(slug: str) -> Response | str:
    """Enrol a consenting participant (or record nothing when they decline)."""
    study = _study_or_404(slug)
    try:
        csrf.protect()
    except CSRFError:
        return _start_without_token(study)
    form = ConsentForm()
    if not form.validate_on_submit():
        raise ParticipantError("E400-PARAMS", gettext("The consent form was incomplete."), 400)
    # The consent form's CSRF token has done its work: the participant's pages carry their own
    # (the page token), so the session cookie is left empty and browsers drop it.
    session.pop(current_app.config["WTF_CSRF_FIELD_NAME"], None)
    entry = _entry(study, form.entry_params())
    if entry.preview:
        raise ParticipantError("E400-PARAMS", gettext("A preview cannot start the study."), 400)
    if form.decline.data:
        return render_template("participant/declined.html", study=study, entry=entry)
    existing = entry_service.find_participant(study, entry)
    if existing is not None:
        return _resume_or_refuse(existing, entry)
    if entry_service.is_excluded(study, entry):
        raise ParticipantError("E403-EXCLUDED", gettext("You cannot take part in this study."), 403)
    if allocation.study_is_full(study, utcnow()):
        return _study_full(study, entry.platform.value)
    # A preview is the study's own researchers' (as for the gate); anyone else logged in to
    # the console who takes part is an ordinary participant, counted and limited like one.
    researcher = console_researcher()
    is_preview = researcher is not None and can_access(researcher, study)
    if not (is_preview or entry.test):  # only real arrivals use up a network's allowance
        _admit(study)
    participant = entry_service.enroll(
        study,
        entry,
        rng=entry_service.assignment_rng(current_app.config["ASSIGNMENT_SEED"], study, entry),
        now=utcnow(),
        active_window=timedelta(minutes=current_app.config["ACTIVE_WINDOW_MINUTES"]),
        is_preview=is_preview,
        is_test=entry.test,
    )
    return _go(participant, entry)


def _start_without_token(study: Study) -> Response | str:
    """Answer a consent POST whose CSRF token cannot be checked, without "form expired".

    The commonest cause is a double click: the first copy's reply empties the session cookie
    (see :func:`start`), and a browser that received it sends the second copy with the emptied
    cookie. A participant the entry parameters already name is resumed exactly as their study
    link would resume them (so this shows nothing the link does not); anyone else goes back to
    the consent page with a fresh form. Nothing is recorded without a valid token.
    """
    form = ConsentForm(meta={"csrf": False})
    entry = _entry(study, form.entry_params())
    existing = entry_service.find_participant(study, entry)
    if existing is not None:
        return _resume_or_refuse(existing, entry)
    flash(gettext("Please confirm once more that you agree to take part."), "warning")
    return redirect(url_for("participant.entry", slug=study.slug, **entry.params()))


def _admit(study: Study) -> None:
    """Count this enrolment against the client's limit, or refuse it with when to come back."""
    config = current_app.config
    limit = enrol_limit.EnrolLimit(
        config["ENROLMENTS_PER_CLIENT"], timedelta(minutes=config["ENROLMENT_WINDOW_MINUTES"])
    )
    client = client_hash(request.remote_addr, _secret())
    admission = enrol_limit.admit(study, client, limit, utcnow())
    if not admission.allowed:
        minutes = -(-admission.retry_after_s // 60)
        raise ParticipantError(
            "E429-BUSY",
            ngettext(
                "More people have just started this study from your network than we accept "
                "from one place. Please open the study link again in %(num)d minute. If you "
                "are taking part in a lab or classroom, please tell the researchers.",
                "More people have just started this study from your network than we accept "
                "from one place. Please open the study link again in %(num)d minutes. If you "
                "are taking part in a lab or classroom, please tell the researchers.",
                minutes,
            ),
            429,
        )


@bp.route("/s/<slug>/p/<token>", methods=["GET", "POST"])
@csrf.exempt  # the page token is this form's anti-forgery token (webapp.tasks.base.PageForm)
def page(slug: str, token: str) -> Response | str | tuple[str, int]:
    """Show the participant's current page, or save its answers and redirect (PRG)."""
    study = _study_or_404(slug)
    rows = request_page_rows(slug, token)
    if rows is None:
        raise ParticipantError(
            "E404-SESSION",
            gettext("We could not find your session. Please use the study link again."),
            404,
        )
    participant = rows.participant
    if participant.platform is Platform.mturk:
        allow_mturk_framing()
    ctx = flow.current_page(participant, study, utcnow())
    if ctx is None:
        return _finished(participant, study, token)
    task = flow.task_of(ctx)
    here = url_for("participant.page", slug=slug, token=token)
    if request.method == "POST":
        form = task.build_form(ctx, request.form)
        state = flow.check_token(participant, form.page.data, _secret())
        if state is flow.TokenState.tampered:
            raise ParticipantError(
                "E400-TAMPER",
                gettext(
                    "This form was changed before it was sent, so we could not accept it. "
                    "Your earlier answers are safe."
                ),
                400,
                link=here,
            )
        if state is flow.TokenState.replay:
            flash(gettext("That page was already answered; here is where you are now."), "info")
            return redirect(here)
        if form.validate():
            result = flow.submit(
                ctx,
                form,
                token=form.page.data,
                secret=_secret(),
                rt_ms=flow.parse_rt_ms(form.rt_ms.data),
                signals=_page_signals(study, form),
            )
            if (
                result.accepted
                and participant.platform is Platform.mturk
                and participant.status is ParticipantStatus.completed
            ):
                assignments.settle_assignment(
                    participant, flow.assignment_from_token(token, _secret()), utcnow()
                )
            if not result.accepted:
                flash(gettext("That page was already answered; here is where you are now."), "info")
            elif result.message:
                flash(result.message, "warning")
            return redirect(here)
        if _keep_refused(participant, form):
            return redirect(here, code=303)
        status = 422
        payload = flow.page_payload(ctx)  # the refused page again, shown in place
    else:
        if flow.enter(ctx):  # the task moved the participant on (e.g. the study is full)
            return redirect(here)
        payload = flow.page_payload(ctx)  # what it reads, read in the visit's transaction
        if payload.get("waiting"):
            # Not one of the study's pages: no visit is recorded, so the first item's time
            # on page starts when the item is shown, not while waiting for it.
            return render_template("participant/waiting.html", study=study, action=here, **payload)
        form = _refused_form(participant, task, ctx) or task.build_form(ctx, None)
        status = 200
    form.page.data = flow.page_token(participant, _secret())
    form.rt_ms.data = ""
    form.canary = authenticity.page_canary(study_definition(study))
    html = render_template(task.template_name, study=study, form=form, action=here, **payload)
    if request.method == "GET":
        flow.record_visit(ctx, authenticity.page_words(html))
    return html, status


def _page_signals(study: Study, form: PageForm) -> authenticity.PageSignals:
    """The submitted page's authenticity signals (its script's field, the honeypot, the UA)."""
    own = authenticity.OWN_FIELDS
    return authenticity.page_signals(
        request.form.get(authenticity.SIGNALS_FIELD),
        honeypot=request.form.get(authenticity.HONEYPOT_FIELD),
        answers=[v for k, vs in request.form.lists() if k not in own for v in vs],
        form=form,
        user_agent=request.headers.get("User-Agent", ""),
        canary=authenticity.page_canary(study_definition(study)),
        secret=_secret(),
    )


def _study_full(
    study: Study, platform: str, code: str | None = None, url: str | None = None
) -> str:
    """The polite page for people who arrive after every item has its labels."""
    if code is None:
        code = study_definition(study).recruitment.completion_codes.study_full
        if platform == "prolific" and code:
            url = f"{current_app.config['PROLIFIC_COMPLETE_URL']}?cc={code}"
    return render_template(
        "participant/study_full.html", study=study, platform=platform, code=code, url=url
    )


def _finished(participant: Participant, study: Study, token: str) -> Response | str:
    end = flow.finish(
        participant,
        study,
        current_app.config["PROLIFIC_COMPLETE_URL"],
        flow.assignment_from_token(token, _secret()),
    )
    if end.kind == "prolific":
        return redirect(end.url or "", code=303)
    if end.kind == "repeat":
        raise _refuse_repeat(participant)
    if participant.end_reason == "study_full":
        return _study_full(study, participant.platform.value, end.code, end.url)
    template = {
        ParticipantStatus.completed: "participant/completed.html",
        ParticipantStatus.screened_out: "participant/screened_out.html",
    }[participant.status]
    return render_template(template, study=study, end=end, participant=participant)
