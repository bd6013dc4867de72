"""Test participants: bots and researcher previews carry a mark that keeps them out of counts,
balancing, bonuses, payment files and exports.

- ``participant.is_test``: NOT NULL, false by default. Earlier previews are marked; earlier bot
  runs arrived with IDs in the recruiters' own formats and cannot be told apart here.
- ``ix_participant_study_test``: clearing a study's test data finds its test rows by index.

Written by hand.

Revision ID: 0013_test_participants
Revises: 0012_prereg_looks
Create Date: 2026-11-27 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0013_test_participants"
down_revision = "0012_prereg_looks"
branch_labels = None
depends_on = None


def upgrade():
    # A plain ADD COLUMN on every database: batch mode would copy the participant table on
    # SQLite and drop the original, which its foreign keys refuse once responses exist.
    op.add_column(
        "participant",
        sa.Column(
            "is_test",
            sa.Boolean(),
            server_default=sa.false(),
            nullable=False,
            comment="a bot or a researcher preview: left out of counts, payments and exports",
        ),
    )
    op.execute(sa.text("UPDATE participant SET is_test = is_preview"))
    op.create_index(
        "ix_participant_study_test", "participant", ["study_id", "is_test"], unique=False
    )


def downgrade():
    op.drop_index("ix_participant_study_test", table_name="participant")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite (3.35+) drops the column in place. Batch mode would copy the table and drop
        # the original, which its foreign keys refuse while responses point at participants.
        op.execute(sa.text("ALTER TABLE participant DROP COLUMN is_test"))
    else:
        op.drop_column("participant", "is_test")
