"""Request bodies: every route takes at most what it legitimately needs, refused before the
form is parsed; a participant page's URL is checked before its body is read; the request guard
runs before CSRF and the participant gate.

Bodies are sent the three ways a client can size them: with a ``Content-Length`` over the
bound, chunked without one (an endless stream), and longer than the length they declare. A
spy form parser (Werkzeug's public ``form_data_parser_class``) records every parse.
"""

from __future__ import annotations

import io
from urllib.parse import urlsplit

import pytest
from werkzeug.formparser import FormDataParser

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import Participant, Study, StudyState
from webapp.request_limits import CONSENT, CONSOLE, CONSOLE_ANONYMOUS, LOGIN, PARTICIPANT_PAGE
from webapp.services import flow
from webapp.tasks.base import PAGE_FORM_BYTES

from .conftest import SLUG, csrf_token, login

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)

URLENCODED = "application/x-www-form-urlencoded"
MIB = 1024 * 1024


class Flood(io.RawIOBase):
    """An endless urlencoded body (``k=v&`` repeated) that counts the bytes read from it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = len(buffer)
        buffer[:n] = (b"k=v&" * (n // 4 + 1))[:n]
        self.read_bytes += n
        return n


@pytest.fixture
def parses(app) -> list[str]:
    """Every form parse of ``app``'s requests, by path."""
    seen: list[str] = []

    class SpyParser(FormDataParser):
        def parse(self, stream, mimetype, content_length, options=None):
            seen.append(mimetype)
            return super().parse(stream, mimetype, content_length, options)

    class SpyRequest(app.request_class):  # type: ignore[misc,name-defined]
        form_data_parser_class = SpyParser

    app.request_class = SpyRequest
    return seen


def _page(make_bot):
    """A participant on the first page with a form: (bot, path, hidden fields)."""
    bot = make_bot(platform="link")
    bot.open()
    bot.step()
    return bot, urlsplit(bot.page.url).path, bot.page.forms[0].hidden()


def _position(app, page: str) -> int:
    """How many pages the participant of ``page`` has answered."""
    with app.app_context():
        token = page.rsplit("/", 1)[1]
        participant = flow.participant_from_token(token, app.config["SECRET_KEY"])
        assert isinstance(participant, Participant)
        return participant.page_seq


def _declared(client, url: str, n: int, method: str = "POST"):
    """A request that declares ``n`` bytes of body and would send them."""
    flood = Flood()
    environ = {"wsgi.input": flood, "CONTENT_LENGTH": str(n)}
    resp = client.open(url, method=method, content_type=URLENCODED, environ_overrides=environ)
    return resp, flood


def _chunked(client, url: str):
    """A POST with an endless body and no declared length, as a server passes it on."""
    flood = Flood()
    environ = {
        "wsgi.input": flood,
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input_terminated": True,
    }
    resp = client.post(url, content_type=URLENCODED, environ_overrides=environ)
    return resp, flood


def _code(resp) -> str:
    html = resp.get_data(as_text=True)
    assert "Traceback" not in html
    start = html.find('data-error-code="')
    return html[start + 17 : html.find('"', start + 17)] if start >= 0 else ""


def _routes(app, make_bot):
    """(what, client, URL, bound) for a participant page, consent, login and console forms."""
    _, page, _ = _page(make_bot)
    console = app.test_client()
    login(app, console)
    return [
        ("participant page", app.test_client(), page, PARTICIPANT_PAGE),
        ("consent", app.test_client(), f"/s/{SLUG}/start", CONSENT),
        ("login", app.test_client(), "/researcher/login", LOGIN),
        (
            "console, anonymous",
            app.test_client(),
            f"/researcher/studies/{SLUG}/state",
            CONSOLE_ANONYMOUS,
        ),
        ("upload, anonymous", app.test_client(), "/researcher/studies/upload", CONSOLE_ANONYMOUS),
        ("console, logged in", console, f"/researcher/studies/{SLUG}/state", CONSOLE),
    ]


def test_a_declared_length_over_the_bound_is_refused_unread_on_every_kind_of_route(
    app, make_bot, parses
):
    routes = _routes(app, make_bot)
    parses.clear()  # the participant's and the researcher's own pages before
    for what, client, url, _ in routes:
        resp, flood = _declared(client, url, 15 * MIB)
        assert resp.status_code == 413 and _code(resp) == "E413-TOO-LARGE", what
        assert flood.read_bytes == 0, what  # refused before a byte of the body was read
    assert parses == []


def test_a_chunked_body_is_read_one_chunk_past_its_bound_then_refused(app, make_bot, parses):
    routes = _routes(app, make_bot)
    parses.clear()
    for what, client, url, bound in routes:
        resp, flood = _chunked(client, url)
        assert resp.status_code == 413 and _code(resp) == "E413-TOO-LARGE", what
        assert 0 < flood.read_bytes <= bound.max_bytes + 64 * 1024, (what, flood.read_bytes)
    assert parses == []


@pytest.mark.parametrize("kind", ["urlencoded", "multipart"])
def test_too_many_fields_are_counted_and_refused_before_parsing(app, make_bot, parses, kind):
    routes = _routes(app, make_bot)
    parses.clear()
    for what, client, url, bound in routes:
        n = bound.max_fields + 1
        if kind == "urlencoded":
            resp = client.post(
                url, data="&".join(f"f{i}=1" for i in range(n)), content_type=URLENCODED
            )
        else:
            resp = client.post(
                url, data={f"f{i}": "1" for i in range(n)}, content_type="multipart/form-data"
            )
        assert resp.status_code == 400 and _code(resp) == "E400-FIELDS", (what, resp.status_code)
    assert parses == []


def test_a_body_longer_than_declared_is_read_only_as_far_as_declared(app, make_bot, parses):
    _, page, _ = _page(make_bot)
    parses.clear()
    resp, flood = _declared(app.test_client(), page, 400)
    assert flood.read_bytes == 400
    # 100 made-up fields within the bound: parsed, refused as an answer, the page shown again.
    assert resp.status_code in (303, 400, 422) and parses == [URLENCODED]


def test_a_made_up_page_token_never_costs_a_form_parse(app, study, parses):
    client = app.test_client()
    body = "&".join(f"k{i}=v" for i in range(20_000))  # 200 KiB, under the page's bound
    for url in (f"/s/{SLUG}/p/abc", "/s/no-such-study/p/abc"):
        flood = io.BytesIO(body.encode())
        resp = client.post(
            url,
            input_stream=flood,
            content_type=URLENCODED,
            headers={"Content-Length": str(len(body))},
        )
        assert resp.status_code == 404, url
        assert _code(resp) in ("E404-SESSION", "E404-STUDY"), url
        assert flood.tell() == 0, url  # not a byte of it read
    assert parses == []


def test_a_genuine_token_of_another_study_reads_no_body_either(app, make_bot, parses):
    _, page, hidden = _page(make_bot)
    parses.clear()
    token = page.rsplit("/", 1)[1]
    resp = app.test_client().post(f"/s/another-study/p/{token}", data=hidden)
    assert resp.status_code == 404 and parses == []


def test_a_huge_free_text_answer_gets_a_friendly_413_and_loses_nothing(app, make_bot):
    _, page, hidden = _page(make_bot)
    before = _position(app, page)
    client = app.test_client()
    resp = client.post(page, data={**hidden, "q_comments": "ü" * (PAGE_FORM_BYTES // 6 + 1)})
    html = resp.get_data(as_text=True)
    assert resp.status_code == 413 and _code(resp) == "E413-TOO-LARGE"
    assert "256 KiB" in html and "earlier answers are safe" in html
    assert f'href="{page}"' in html  # back to their page, as they left it
    assert _position(app, page) == before
    assert client.get(page).status_code == 200


def test_too_many_fields_on_a_participant_page_links_back_and_saves_nothing(app, make_bot):
    _, page, hidden = _page(make_bot)
    before = _position(app, page)
    fields = {**hidden, **{f"x{i}": "1" for i in range(PARTICIPANT_PAGE.max_fields)}}
    resp = app.test_client().post(page, data=fields)
    assert resp.status_code == 400 and _code(resp) == "E400-FIELDS"
    assert f'href="{page}"' in resp.get_data(as_text=True)
    assert _position(app, page) == before


def test_only_a_logged_in_researchers_upload_gets_the_large_bound(app, parses):
    anonymous = app.test_client()
    one_mib = {"file": (io.BytesIO(b"x" * MIB), "study.yaml")}
    resp = anonymous.post("/researcher/studies/upload", data=one_mib)
    # The test client spools a body this large to a temporary file; a server would drop it.
    resp.request.environ["wsgi.input"].close()
    assert resp.status_code == 413 and parses == []
    researcher = app.test_client()
    login(app, researcher)
    parses.clear()
    index = researcher.get("/researcher/").get_data(as_text=True)
    data = {"csrf_token": csrf_token(index), "file": (io.BytesIO(b"x" * MIB), "study.yaml")}
    resp = researcher.post("/researcher/studies/upload", data=data)
    resp.request.environ["wsgi.input"].close()
    # Received and read: the bundle reader refuses the file's content, not its size.
    assert resp.status_code == 422 and "multipart/form-data" in parses


def test_the_guard_runs_before_csrf(app):
    # No CSRF token: were CSRF first, both would be E400-CSRF.
    client = app.test_client()
    resp = client.post("/researcher/login", data={"username": "a\x00b", "password": "x"})
    assert resp.status_code == 400 and _code(resp) == "E400-CHARACTERS"
    resp, _ = _declared(client, "/researcher/login", 15 * MIB)
    assert resp.status_code == 413


def test_the_guard_runs_before_the_participant_gate(app, study):
    with app.app_context():
        db.session.scalar(db.select(Study).where(Study.slug == SLUG)).state = StudyState.closed
        db.session.commit()
    client = app.test_client()
    assert _code(client.get(f"/s/{SLUG}?participant=p1")) == "E410-CLOSED"
    # Were the gate first, these would be E410-CLOSED too.
    assert _code(client.get(f"/s/{SLUG}?participant=a%00b")) == "E400-CHARACTERS"
    resp, _ = _declared(client, f"/s/{SLUG}/start", 15 * MIB)
    assert _code(resp) == "E413-TOO-LARGE"


def test_get_requests_take_no_body(app, study, parses):
    resp, flood = _declared(app.test_client(), f"/s/{SLUG}?participant=p1", 10, "GET")
    assert resp.status_code == 413 and flood.read_bytes == 0 and parses == []


def _study_with_long_answers(tmp_path, n: int):
    """The demo study whose demographics page asks ``n`` free-text questions of 5,000
    characters each (the largest ``max_length``)."""
    import shutil

    import yaml

    from tests.webapp.conftest import DEMO, ROOT
    from webapp.tasks.questions import TEXT_MAX_LIMIT

    folder = tmp_path / f"long-{n}"
    (folder / "product_pairs").mkdir(parents=True)
    pairs = ROOT / "stimuli" / "studies" / "product_pairs" / "demo.yaml"
    shutil.copy(pairs, folder / "product_pairs" / "demo.yaml")
    doc = yaml.safe_load(DEMO.read_text())
    doc["slug"] = f"long-{n}"
    block = next(b for b in doc["tasks"] if b["type"] == "demographics")
    block["questions"] += [
        {"id": f"c{i}", "text": f"Comment {i}", "kind": "text", "max_length": TEXT_MAX_LIMIT}
        for i in range(n)
    ]
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_largest_answers_a_study_may_ask_for_fit_what_a_page_may_send(app, tmp_path):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.services.studies import load_study
    from webapp.validation import StudyDefinitionError

    with app.app_context():
        with pytest.raises(StudyDefinitionError, match="split them over two blocks"):
            load_study(_study_with_long_answers(tmp_path, 5))
        definition = study_definition(load_study(_study_with_long_answers(tmp_path, 4)).study)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="w1")
    page = bot.open()
    while page.kind != "demographics":
        page = bot.step()
    # Every field at its limit in the characters that take the most bytes urlencoded (4).
    longest = {f"q_c{i}": "\U0001f600" * 5000 for i in range(4)}
    page = bot.post({**bot.answer(), **longest})
    assert page.kind != "demographics" and not page.invalid, (page.status, page.kind)
    with app.app_context():
        from sqlalchemy import select

        from webapp.models import TaskResponse

        saved = db.session.scalar(
            select(TaskResponse).where(TaskResponse.task_type == "demographics")
        )
        assert saved is not None and saved.payload["answers"]["c3"] == longest["q_c3"]
