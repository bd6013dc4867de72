"""Ledger claims: every state change of a bonus payment made through a recruiter's API is
conditional on the claim of the run that holds it, and the pay call's time and the platform's
reason for a refusal are kept; a listing being created carries the claim of the run creating
it.

Written by hand (columns only). Rows paid before the upgrade keep their state; the old claim
marks (``claim:<epoch>:<hex>`` in ``platform_payment_id``) become real claims taken at that
time, so the expiry rule applies to them unchanged.

Revision ID: 0009_ledger_claims
Revises: 0008_console_indexes
Create Date: 2026-11-24 10:00:00

"""

from datetime import UTC, datetime

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "0009_ledger_claims"
down_revision = "0008_console_indexes"
branch_labels = None
depends_on = None

_BONUS_COLUMNS = (
    (
        "claim_token",
        sa.String(length=32),
        "the run that holds this row while it sets it up or pays it",
    ),
    (
        "claimed_at",
        sa.DateTime(timezone=True),
        "when that run took the row; another may take it an hour later",
    ),
    (
        "sent_at",
        sa.DateTime(timezone=True),
        "when the pay call was sent (settle waits before judging it)",
    ),
    (
        "platform_note",
        sa.String(length=300),
        "why the platform refused or has not settled this payment",
    ),
)
_RECRUITMENT_COLUMNS = (
    (
        "claim_token",
        sa.String(length=32),
        "the run creating the listing while its platform id is unknown",
    ),
    (
        "claimed_at",
        sa.DateTime(timezone=True),
        "when that run started; another may take over later",
    ),
)
_STATE_COMMENTS = (
    "set_up, paying (outcome unknown) or paid, through the API",
    "claimed, set_up, paying (outcome unknown), sent, paid or refused, through the API",
)


def _state_comment(batch_op, old: str, new: str) -> None:
    batch_op.alter_column(
        "platform_state",
        existing_type=sa.String(length=12),
        existing_nullable=True,
        comment=new,
        existing_comment=old,
    )


def upgrade():
    with op.batch_alter_table("bonus_payment", schema=None) as batch_op:
        for name, type_, comment in _BONUS_COLUMNS:
            batch_op.add_column(sa.Column(name, type_, nullable=True, comment=comment))
        _state_comment(batch_op, *_STATE_COMMENTS)
    with op.batch_alter_table("recruitment", schema=None) as batch_op:
        for name, type_, comment in _RECRUITMENT_COLUMNS:
            batch_op.add_column(sa.Column(name, type_, nullable=True, comment=comment))
    table = sa.table(
        "bonus_payment",
        sa.column("id", sa.Integer()),
        sa.column("platform_state", sa.String()),
        sa.column("platform_payment_id", sa.String()),
        sa.column("claim_token", sa.String()),
        sa.column("claimed_at", sa.DateTime(timezone=True)),
    )
    conn = op.get_bind()
    marked = conn.execute(
        sa.select(table.c.id, table.c.platform_payment_id).where(
            table.c.platform_state == "claimed", table.c.platform_payment_id.like("claim:%")
        )
    ).all()
    for row_id, mark in marked:
        _, seconds, suffix = (mark.split(":", 2) + ["", ""])[:3]
        when = datetime.fromtimestamp(int(seconds or 0), UTC)
        conn.execute(
            table.update()
            .where(table.c.id == row_id)
            .values(platform_payment_id=None, claim_token=suffix or "migrated", claimed_at=when)
        )


def downgrade():
    table = sa.table(
        "bonus_payment",
        sa.column("id", sa.Integer()),
        sa.column("platform_state", sa.String()),
        sa.column("platform_payment_id", sa.String()),
        sa.column("paid_at", sa.DateTime(timezone=True)),
        sa.column("sent_at", sa.DateTime(timezone=True)),
        sa.column("claim_token", sa.String()),
        sa.column("claimed_at", sa.DateTime(timezone=True)),
    )
    # States the older code does not know: "sent" was accepted by the platform (the older
    # code counted that as paid), "refused" was never paid (the older code sends it again),
    # and a claim goes back into the older code's mark.
    op.execute(
        table.update()
        .where(table.c.platform_state == "sent")
        .values(platform_state="paid", paid_at=table.c.sent_at)
    )
    op.execute(
        table.update().where(table.c.platform_state == "refused").values(platform_state=None)
    )
    conn = op.get_bind()
    claimed = conn.execute(
        sa.select(table.c.id, table.c.claim_token, table.c.claimed_at).where(
            table.c.platform_state == "claimed"
        )
    ).all()
    for row_id, token, when in claimed:
        seconds = int(when.timestamp()) if when is not None else 0
        conn.execute(
            table.update()
            .where(table.c.id == row_id)
            .values(platform_payment_id=f"claim:{seconds:010d}:{(token or '')[:16]}")
        )
    with op.batch_alter_table("recruitment", schema=None) as batch_op:
        for name, _, _ in reversed(_RECRUITMENT_COLUMNS):
            batch_op.drop_column(name)
    with op.batch_alter_table("bonus_payment", schema=None) as batch_op:
        _state_comment(batch_op, *reversed(_STATE_COMMENTS))
        for name, _, _ in reversed(_BONUS_COLUMNS):
            batch_op.drop_column(name)
