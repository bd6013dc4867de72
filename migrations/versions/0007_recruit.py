"""Recruiters: a study's Prolific study / MTurk HIT, and bonus payments made through the APIs.

- ``recruitment``: one row per study and platform (the platform's study or HIT id, sandbox or
  not, the last status it reported, the URL it was given).
- ``bonus_payment.platform_payment_id`` / ``platform_state`` / ``paid_at``: what the platform
  calls a ledger row's payment and how far it got, so no bonus is sent twice.

Revision ID: 0007_recruit
Revises: 0006_session_version
Create Date: 2026-11-23 23:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "0007_recruit"
down_revision = "0006_session_version"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "recruitment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column(
            "platform",
            sa.Enum(
                "prolific",
                "mturk",
                "link",
                "mturk_batch",
                name="platform",
                native_enum=False,
                length=20,
            ),
            nullable=False,
        ),
        sa.Column(
            "external_id",
            sa.String(length=128),
            nullable=True,
            comment="Prolific study id or MTurk HIT id; empty while being created",
        ),
        sa.Column("sandbox", sa.Boolean(), nullable=False),
        sa.Column(
            "status",
            sa.String(length=40),
            nullable=False,
            comment="last status the platform reported",
        ),
        sa.Column(
            "external_url",
            sa.String(length=1000),
            nullable=False,
            comment="the URL given to the platform",
        ),
        sa.Column(
            "extra",
            sa.JSON(),
            nullable=False,
            comment="platform specifics: MTurk HIT type and qualification type ids",
        ),
        sa.Column("created_by", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_recruitment_study_id_study")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recruitment")),
        sa.UniqueConstraint("study_id", "platform", name=op.f("uq_recruitment_study_id_platform")),
    )
    with op.batch_alter_table("recruitment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_recruitment_study_id"), ["study_id"], unique=False)
    with op.batch_alter_table("bonus_payment", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "platform_payment_id",
                sa.String(length=64),
                nullable=True,
                comment="Prolific bulk bonus id / MTurk UniqueRequestToken of the payment",
            )
        )
        batch_op.add_column(
            sa.Column(
                "platform_state",
                sa.String(length=12),
                nullable=True,
                comment="set_up, paying (outcome unknown) or paid, through the API",
            )
        )
        batch_op.add_column(sa.Column("paid_at", sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table("bonus_payment", schema=None) as batch_op:
        batch_op.drop_column("paid_at")
        batch_op.drop_column("platform_state")
        batch_op.drop_column("platform_payment_id")
    with op.batch_alter_table("recruitment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_recruitment_study_id"))
    op.drop_table("recruitment")
