"""Stored study definitions name their amounts without a currency, and say which one it is.

A definition's amounts are in its ``payment.currency``; their keys no longer say ``usd``:
``payment.base_usd`` → ``payment.base``, ``payment.bonus.usd`` → ``payment.bonus.amount``
(and its bound ``max_usd`` → ``max``),
a product's ``price_usd`` → ``price`` and
``wtp.max_premium_usd`` → ``wtp.max_premium``; ``payment.currency`` is ``USD`` (what every
earlier study paid in). The study files of earlier versions load into the same shape, so
loading one again finds it unchanged. ``definition_hash`` follows the definition.

Written by hand.

Revision ID: 0016_currency_definitions
Revises: 0015_known_login_clients
Create Date: 2026-12-01 09:00:00

"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0016_currency_definitions"
down_revision = "0015_known_login_clients"
branch_labels = None
depends_on = None

_study = sa.table(
    "study",
    sa.column("id", sa.Integer),
    sa.column("definition", sa.JSON),
    sa.column("definition_hash", sa.String),
)


def _rename(mapping, old, new):
    if isinstance(mapping, dict) and old in mapping:
        mapping[new] = mapping.pop(old)


def _convert(definition, up):
    """The definition with its amount keys renamed (``up``: to the currency-neutral names)."""
    d = json.loads(json.dumps(definition))
    pairs = [
        ("base_usd", "base", lambda: [d.get("payment")]),
        ("usd", "amount", lambda: [(d.get("payment") or {}).get("bonus")]),
        ("max_usd", "max", lambda: [(d.get("payment") or {}).get("bonus")]),
        ("max_premium_usd", "max_premium", lambda: [b.get("wtp") for b in d.get("tasks", [])]),
        (
            "price_usd",
            "price",
            lambda: [
                pair.get(role)
                for b in d.get("tasks", [])
                for pair in b.get("pairs") or []
                if isinstance(pair, dict)
                for role in ("target", "control")
            ],
        ),
    ]
    for old, new, where in pairs:
        for mapping in where():
            _rename(mapping, *((old, new) if up else (new, old)))
    payment = d.get("payment")
    if isinstance(payment, dict):
        if up:
            payment.setdefault("currency", "USD")
        else:
            payment.pop("currency", None)
    return d


def _hash(definition):
    # webapp.models.definition_hash, written out: a migration keeps what it ran with.
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _migrate(up):
    conn = op.get_bind()
    for row in conn.execute(sa.select(_study.c.id, _study.c.definition)).all():
        definition = row.definition
        if isinstance(definition, str):  # a JSON column some drivers hand back as text
            definition = json.loads(definition)
        if not isinstance(definition, dict) or "payment" not in definition:
            continue
        if up and "currency" in definition["payment"]:
            continue
        if not up and definition["payment"].get("currency", "USD") != "USD":
            raise RuntimeError(
                f"study {row.id} pays in {definition['payment']['currency']}: the schema "
                "before 0016 knows only US dollars; downgrade refused"
            )
        new = _convert(definition, up)
        conn.execute(
            _study.update()
            .where(_study.c.id == row.id)
            .values(definition=new, definition_hash=_hash(new))
        )


def upgrade():
    _migrate(up=True)


def downgrade():
    _migrate(up=False)
