"""The persistent timeline of clusters, nodes, jobs and endpoints.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from instantstart.store.models import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "timeline",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster_tag", sa.String(100), nullable=False),
        sa.Column("dedupe_key", sa.String(300), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("object_kind", sa.String(60), nullable=False),
        sa.Column("object_name", sa.String(300), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(200), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("first_at", UTCDateTime(), nullable=False),
        sa.Column("last_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("cluster_tag", "dedupe_key", name="uq_timeline_dedupe"),
    )
    op.create_index("ix_timeline_cluster_last", "timeline", ["cluster_tag", "last_at"])
    op.create_index("ix_timeline_object", "timeline", ["cluster_tag", "object_kind", "object_name"])


def downgrade() -> None:
    op.drop_table("timeline")
