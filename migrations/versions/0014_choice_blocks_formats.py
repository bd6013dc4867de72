"""Product-choice answers keyed by block, and format names of any product-choice design.

- ``choice_response``: unique on (participant, block, trial) instead of (participant, trial),
  so a study may hold several product-choice blocks.
- ``choice_response.format``: up to 64 characters (``mitigated:balanced-coverage``).
- ``participant.sequence``: its comment names the k sequences of a k-format design.

Written by hand.

Revision ID: 0014_choice_blocks_formats
Revises: 0013_test_participants
Create Date: 2026-11-26 08:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0014_choice_blocks_formats"
down_revision = "0013_test_participants"
branch_labels = None
depends_on = None


_SEQ_OLD = "format sequence A or B"
_SEQ_NEW = "format sequence A, B, …: a Latin-square row, one per format"


def _sequence_comment(new, old):
    # A comment only: SQLite keeps none (and batch mode would copy the participant table,
    # which its foreign keys refuse once responses exist).
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            "participant",
            "sequence",
            existing_type=sa.String(length=1),
            existing_nullable=False,
            comment=new,
            existing_comment=old,
        )


def upgrade():
    _sequence_comment(_SEQ_NEW, _SEQ_OLD)
    # Batch mode copies choice_response on SQLite; no table points at it, so the copy is safe.
    with op.batch_alter_table("choice_response", schema=None) as batch_op:
        batch_op.drop_constraint("uq_choice_response_participant_id_trial_index", type_="unique")
        batch_op.create_unique_constraint(
            "uq_choice_response_participant_id_block_id_trial_index",
            ["participant_id", "block_id", "trial_index"],
        )
        batch_op.alter_column(
            "format",
            existing_type=sa.String(length=10),
            type_=sa.String(length=64),
            existing_nullable=False,
            comment="format name: original | summary | another format of the block",
            existing_comment="original | summary",
        )


def downgrade():
    _sequence_comment(_SEQ_OLD, _SEQ_NEW)
    with op.batch_alter_table("choice_response", schema=None) as batch_op:
        batch_op.alter_column(
            "format",
            existing_type=sa.String(length=64),
            type_=sa.String(length=10),
            existing_nullable=False,
            comment="original | summary",
            existing_comment="format name: original | summary | another format of the block",
        )
        batch_op.drop_constraint(
            "uq_choice_response_participant_id_block_id_trial_index", type_="unique"
        )
        batch_op.create_unique_constraint(
            "uq_choice_response_participant_id_trial_index", ["participant_id", "trial_index"]
        )
