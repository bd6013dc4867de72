"""Study bundles: the files each study version was loaded with (YAML and stimulus files).

Revision ID: 0004_bundles
Revises: 0003_sentiment
Create Date: 2026-11-23 20:00:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0004_bundles'
down_revision = '0003_sentiment'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('study_file',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False, comment='study version loaded with this file'),
    sa.Column('name', sa.String(length=200), nullable=False, comment='bundle-relative POSIX name'),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('content', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], name=op.f('fk_study_file_study_id_study')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_file')),
    sa.UniqueConstraint('study_id', 'version', 'name', name=op.f('uq_study_file_study_id_version_name'))
    )
    with op.batch_alter_table('study_file', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_file_study_id'), ['study_id'], unique=False)


def downgrade():
    with op.batch_alter_table('study_file', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_file_study_id'))

    op.drop_table('study_file')
