"""The floor of the stack: a bare Flask + Jinja page with one indexed SELECT and one INSERT.

What the peer benchmark divides FrameLab's per-request CPU by. The same libraries FrameLab
serves a participant page with (Flask, Jinja, SQLAlchemy with psycopg 3 on PostgreSQL, the same
gunicorn settings), and nothing else: no sessions, CSRF, forms, audit or allocation. A GET
reads one row by its primary key and renders a page of about the size of a choice page; a
POST inserts one row, commits and redirects to the next page, as a participant's answer does.

The template is served by a loader, so Jinja compiles it once per process as it does any real
app's templates (``render_template_string`` compiled it on every GET: 1.1 ms of CPU per page
on the benchmark machine, a quarter of what the floor was measured to cost before).
"""

from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, redirect, render_template, request
from jinja2 import DictLoader
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    insert,
    select,
)

PAGES = 26
metadata = MetaData()
page_table = Table(
    "floor_page",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("title", String(200)),
    Column("body", Text),
)
answer_table = Table(
    "floor_answer",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("person", String(40), index=True),
    Column("page", Integer),
    Column("value", String(200)),
)
TEMPLATE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{{ page.title }}</title></head><body><main><h1>{{ page.title }}</h1>
{% for p in page.body.split("\\n\\n") %}<p>{{ p }}</p>{% endfor %}
<form method="post"><fieldset><legend>Which product would you buy?</legend>
<label><input type="radio" name="side" value="left"> Left</label>
<label><input type="radio" name="side" value="right"> Right</label></fieldset>
<button type="submit">Next</button></form></main></body></html>"""


def create_app() -> Flask:
    app = Flask(__name__)
    app.jinja_loader = DictLoader({"page.html": TEMPLATE})
    engine = create_engine(os.environ["DATABASE_URL"], pool_size=8, max_overflow=8)

    @app.get("/p/<person>/<int:n>")
    def show(person: str, n: int):
        with engine.connect() as conn:
            row = conn.execute(select(page_table).where(page_table.c.id == n)).one()
        return render_template("page.html", page=row)

    @app.post("/p/<person>/<int:n>")
    def answer(person: str, n: int):
        with engine.begin() as conn:
            conn.execute(
                insert(answer_table).values(
                    person=person, page=n, value=request.form.get("side", "")
                )
            )
        return redirect(f"/p/{person}/{n + 1}" if n < PAGES else "/done")

    @app.get("/done")
    def done():
        return "done"

    return app


def build(database_url: str) -> None:
    """Create the two tables and the pages, each with the reviews of the demo study's first two
    pairs as its text (run once before the server starts)."""
    import yaml

    demo = Path(__file__).resolve().parents[3] / "stimuli/studies/product_pairs/demo.yaml"
    pairs = yaml.safe_load(demo.read_text())["pairs"][:2]
    body = "\n\n".join(p["target"]["review"] + " " + p["control"]["review"] for p in pairs)
    engine = create_engine(database_url)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            insert(page_table),
            [
                {"id": n, "title": f"Product {n} of {PAGES}", "body": body}
                for n in range(1, PAGES + 1)
            ],
        )
    engine.dispose()
