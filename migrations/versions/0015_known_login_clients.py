"""Known login clients: the login limiter keeps a row for each (username, client) that logged in,
so the account's owner can still log in from their own client while many others fail.

- ``login_attempt.succeeded``: NOT NULL, false by default. False rows are failures (kept a day),
  true rows the clients an account logged in from (kept 90 days).

Written by hand.

Revision ID: 0015_known_login_clients
Revises: 0014_choice_blocks_formats
Create Date: 2026-12-02 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0015_known_login_clients"
down_revision = "0014_choice_blocks_formats"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "login_attempt",
        sa.Column(
            "succeeded",
            sa.Boolean(),
            server_default=sa.false(),
            nullable=False,
            comment="a login that succeeded: the account's known client, not a failure",
        ),
    )


def downgrade():
    with op.batch_alter_table("login_attempt") as batch:  # nothing refers to this table
        batch.drop_column("succeeded")
