"""Initial schema: operations, clusters, resource ledger, state.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

from instantstart.store.models import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "operations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(100), nullable=False),
        sa.Column("target", sa.String(200)),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stages", sa.JSON, nullable=False),
        sa.Column("error", sa.JSON),
        sa.Column("result", sa.JSON),
        sa.Column("active_target", sa.String(200), unique=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime()),
        sa.Column("finished_at", UTCDateTime()),
        sa.Column("lease_owner", sa.String(120)),
        sa.Column("lease_token", sa.String(64)),
        sa.Column("lease_expires_at", UTCDateTime()),
        sa.UniqueConstraint("kind", "idempotency_key", name="uq_operations_kind_idempotency_key"),
    )
    op.create_index("ix_operations_status", "operations", ["status"])
    op.create_index("ix_operations_target", "operations", ["target"])
    op.create_index("ix_operations_created_at", "operations", ["created_at"])
    op.create_table(
        "clusters",
        sa.Column("tag", sa.String(63), primary_key=True),
        sa.Column("region", sa.String(32), nullable=False),
        sa.Column("eks_cluster_name", sa.String(100), nullable=False),
        sa.Column("hyperpod_cluster_name", sa.String(63)),
        sa.Column("imported", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("stages", sa.JSON, nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "resources",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster_tag", sa.String(63), nullable=False),
        sa.Column("operation_id", sa.String(40)),
        sa.Column("resource_type", sa.String(80), nullable=False),
        sa.Column("resource_id", sa.String(400), nullable=False),
        sa.Column("region", sa.String(32), nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
        sa.UniqueConstraint("resource_type", "resource_id", "region", name="uq_resources_type_id_region"),
    )
    op.create_index("ix_resources_cluster_tag", "resources", ["cluster_tag"])
    op.create_table(
        "state",
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.JSON),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("state")
    op.drop_index("ix_resources_cluster_tag", "resources")
    op.drop_table("resources")
    op.drop_table("clusters")
    op.drop_index("ix_operations_created_at", "operations")
    op.drop_index("ix_operations_target", "operations")
    op.drop_index("ix_operations_status", "operations")
    op.drop_table("operations")
