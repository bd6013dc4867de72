"""Question pages: comprehension quiz, attention check and demographics.

All three show a list of questions on one page as a plain form. The quiz and the attention
check have correct answers; the quiz allows a number of attempts and screens out on failure.
"""

from __future__ import annotations

import re
from typing import Any

from flask_babel import lazy_gettext, ngettext
from wtforms import IntegerField
from wtforms.validators import InputRequired, Length, NumberRange, Optional, StopValidation

from webapp.definition import TaskBlock
from webapp.export_common import column_name
from webapp.i18n import default_text, format_number, group_symbol
from webapp.models import QuizAttempt, TaskResponse
from webapp.tasks.base import (
    ENCODED_CHAR_BYTES,
    NEXT,
    PAGE_FORM_BYTES,
    PAGE_FORM_FIELDS,
    PAGE_FORM_OWN_BYTES,
    PAGE_FORM_OWN_FIELDS,
    Outcome,
    PageContext,
    PageForm,
    SaveResult,
    TaskType,
    insert_row,
)
from webapp.tasks.widgets import NUMBER_MAX_CHARS, RadioField, StringField, TextInput
from webapp.validation import (
    LINE_MAX,
    Where,
    check_keys,
    check_text,
    get_id,
    get_int,
    get_line,
    get_list,
    get_mapping,
    get_str,
)

REQUIRED = lazy_gettext("Please choose an answer.")
_DECIMAL_RE = re.compile(r"^-?\d+[.,]\d+$", re.ASCII)
# "1.500" or "-12.000.000": thousands grouped with points, as German and Spanish write them.
_POINT_GROUPS_RE = re.compile(r"[+-]?\d{1,3}(\.\d{3})+", re.ASCII)
# Free-text answers: the default and the largest ``max_length`` a study may set (characters).
TEXT_MAX_DEFAULT = 500
TEXT_MAX_LIMIT = 5000
DIGITS_ONLY = lazy_gettext("Please type the number with the digits 0 to 9.")
WHOLE_NUMBER = lazy_gettext("Please enter a whole number without a decimal point, for example 25.")


# The rows the question pages write with their answer (PageContext.write).
_INSERT_ATTEMPT = insert_row(QuizAttempt.__table__, "q_")
_INSERT_RESPONSE = insert_row(TaskResponse.__table__, "r_")


def _write_response(
    ctx: PageContext, task_type: str, payload: dict[str, Any], rt_ms: int | None
) -> None:
    """Write the page's answers as a ``task_response`` row with the answer."""
    ctx.write(
        _INSERT_RESPONSE,
        {
            "r_participant_id": ctx.participant.id,
            "r_block_id": ctx.block.id,
            "r_task_type": task_type,
            "r_step": ctx.step,
            "r_payload": payload,
            "r_rt_ms": rt_ms,
            "r_created_at": ctx.now,
        },
    )


class AsciiIntegerField(IntegerField):
    """A whole number typed with the ASCII digits 0-9 only.

    ``int()`` also reads other scripts' digits (``"٣"``, ``"３"``) as numbers, so a participant
    typing them would be stored as a different-looking answer; they are refused with a message
    next to the field instead.

    The input is ``type="text"`` (with a numeric keyboard): the forms are ``novalidate``, and a
    browser sends an empty value for what a ``type="number"`` input cannot read (``25e``,
    ``twenty``), so an optional answer would be dropped without a word.

    In a study whose language groups thousands with a point (German, Spanish), ``1.500`` is
    read as 1500, as its participants write it; in English ``1,500`` stays refused (it could
    be a mistyped decimal), as before.
    """

    widget = TextInput()

    def __init__(self, *args: Any, language: str = "en", **kwargs: Any) -> None:
        kwargs.setdefault("render_kw", {"maxlength": NUMBER_MAX_CHARS})
        super().__init__(*args, **kwargs)
        self.language = language

    def process_formdata(self, valuelist: list[Any]) -> None:
        if valuelist and valuelist[0] and not valuelist[0].isascii():
            self.data = None
            raise ValueError(str(DIGITS_ONLY))
        text = valuelist[0].strip() if valuelist and valuelist[0] else ""
        if group_symbol(self.language) == "." and _POINT_GROUPS_RE.fullmatch(text):
            text = text.replace(".", "")
            valuelist = [text]
        if _DECIMAL_RE.match(text):  # "25.5" or "25,5": a clear word, not "not a valid integer"
            self.data = None
            raise ValueError(str(WHOLE_NUMBER))
        if text and not re.fullmatch(r"[+-]?\d+", text, re.ASCII):
            self.data = None
            raise ValueError(str(DIGITS_ONLY))
        try:
            super().process_formdata(valuelist)
        except ValueError:  # digits too many for int(): the range message says what to do
            self.process_errors.clear()
            self.data = None

    def pre_validate(self, form: Any) -> None:
        if {str(DIGITS_ONLY), str(WHOLE_NUMBER)} & set(map(str, self.process_errors)):
            raise StopValidation()  # one clear message, not also "enter a number from …"


def _options(raw: Any, where: Where) -> list[str]:
    """Option texts: shown as labels and sent back as the answer, so one line each."""
    values = get_list(raw, where, min_len=2)
    return [
        check_text(str(o), where.at(i), max_len=LINE_MAX, one_line=True)
        for i, o in enumerate(values)
    ]


def _choice_question(raw: Any, where: Where, *, with_correct: bool) -> dict[str, Any]:
    q = get_mapping(raw, where)
    check_keys(q, {"id", "text", "options", "correct"}, where)
    options = _options(q.get("options"), where.at("options"))
    if len(set(options)) != len(options):
        raise where.at("options").error("options must be distinct")
    out = {"id": get_id(q, "id", where), "text": get_str(q, "text", where), "options": options}
    if with_correct:
        correct = get_line(q, "correct", where)
        if correct not in options:
            raise where.at("correct").error(f"{correct!r} is not one of the options {options}")
        out["correct"] = correct
    return out


def _questions(body: dict[str, Any], where: Where, *, with_correct: bool) -> list[dict[str, Any]]:
    qw = where.at("questions")
    questions = [
        _choice_question(q, qw.at(i), with_correct=with_correct)
        for i, q in enumerate(get_list(body.get("questions"), qw, min_len=1))
    ]
    ids = [q["id"] for q in questions]
    if len(set(ids)) != len(ids):
        raise qw.error(f"question ids must be unique, got {ids}")
    _check_fits_one_page(questions, where)
    return questions


def _answer_bytes(q: dict[str, Any]) -> int:
    """The most bytes a question's answer can take in an urlencoded page form."""
    if q.get("kind") == "text":
        chars = int(q["max_length"])
    elif q.get("kind") == "number":
        chars = NUMBER_MAX_CHARS
    else:  # a choice sends its option's text
        chars = max(len(o) for o in q["options"])
    return len(f"q_{q['id']}=&") + ENCODED_CHAR_BYTES * chars


def _check_fits_one_page(questions: list[dict[str, Any]], where: Where) -> None:
    """Refuse questions whose answers together could exceed what one page may send."""
    room = PAGE_FORM_BYTES - PAGE_FORM_OWN_BYTES
    need = sum(_answer_bytes(q) for q in questions)
    if need > room or len(questions) > PAGE_FORM_FIELDS - PAGE_FORM_OWN_FIELDS:
        raise where.at("questions").error(
            f"these {len(questions)} questions are shown on one page, whose answers could "
            f"need {need // 1024} KiB, more than a page may send ({room // 1024} KiB, at most "
            f"{PAGE_FORM_FIELDS - PAGE_FORM_OWN_FIELDS} questions; a typed character takes up "
            f"to {ENCODED_CHAR_BYTES} bytes): split them over two blocks or lower max_length"
        )


def _choice_form(questions: list[dict[str, Any]], formdata: Any) -> PageForm:
    """Build a form with one radio group per question (field name = question id)."""

    class _Form(PageForm):
        pass

    for q in questions:
        field = RadioField(
            q["text"], choices=list(q["options"]), validators=[InputRequired(REQUIRED)]
        )
        setattr(_Form, f"q_{q['id']}", field)
    return _Form(formdata=formdata)


def _answers(form: PageForm, questions: list[dict[str, Any]]) -> dict[str, str]:
    return {q["id"]: form[f"q_{q['id']}"].data for q in questions}


def _n_correct(answers: dict[str, str], questions: list[dict[str, Any]]) -> int:
    return sum(answers[q["id"]] == q["correct"] for q in questions)


def _bot_answers(block: TaskBlock, wrong: bool = False) -> dict[str, str]:
    """The right answers (a wrong option for each when ``wrong``), as a bot sends them."""
    return {
        f"q_{q['id']}": next(o for o in q["options"] if (o != q["correct"]) == wrong)
        for q in block.params["questions"]
    }


class QuizTask(TaskType):
    """Comprehension quiz: all answers must be correct within ``attempts`` tries."""

    name = "quiz"
    template = "questions.html"

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"heading", "text", "questions", "attempts", "on_fail"}, where)
        on_fail = get_line(body, "on_fail", where, default="screen_out")
        if on_fail not in {"screen_out", "continue"}:
            raise where.at("on_fail").error("must be 'screen_out' or 'continue'")
        return {
            "heading": get_line(
                body, "heading", where, default=default_text("Check your understanding")
            ),
            "text": get_str(body, "text", where, default=""),
            "questions": _questions(body, where, with_correct=True),
            "attempts": get_int(body, "attempts", where, default=2, minimum=1),
            "on_fail": on_fail,
        }

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        return _choice_form(ctx.block.params["questions"], formdata)

    def context(self, ctx: PageContext) -> dict[str, Any]:
        used = ctx.participant.quiz_attempts
        return {
            "block": ctx.block,
            "attempt": used + 1,
            "attempts_left": ctx.block.params["attempts"] - used,
        }

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        questions = ctx.block.params["questions"]
        answers = _answers(form, questions)
        n_correct = _n_correct(answers, questions)
        passed = n_correct == len(questions)
        attempts = ctx.participant.quiz_attempts + 1
        ctx.write(
            _INSERT_ATTEMPT,
            {
                "q_participant_id": ctx.participant.id,
                "q_block_id": ctx.block.id,
                "q_attempt": attempts,
                "q_answers": answers,
                "q_n_correct": n_correct,
                "q_passed": passed,
                "q_rt_ms": rt_ms,
                "q_created_at": ctx.now,
            },
        )
        ctx.set_participant(quiz_attempts=attempts)
        if passed:
            ctx.set_participant(quiz_passed=True)
            return NEXT
        if attempts < ctx.block.params["attempts"]:
            left = ctx.block.params["attempts"] - attempts
            wrong = ngettext(
                "%(num)d answer was not correct.",
                "%(num)d answers were not correct.",
                len(questions) - n_correct,
            )
            again = ngettext(
                "Please read the questions again; you have %(num)d more attempt.",
                "Please read the questions again; you have %(num)d more attempts.",
                left,
            )
            return SaveResult(Outcome.retry, f"{wrong} {again}")
        ctx.set_participant(quiz_passed=False)
        if ctx.block.params["on_fail"] == "screen_out":
            return SaveResult(Outcome.screen_out)
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        return _bot_answers(block, wrong=bot.behaviour.fail_quiz)


class AttentionCheckTask(TaskType):
    """Instructed-response questions; the result is ``attention_passed`` in the export."""

    name = "attention_check"
    template = "questions.html"

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"heading", "text", "questions"}, where)
        return {
            "heading": get_line(
                body, "heading", where, default=default_text("A few more questions")
            ),
            "text": get_str(body, "text", where, default=""),
            "questions": _questions(body, where, with_correct=True),
        }

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        return _choice_form(ctx.block.params["questions"], formdata)

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        questions = ctx.block.params["questions"]
        answers = _answers(form, questions)
        passed = _n_correct(answers, questions) == len(questions)
        # Several checks combine with AND: one failure marks the participant.
        ctx.set_participant(
            attention_passed=passed and ctx.participant.attention_passed is not False
        )
        _write_response(ctx, self.name, {"answers": answers, "passed": passed}, rt_ms)
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        return _bot_answers(block)


class DemographicsTask(TaskType):
    """Optional or required questions: ``choice``, ``number`` (with min/max) or ``text``."""

    name = "demographics"
    template = "questions.html"
    codebook = {"demo_*": ("str", "answer to demographics question {}", "")}

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"heading", "text", "questions"}, where)
        qw = where.at("questions")
        questions = []
        for i, raw in enumerate(get_list(body.get("questions"), qw, min_len=1)):
            w = qw.at(i)
            q = get_mapping(raw, w)
            check_keys(
                q, {"id", "text", "kind", "options", "min", "max", "required", "max_length"}, w
            )
            kind = get_str(q, "kind", w, default="choice")
            if kind not in {"choice", "number", "text"}:
                raise w.at("kind").error("must be 'choice', 'number' or 'text'")
            out: dict[str, Any] = {
                "id": get_id(q, "id", w),
                "text": get_str(q, "text", w),
                "kind": kind,
                "required": bool(q.get("required", False)),
            }
            if kind == "choice":
                out["options"] = _options(q.get("options"), w.at("options"))
            if kind == "number":
                out["min"] = get_int(q, "min", w, default=0, minimum=-(10**9))
                out["max"] = get_int(q, "max", w, default=10**6, minimum=out["min"])
            if kind == "text":
                n = get_int(q, "max_length", w, default=TEXT_MAX_DEFAULT, minimum=1)
                if n > TEXT_MAX_LIMIT:
                    raise w.at("max_length").error(f"must be at most {TEXT_MAX_LIMIT}, got {n}")
                out["max_length"] = n
            elif "max_length" in q:
                raise w.at("max_length").error("only text questions take max_length")
            questions.append(out)
        _check_fits_one_page(questions, where)
        return {
            "heading": get_line(body, "heading", where, default=default_text("About you")),
            "text": get_str(body, "text", where, default=""),
            "questions": questions,
        }

    def wide(self, scope: Any, blocks: list[TaskBlock]) -> tuple[list[str], Any]:
        """A ``demo_QUESTION`` column per question, in study order."""
        from sqlalchemy import select

        from webapp.extensions import db
        from webapp.models import Participant

        columns = [f"demo_{column_name(q['id'])}" for b in blocks for q in b.params["questions"]]
        answers: dict[int, dict[str, Any]] = {}
        rows = db.session.execute(
            select(TaskResponse.participant_id, TaskResponse.payload)
            .join(Participant, Participant.id == TaskResponse.participant_id)
            .where(Participant.study_id == scope.study.id, TaskResponse.task_type == self.name)
        )
        for pid, payload in rows:
            answers.setdefault(pid, {}).update(payload.get("answers") or {})

        def cells(p: Participant) -> dict[str, Any]:
            return {
                f"demo_{column_name(q)}": None if value in ("", None) else str(value)
                for q, value in answers.get(p.id, {}).items()
            }

        return columns, cells

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        class _Form(PageForm):
            pass

        language = ctx.definition.language
        for q in ctx.block.params["questions"]:
            need = (
                [InputRequired(lazy_gettext("Please answer this question."))]
                if q["required"]
                else [Optional()]
            )
            if q["kind"] == "choice":
                field: Any = RadioField(q["text"], choices=list(q["options"]), validators=need)
            elif q["kind"] == "number":
                field = AsciiIntegerField(
                    q["text"],
                    language=language,
                    validators=[
                        *need,
                        NumberRange(
                            q["min"],
                            q["max"],
                            lazy_gettext(
                                "Please enter a whole number from %(low)s to %(high)s.",
                                low=format_number(q["min"], language),
                                high=format_number(q["max"], language),
                            ),
                        ),
                    ],
                )
            else:
                # Definitions stored before max_length existed get the default cap.
                n = int(q.get("max_length", TEXT_MAX_DEFAULT))
                too_long = lazy_gettext(
                    "Please shorten your answer to at most %(n)s characters.",
                    n=format_number(n, language),
                )
                # Length also renders maxlength="n", so browsers stop typing at the cap.
                field = StringField(q["text"], validators=[*need, Length(max=n, message=too_long)])
            setattr(_Form, f"q_{q['id']}", field)
        return _Form(formdata=formdata)

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        answers = {q["id"]: form[f"q_{q['id']}"].data for q in ctx.block.params["questions"]}
        _write_response(ctx, self.name, {"answers": answers}, rt_ms)
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        data = {}
        for q in block.params["questions"]:
            if q["kind"] == "choice":
                value = bot.rng.choice(q["options"])
            elif q["kind"] == "number":
                value = str(bot.rng.randint(max(q["min"], 18), min(q["max"], 75)))
            else:
                value = "bot"
            data[f"q_{q['id']}"] = value
        return data
