"""Annotation items by block and position: the console's item table is paged, and allocation
looks for free items, as an index range whatever the number of items (63,000 in a large study).

Written by hand (one index).

Revision ID: 0011_annotation_item_order
Revises: 0010_enrolment_limit
Create Date: 2026-11-25 14:00:00

"""

from alembic import op


# revision identifiers, used by Alembic.
revision = "0011_annotation_item_order"
down_revision = "0010_enrolment_limit"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_annotation_item_block_position",
        "annotation_item",
        ["study_id", "block_id", "is_gold", "position"],
        unique=False,
    )


def downgrade():
    op.drop_index("ix_annotation_item_block_position", table_name="annotation_item")
