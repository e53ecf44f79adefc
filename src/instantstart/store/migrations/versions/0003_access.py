"""Users, hashed API tokens and the audit trail.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from instantstart.store.models import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_api_tokens_user", "api_tokens", ["user"])
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_name", sa.String(64), nullable=False),
        sa.Column("face", sa.String(8), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("operation", sa.String(64), nullable=False),
        sa.Column("cluster_tag", sa.String(63), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(40), nullable=False),
        sa.Column("operation_id", sa.String(40), nullable=False),
    )
    op.create_index("ix_audit_at", "audit", ["at"])
    op.create_index("ix_audit_user_at", "audit", ["user", "at"])


def downgrade() -> None:
    op.drop_table("audit")
    op.drop_table("api_tokens")
    op.drop_table("users")
