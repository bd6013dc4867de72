"""Researcher session version: logout and password changes end every console session.

Written by hand (one column): existing accounts start at version 0, so sessions made before
the upgrade (which carry no version) are logged out once.

Revision ID: 0006_session_version
Revises: 0005_platform
Create Date: 2026-11-23 19:45:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "0006_session_version"
down_revision = "0005_platform"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("researcher", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "session_version",
                sa.Integer(),
                server_default="0",
                nullable=False,
                comment="stored in the console session at login; logout and password changes bump it",
            )
        )


def downgrade():
    with op.batch_alter_table("researcher", schema=None) as batch_op:
        batch_op.drop_column("session_version")
