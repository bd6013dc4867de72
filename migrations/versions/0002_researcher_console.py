"""Researcher console: study state and owner, admin role, exclusions, reconciliation status,
audit log, login rate limiting and the bonus ledger.

Generated with `flask --app webapp db migrate` and reviewed: timestamps are plain
`DateTime(timezone=True)`; booleans default to `false()` so PostgreSQL and SQLite both accept
the server default; existing studies become `live` (they were open to participants before).

Revision ID: 0002_console
Revises: 0001_initial
Create Date: 2026-11-21 19:48:20.199318

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0002_console'
down_revision = '0001_initial'
branch_labels = None
depends_on = None


def upgrade():
    
    op.create_table('login_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('client_hash', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_login_attempt'))
    )
    with op.batch_alter_table('login_attempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_login_attempt_client_hash'), ['client_hash'], unique=False)
        batch_op.create_index(batch_op.f('ix_login_attempt_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_login_attempt_username'), ['username'], unique=False)

    op.create_table('audit_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('researcher_id', sa.Integer(), nullable=True),
    sa.Column('actor', sa.String(length=80), nullable=False, comment='username, or cli:<user> for commands'),
    sa.Column('action', sa.String(length=60), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['researcher_id'], ['researcher.id'], name=op.f('fk_audit_event_researcher_id_researcher')),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_audit_event_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_event'))
    )
    with op.batch_alter_table('audit_event', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_event_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_event_researcher_id'), ['researcher_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_event_study_id'), ['study_id'], unique=False)

    op.create_table('bonus_payment',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('rule', sa.String(length=40), nullable=False),
    sa.Column('amount_cents', sa.Integer(), nullable=False),
    sa.Column('platform', sa.Enum('prolific', 'mturk', 'link', name='platform', native_enum=False, length=20), nullable=False),
    sa.Column('request_token', sa.String(length=64), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.Column('issued_by', sa.String(length=80), nullable=False),
    sa.Column('issued_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_bonus_payment_participant_id_participant')),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_bonus_payment_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bonus_payment')),
    sa.UniqueConstraint('participant_id', 'rule', name=op.f('uq_bonus_payment_participant_id_rule')),
    sa.UniqueConstraint('request_token', name=op.f('uq_bonus_payment_request_token'))
    )
    with op.batch_alter_table('bonus_payment', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bonus_payment_study_id'), ['study_id'], unique=False)

    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.add_column(sa.Column('excluded', sa.Boolean(), server_default=sa.false(), nullable=False, comment='excluded by a researcher'))
        batch_op.add_column(sa.Column('exclusion_reason', sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column('platform_status', sa.String(length=20), nullable=True, comment='status on Prolific/MTurk from the last reconciliation import'))
        batch_op.add_column(sa.Column('reconcile_note', sa.String(length=200), nullable=True, comment='mismatch between this platform and the recruiter, if any'))

    with op.batch_alter_table('researcher', schema=None) as batch_op:
        batch_op.add_column(sa.Column('is_admin', sa.Boolean(), server_default=sa.false(), nullable=False))

    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(sa.Column('state', sa.Enum('draft', 'live', 'paused', 'closed', name='studystate', native_enum=False, length=10), server_default='live', nullable=False))
        batch_op.add_column(sa.Column('owner_id', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_study_owner_id'), ['owner_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_study_owner_id_researcher'), 'researcher', ['owner_id'], ['id'])




def downgrade():
    
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_study_owner_id_researcher'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_study_owner_id'))
        batch_op.drop_column('owner_id')
        batch_op.drop_column('state')

    with op.batch_alter_table('researcher', schema=None) as batch_op:
        batch_op.drop_column('is_admin')

    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.drop_column('reconcile_note')
        batch_op.drop_column('platform_status')
        batch_op.drop_column('exclusion_reason')
        batch_op.drop_column('excluded')

    with op.batch_alter_table('bonus_payment', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bonus_payment_study_id'))

    op.drop_table('bonus_payment')
    with op.batch_alter_table('audit_event', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_event_study_id'))
        batch_op.drop_index(batch_op.f('ix_audit_event_researcher_id'))
        batch_op.drop_index(batch_op.f('ix_audit_event_created_at'))

    op.drop_table('audit_event')
    with op.batch_alter_table('login_attempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_login_attempt_username'))
        batch_op.drop_index(batch_op.f('ix_login_attempt_created_at'))
        batch_op.drop_index(batch_op.f('ix_login_attempt_client_hash'))

    op.drop_table('login_attempt')

