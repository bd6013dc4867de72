"""Sentiment annotation: items, reservations/labels, qualification results, end reason.

Generated with `flask --app webapp db migrate` and reviewed: timestamps are plain
`DateTime(timezone=True)`; the annotation state and platform are VARCHAR enums
(native_enum=False), so `mturk_batch` needs no ALTER TYPE. `(item_pk, participant_id)` is
unique: nobody labels an item twice.

Revision ID: 0003_sentiment
Revises: 0002_console
Create Date: 2026-11-21 19:49:36.533682

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0003_sentiment'
down_revision = '0002_console'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('annotation_item',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('block_id', sa.String(length=64), nullable=False),
    sa.Column('item_id', sa.String(length=64), nullable=False, comment='item ID from the item CSV'),
    sa.Column('position', sa.Integer(), nullable=False, comment='0-based row in the item CSV'),
    sa.Column('text', sa.Text(), nullable=False, comment='the text shown'),
    sa.Column('base_sentiment', sa.String(length=10), nullable=False, comment='positive | negative'),
    sa.Column('is_gold', sa.Boolean(), nullable=False, comment='gold/attention item'),
    sa.Column('gold_label', sa.String(length=10), nullable=True, comment='answer of a gold item'),
    sa.Column('extra', sa.JSON(), nullable=False, comment='extra CSV columns'),
    sa.Column('study_version', sa.Integer(), nullable=False, comment='study version last synced'),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_annotation_item_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_annotation_item')),
    sa.UniqueConstraint('study_id', 'block_id', 'item_id', name=op.f('uq_annotation_item_study_id_block_id_item_id'))
    )
    with op.batch_alter_table('annotation_item', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_annotation_item_study_id'), ['study_id'], unique=False)

    op.create_table('annotation',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_pk', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('trial_index', sa.Integer(), nullable=False, comment='0-based position in the batch'),
    sa.Column('state', sa.Enum('reserved', 'confirmed', 'expired', 'surplus', name='annotationstate', native_enum=False, length=20), nullable=False),
    sa.Column('reserved_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('label', sa.String(length=10), nullable=True, comment='positive | negative | neutral'),
    sa.Column('surplus', sa.Boolean(), nullable=False, comment='label arrived after its reservation expired'),
    sa.Column('rt_ms', sa.Integer(), nullable=True, comment='client time to label, ms'),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('external_ref', sa.String(length=128), nullable=True, comment='MTurk AssignmentId of an imported label'),
    sa.ForeignKeyConstraint(['item_pk'], ['annotation_item.id'], name=op.f('fk_annotation_item_pk_annotation_item')),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_annotation_participant_id_participant')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_annotation')),
    sa.UniqueConstraint('item_pk', 'participant_id', name=op.f('uq_annotation_item_pk_participant_id'))
    )
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_annotation_external_ref'), ['external_ref'], unique=False)
        batch_op.create_index(batch_op.f('ix_annotation_item_pk'), ['item_pk'], unique=False)
        batch_op.create_index(batch_op.f('ix_annotation_participant_id'), ['participant_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_annotation_state'), ['state'], unique=False)

    op.create_table('qualification_result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('qualification', sa.String(length=64), nullable=False, comment='qualification name'),
    sa.Column('platform', sa.Enum('prolific', 'mturk', 'link', 'mturk_batch', name='platform', native_enum=False, length=20), nullable=False),
    sa.Column('external_id', sa.String(length=128), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('n_correct', sa.Integer(), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False, comment='where it was taken'),
    sa.Column('participant_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participant.id'], name=op.f('fk_qualification_result_participant_id_participant')),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_qualification_result_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_qualification_result')),
    sa.UniqueConstraint('qualification', 'platform', 'external_id', name=op.f('uq_qualification_result_qualification_platform_external_id'))
    )
    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.add_column(sa.Column('end_reason', sa.String(length=40), nullable=True, comment='why a session ended early: qualification_failed, study_full'))



def downgrade():
    with op.batch_alter_table('participant', schema=None) as batch_op:
        batch_op.drop_column('end_reason')

    op.drop_table('qualification_result')
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_annotation_state'))
        batch_op.drop_index(batch_op.f('ix_annotation_participant_id'))
        batch_op.drop_index(batch_op.f('ix_annotation_item_pk'))
        batch_op.drop_index(batch_op.f('ix_annotation_external_ref'))

    op.drop_table('annotation')
    with op.batch_alter_table('annotation_item', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_annotation_item_study_id'))

    op.drop_table('annotation_item')
