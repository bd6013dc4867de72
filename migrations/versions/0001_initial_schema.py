"""Initial schema: studies, participants, identities, responses, page visits, researchers.

Generated with `flask --app webapp db migrate` and reviewed: timestamps are plain
`DateTime(timezone=True)` here (the model's UTCDateTime decorator only normalises values in
Python); statuses and platforms are VARCHAR with CHECK-free enums (native_enum=False) so new
values need no ALTER TYPE.

Revision ID: 0001_initial
Revises: 
Create Date: 2026-11-21 19:31:51.742667

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('researcher',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('password_hash', sa.String(length=256), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_researcher')),
    sa.UniqueConstraint('username', name=op.f('uq_researcher_username'))
    )
    op.create_table('study',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('slug', sa.String(length=80), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('definition', sa.JSON(), nullable=False, comment='validated study definition (YAML with referenced files inlined)'),
    sa.Column('definition_hash', sa.String(length=64), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('export_salt', sa.String(length=64), nullable=False, comment='HMAC key of participant_id'),
    sa.Column('source_path', sa.String(length=500), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study')),
    sa.UniqueConstraint('slug', name=op.f('uq_study_slug'))
    )
    op.create_table('participant',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('code', sa.String(length=20), nullable=False, comment='pseudonymous participant_id: p_ + 16 hex of an HMAC'),
    sa.Column('platform', sa.Enum('prolific', 'mturk', 'link', name='platform', native_enum=False, length=20), nullable=False),
    sa.Column('seed', sa.BigInteger(), nullable=False, comment='randomisation seed (re-derives order)'),
    sa.Column('sequence', sa.String(length=1), nullable=False, comment='format sequence A or B'),
    sa.Column('status', sa.Enum('started', 'screened_out', 'completed', 'returned', 'timed_out', name='participantstatus', native_enum=False, length=20), nullable=False),
    sa.Column('block_index', sa.Integer(), nullable=False, comment='current task block'),
    sa.Column('step', sa.Integer(), nullable=False, comment='current page within the block'),
    sa.Column('page_seq', sa.Integer(), nullable=False, comment="count of accepted submissions; the page token's counter"),
    sa.Column('quiz_attempts', sa.Integer(), nullable=False),
    sa.Column('quiz_passed', sa.Boolean(), nullable=True),
    sa.Column('attention_passed', sa.Boolean(), nullable=True),
    sa.Column('is_preview', sa.Boolean(), nullable=False),
    sa.Column('study_version', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_participant_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_participant')),
    sa.UniqueConstraint('study_id', 'code', name=op.f('uq_participant_study_id_code'))
    )
    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_participant_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_participant_study_id'), ['study_id'], unique=False)

    op.create_table('choice_response',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('block_id', sa.String(length=64), nullable=False),
    sa.Column('trial_index', sa.Integer(), nullable=False, comment='0-based position in the sequence'),
    sa.Column('pair_id', sa.String(length=64), nullable=False),
    sa.Column('format', sa.String(length=10), nullable=False, comment='original | summary'),
    sa.Column('target_side', sa.String(length=5), nullable=False, comment='left | right'),
    sa.Column('chosen_side', sa.String(length=5), nullable=False, comment='left | right'),
    sa.Column('chose_target', sa.Boolean(), nullable=False),
    sa.Column('other_price_usd', sa.Float(), nullable=False, comment='price of the product not chosen'),
    sa.Column('wtp_premium_usd', sa.Float(), nullable=True, comment='premium over $X, >= 0'),
    sa.Column('wtp_premium_pct', sa.Float(), nullable=True, comment='100 * premium / $X'),
    sa.Column('rt_ms', sa.Integer(), nullable=True, comment='client time to choose, ms'),
    sa.Column('wtp_rt_ms', sa.Integer(), nullable=True, comment='client time on WTP page, ms'),
    sa.Column('server_rt_ms', sa.Integer(), nullable=True, comment='server time to choose, ms'),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('wtp_answered_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_choice_response_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_choice_response')),
    sa.UniqueConstraint('participant_id', 'trial_index', name=op.f('uq_choice_response_participant_id_trial_index'))
    )
    with op.batch_alter_table('choice_response', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_choice_response_participant_id'), ['participant_id'], unique=False)

    op.create_table('page_visit',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('page_seq', sa.Integer(), nullable=False),
    sa.Column('page', sa.String(length=100), nullable=False, comment='block id / page name'),
    sa.Column('shown_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('rt_ms', sa.Integer(), nullable=True, comment='client-measured, ms'),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_page_visit_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_page_visit')),
    sa.UniqueConstraint('participant_id', 'page_seq', name=op.f('uq_page_visit_participant_id_page_seq'))
    )
    with op.batch_alter_table('page_visit', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_page_visit_participant_id'), ['participant_id'], unique=False)

    op.create_table('platform_identity',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('platform', sa.Enum('prolific', 'mturk', 'link', name='platform', native_enum=False, length=20), nullable=False),
    sa.Column('external_id', sa.String(length=128), nullable=False, comment="PROLIFIC_PID, MTurk workerId or the link's participant"),
    sa.Column('external_study_id', sa.String(length=128), nullable=True),
    sa.Column('external_session_id', sa.String(length=128), nullable=True),
    sa.Column('return_url', sa.String(length=500), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_platform_identity_participant_id_participant')),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_platform_identity_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_platform_identity')),
    sa.UniqueConstraint('participant_id', name=op.f('uq_platform_identity_participant_id')),
    sa.UniqueConstraint('study_id', 'platform', 'external_id', name=op.f('uq_platform_identity_study_id_platform_external_id'))
    )
    op.create_table('quiz_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('block_id', sa.String(length=64), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False, comment='1-based attempt number'),
    sa.Column('answers', sa.JSON(), nullable=False),
    sa.Column('n_correct', sa.Integer(), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('rt_ms', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_quiz_attempt_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quiz_attempt')),
    sa.UniqueConstraint('participant_id', 'block_id', 'attempt', name=op.f('uq_quiz_attempt_participant_id_block_id_attempt'))
    )
    with op.batch_alter_table('quiz_attempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_quiz_attempt_participant_id'), ['participant_id'], unique=False)

    op.create_table('task_response',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('block_id', sa.String(length=64), nullable=False),
    sa.Column('task_type', sa.String(length=40), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('rt_ms', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_task_response_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_response')),
    sa.UniqueConstraint('participant_id', 'block_id', 'step', name=op.f('uq_task_response_participant_id_block_id_step'))
    )
    with op.batch_alter_table('task_response', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_task_response_participant_id'), ['participant_id'], unique=False)



def downgrade():
    with op.batch_alter_table('task_response', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_response_participant_id'))

    op.drop_table('task_response')
    with op.batch_alter_table('quiz_attempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_quiz_attempt_participant_id'))

    op.drop_table('quiz_attempt')
    op.drop_table('platform_identity')
    with op.batch_alter_table('page_visit', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_page_visit_participant_id'))

    op.drop_table('page_visit')
    with op.batch_alter_table('choice_response', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_choice_response_participant_id'))

    op.drop_table('choice_response')
    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_participant_study_id'))
        batch_op.drop_index(batch_op.f('ix_participant_status'))

    op.drop_table('participant')
    op.drop_table('study')
    op.drop_table('researcher')
