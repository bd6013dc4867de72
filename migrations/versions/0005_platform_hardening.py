"""Platform hardening: qualification results scoped by owner; MTurk assignment history.

- ``qualification_result.scope``: results were keyed by (qualification, platform, id) only, so
  another researcher's study with the same qualification name could fail or pass anyone. Each
  existing result moves into the scope of the study it was taken in (``researcher:<owner>``,
  or ``server`` for unowned studies); the old key was unique, so no two rows collide.
- ``mturk_assignment``: every assignment a worker's session arrived with; the completion form
  posts the one of the visit that finishes. Existing MTurk identities become one row each.

Revision ID: 0005_platform
Revises: 0004_bundles
Create Date: 2026-11-23 19:55:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0005_platform'
down_revision = '0004_bundles'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('qualification_result', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=40), nullable=True, comment='who shares the result: researcher:<owner id> or server'))
    op.execute(
        "UPDATE qualification_result SET scope = COALESCE("
        "(SELECT 'researcher:' || CAST(study.owner_id AS VARCHAR(20)) FROM study "
        "WHERE study.id = qualification_result.study_id AND study.owner_id IS NOT NULL), "
        "'server')"
    )
    with op.batch_alter_table('qualification_result', schema=None) as batch_op:
        batch_op.alter_column('scope', existing_type=sa.String(length=40), nullable=False)
        batch_op.drop_constraint('uq_qualification_result_qualification_platform_external_id', type_='unique')
        batch_op.create_unique_constraint('uq_qualification_result_scope', ['scope', 'qualification', 'platform', 'external_id'])

    op.create_table('mturk_assignment',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.String(length=128), nullable=False, comment='MTurk assignmentId'),
    sa.Column('hit_id', sa.String(length=128), nullable=False, comment='MTurk hitId'),
    sa.Column('return_url', sa.String(length=500), nullable=False, comment='turkSubmitTo (MTurk host)'),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True, comment='last time the completion form was shown for this assignment'),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_mturk_assignment_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_mturk_assignment')),
    sa.UniqueConstraint('participant_id', 'assignment_id', name=op.f('uq_mturk_assignment_participant_id_assignment_id'))
    )
    with op.batch_alter_table('mturk_assignment', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_mturk_assignment_participant_id'), ['participant_id'], unique=False)
    # The assignment each MTurk session has today (its first visit's) starts its history.
    op.execute(
        "INSERT INTO mturk_assignment (participant_id, assignment_id, hit_id, return_url, "
        "first_seen_at, last_seen_at) "
        "SELECT participant_id, external_session_id, external_study_id, return_url, "
        "created_at, created_at FROM platform_identity "
        "WHERE platform = 'mturk' AND external_session_id IS NOT NULL "
        "AND external_study_id IS NOT NULL AND return_url IS NOT NULL"
    )


def downgrade():
    with op.batch_alter_table('mturk_assignment', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_mturk_assignment_participant_id'))
    op.drop_table('mturk_assignment')
    # Back to one result per (qualification, platform, id): keep the earliest of each.
    op.execute(
        "DELETE FROM qualification_result WHERE id NOT IN (SELECT MIN(id) FROM "
        "qualification_result GROUP BY qualification, platform, external_id)"
    )
    with op.batch_alter_table('qualification_result', schema=None) as batch_op:
        batch_op.drop_constraint('uq_qualification_result_scope', type_='unique')
        batch_op.create_unique_constraint('uq_qualification_result_qualification_platform_external_id', ['qualification', 'platform', 'external_id'])
        batch_op.drop_column('scope')
