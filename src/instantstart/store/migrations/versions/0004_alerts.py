"""Alerts opened and resolved by the alert evaluator, with their notification deliveries.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from instantstart.store.models import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("rule", sa.String(60), nullable=False),
        sa.Column("cluster_tag", sa.String(100), nullable=False),
        sa.Column("subject", sa.String(300), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("opened_at", UTCDateTime(), nullable=False),
        sa.Column("resolved_at", UTCDateTime(), nullable=True),
        sa.Column("deliveries", sa.JSON, nullable=False),
    )
    op.create_index("ix_alerts_state", "alerts", ["state", "cluster_tag"])
    op.create_index("ix_alerts_key", "alerts", ["rule", "cluster_tag", "subject"])


def downgrade() -> None:
    op.drop_table("alerts")
