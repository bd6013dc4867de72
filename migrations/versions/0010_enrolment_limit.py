"""Enrolment rate limit: recent enrolments per study and client network (an HMAC of the
network, never a raw address), so made-up recruiter IDs sent from one place cannot fill a study.

Written by hand (one table, two indexes).

Revision ID: 0010_enrolment_limit
Revises: 0009_ledger_claims
Create Date: 2026-11-25 10:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "0010_enrolment_limit"
down_revision = "0009_ledger_claims"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "enrolment_attempt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("client_hash", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_enrolment_attempt_study_id_study")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_enrolment_attempt")),
    )
    op.create_index(
        "ix_enrolment_attempt_client",
        "enrolment_attempt",
        ["study_id", "client_hash", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_enrolment_attempt_age", "enrolment_attempt", ["study_id", "created_at"], unique=False
    )


def downgrade():
    op.drop_index("ix_enrolment_attempt_age", table_name="enrolment_attempt")
    op.drop_index("ix_enrolment_attempt_client", table_name="enrolment_attempt")
    op.drop_table("enrolment_attempt")
