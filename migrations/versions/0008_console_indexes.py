"""Console indexes: the participant table is filtered by status and sorted by time in the
database (paged), so it stays fast at thousands of participants.

Written by hand (three indexes).

Revision ID: 0008_console_indexes
Revises: 0007_recruit
Create Date: 2026-11-23 23:10:00

"""

from alembic import op


# revision identifiers, used by Alembic.
revision = "0008_console_indexes"
down_revision = "0007_recruit"
branch_labels = None
depends_on = None

_INDEXES = {
    "ix_participant_study_status": ["study_id", "status"],
    "ix_participant_study_started": ["study_id", "started_at"],
    "ix_participant_study_last_seen": ["study_id", "last_seen_at"],
}


def upgrade():
    for name, columns in _INDEXES.items():
        op.create_index(name, "participant", columns, unique=False)


def downgrade():
    for name in _INDEXES:
        op.drop_index(name, table_name="participant")
