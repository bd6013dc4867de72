"""Property-based tests over every participant form: bad input never gives a 500 or a stack
trace, is refused with a clear message, and never changes what was already saved.

A bot walks through the demo study; at each step hypothesis mutates the page's correct answer
(huge, empty, unicode, wrong types, negative and NaN numbers, tampered page tokens and hidden
fields, dropped and repeated fields, replays of earlier pages) and posts it. Whatever the
server does, the properties below must hold; when a mutation happens to be valid the bot simply
moves on, so the walk covers every page kind of the study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import Annotation, ChoiceResponse, Participant, QuizAttempt, TaskResponse

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
NASTY_VALUES = [
    "",
    " ",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "-1",
    "-0.01",
    "1e309",
    "0x10",
    "²",
    "١٢",
    "１２",
    "9" * 5000,
    "x" * 100_000,
    "left\x00",
    "<script>alert(1)</script>",
    "'; DROP TABLE participant; --",
    "{{7*7}}",
    "%s%s%n",
    "\u202eevil",
    "😀" * 50,
    "true",
    "null",
    "[]",
    "{}",
]
NASTY = st.sampled_from(NASTY_VALUES)
VALUE = st.one_of(NASTY, TEXT, st.integers(-(10**12), 10**12).map(str), st.floats().map(str))
FIELD_NAMES = st.one_of(
    st.sampled_from(["page", "rt_ms", "side", "premium", "csrf_token", "agree", "label"]),
    st.from_regex(r"q_[a-z_]{1,12}", fullmatch=True),
    TEXT.filter(bool),
)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["set", "set", "drop", "repeat"]),
        st.one_of(st.integers(0, 30), FIELD_NAMES),  # an index picks one of the form's fields
        st.one_of(VALUE, st.lists(VALUE, min_size=2, max_size=3)),
    ),
    min_size=1,
    max_size=4,
)
END = {"completed", "external", "screened_out"}


def _apply(answer: dict[str, str], names: list[str], ops: list[tuple]) -> dict[str, Any]:
    data: dict[str, Any] = dict(answer)
    for op, which, value in ops:
        name = names[which % len(names)] if isinstance(which, int) and names else str(which)
        if op == "drop":
            data.pop(name, None)
        elif op == "repeat":
            data[name] = value if isinstance(value, list) else [value, value]
        else:
            data[name] = value[0] if isinstance(value, list) else value
    return data


def _saved(app) -> dict[str, Any]:
    """Everything saved so far, keyed by natural key (new rows may appear, old ones not change)."""
    with app.app_context():
        out: dict[str, Any] = {}
        for c in db.session.scalars(select(ChoiceResponse)):
            out[f"choice/{c.participant_id}/{c.trial_index}"] = (c.pair_id, c.chosen_side)
            if c.wtp_premium_usd is not None:
                out[f"wtp/{c.participant_id}/{c.trial_index}"] = c.wtp_premium_usd
        for q in db.session.scalars(select(QuizAttempt)):
            out[f"quiz/{q.participant_id}/{q.block_id}/{q.attempt}"] = (q.answers, q.passed)
        for t in db.session.scalars(select(TaskResponse)):
            out[f"task/{t.participant_id}/{t.block_id}/{t.step}"] = t.payload
        for p in db.session.scalars(select(Participant)):
            out[f"participant/{p.id}"] = (p.code, p.seed, p.sequence)
        for a in db.session.scalars(select(Annotation).where(Annotation.label.is_not(None))):
            out[f"label/{a.participant_id}/{a.item_pk}"] = a.label
        return out


def check_response(status: int, text: str) -> None:
    """The properties of any answer to bad input."""
    assert status < 500, text[:600]
    assert "Traceback" not in text and 'File "' not in text
    if status >= 400:
        clear = 'data-error-code="E' in text or (status == 422 and 'class="error"' in text)
        assert clear, f"{status} without an error code or message: {text[:600]}"


def _nothing_lost(before: dict[str, Any], after: dict[str, Any], *, accepted: bool) -> None:
    """A refused submission changes nothing saved; an accepted one (a nasty value can be a
    valid answer, e.g. an optional free-text reason) may only complete its page's own row
    (the reservation a preference page made on entry gains its answer, keeping what it had)."""
    changed = {k for k in before if after.get(k) != before[k]}
    if not accepted:
        assert not changed, changed
        return
    for k in changed:
        old, new = before[k], after.get(k)
        assert isinstance(old, dict) and isinstance(new, dict), (k, old, new)
        assert {key: new.get(key) for key in old} == old, (k, old, new)


_IDS = iter(range(10**9))


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.integers(0, 30),
    action=st.sampled_from(["mutate", "mutate", "mutate", "replay"]),
    ops=OPS,
    pick=st.integers(0, 100),
    seed=st.integers(0, 2**16),
)
def test_participant_forms_survive_bad_input(app, study, steps, action, ops, pick, seed):
    import random

    bot = Bot(
        FlaskTransport(app),
        study,
        BotBehaviour(platform="link"),
        rng=random.Random(seed),
        external_id=f"fuzz{next(_IDS)}",
    )
    page = bot.open()
    history: list[tuple[str, dict[str, str]]] = []
    for _ in range(steps):  # walk to some page of the study with valid answers
        if page.kind in END:
            break
        answer = bot.answer()
        history.append((page.url, answer))
        page = bot.post(answer)
    if page.kind in END or not page.forms:
        return
    before = _saved(app)
    if action == "replay" and history:
        url, old = history[pick % len(history)]
        status, _, text = bot.transport.request("POST", url, old)
        check_response(status, text)
        assert status in (302, 303) or 'data-error-code="E' in text
    else:
        data = _apply(bot.answer(), page.forms[0].names(), ops)
        new = bot.post(data)
        check_response(new.status, new.text)
    after = _saved(app)
    changed = {k: (before[k], after.get(k)) for k in before if after.get(k) != before[k]}
    assert not changed, changed


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=st.dictionaries(FIELD_NAMES, VALUE, max_size=6), platform=st.integers(0, 3))
def test_entry_links_and_consent_survive_bad_parameters(app, client, study, params, platform):
    base = [
        {},
        {"PROLIFIC_PID": "5f1e2d3c4b5a69788796a5b4", "STUDY_ID": "S", "SESSION_ID": "X"},
        {"workerId": "AW", "hitId": "H", "assignmentId": "A", "turkSubmitTo": "https://x"},
        {"participant": "p1"},
    ][platform]
    query = {**base, **params}
    resp = client.get(f"/s/{study.slug}", query_string=query)
    check_response(resp.status_code, resp.get_data(as_text=True))
    page = resp.get_data(as_text=True)
    if 'name="csrf_token"' in page:
        import re

        token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
        resp = client.post(
            f"/s/{study.slug}/start", data={**query, "csrf_token": token, "agree": "y"}
        )
        check_response(resp.status_code, resp.get_data(as_text=True))


@pytest.mark.slow  # about a hundred cases
@pytest.mark.parametrize("field", ["page", "rt_ms", "side", "csrf_token"])
@pytest.mark.parametrize("value", NASTY_VALUES, ids=lambda v: repr(v[:12]))
def test_every_nasty_value_in_every_field_of_a_choice_page(app, make_bot, field, value):
    bot = make_bot(platform="link")
    page = bot.open()
    while page.kind != "choice":
        page = bot.step()
    before = _saved(app)
    new = bot.post({**bot.answer(), field: value})
    check_response(new.status, new.text)
    # A page's form has no csrf_token (its page token is its anti-forgery token): one sent
    # anyway is an unknown field, ignored, and must not break anything either.
    if field in {"page", "side"}:
        # Refused, with a message: an error page, or the page again after post/redirect/get.
        assert new.status >= 400 or (new.invalid and new.kind == "choice")
    assert {k: v for k, v in _saved(app).items() if k in before} == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["consent", "instructions", "quiz", "wtp", "attention_check", "demographics"]
)
def test_every_nasty_value_in_every_field_of_every_page_kind(app, make_bot, kind):
    def walk():
        bot = make_bot(platform="link")
        page = bot.open()
        while page.kind != kind:
            page = bot.step()
        return bot

    bot = walk()
    tried = 0
    for field in bot.page.forms[0].names():
        for value in NASTY_VALUES:
            before = _saved(app)
            answer = bot.answer()
            new = bot.post({**answer, field: value})
            check_response(new.status, new.text)
            assert {k: v for k, v in _saved(app).items() if k in before} == before
            tried += 1
            if new.kind != kind or new.status >= 400:
                bot = walk()  # accepted (or an error page): start again on this page kind
    assert tried >= len(NASTY_VALUES) * 2  # every page has at least its page token and rt_ms


STUDIES = sorted((Path(__file__).resolve().parents[3] / "stimuli" / "studies").glob("*.yaml"))
COMMON = {"csrf_token", "page", "rt_ms"}  # covered on every page kind of the product study


@pytest.mark.slow
@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_page_kind_of_every_demo_study_refuses_nasty_values(app, path):
    """Discover each demo study's page kinds with a bot, then send nasty values in the
    task's own fields of each kind (task types added later are covered automatically)."""
    from webapp.services.studies import load_study

    with app.app_context():
        definition = study_definition(load_study(path).study)
    ids = iter(range(10**6))

    def bot() -> Bot:
        return Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(platform="link"),
            external_id=f"{path.stem[:10]}{next(ids)}",
        )

    probe = bot()
    probe.run()
    kinds = [k for k in dict.fromkeys(probe.history) if k not in END | {"error", "unknown"}]
    kinds = [k for k in kinds if k != "study_full"]
    assert kinds, probe.history

    def walk(kind: str) -> Bot | None:
        b = bot()
        page = b.open()
        for _ in range(200):
            if page.kind == kind:
                return b
            if page.kind in END or not page.forms:
                return None
            page = b.step()
        return None

    tried = 0
    for kind in kinds:
        b = walk(kind)
        if b is None:
            continue
        fields = [n for n in b.page.forms[0].names() if n not in COMMON][:3] or ["page"]
        for field in fields:
            for value in NASTY_VALUES:
                before = _saved(app)
                new = b.post({**b.answer(), field: value})
                check_response(new.status, new.text)
                _nothing_lost(before, _saved(app), accepted=new.status < 400 and not new.invalid)
                tried += 1
                if new.kind != kind or new.status >= 400:
                    b = walk(kind)  # None once a study with quotas is full
                    if b is None:
                        break
            if b is None:
                break
    assert tried >= len(NASTY_VALUES)
