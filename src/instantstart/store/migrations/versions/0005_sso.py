"""Users signed in through the OpenID Connect provider: subject, email and mapped teams.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from instantstart.store.models import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sso_identities",
        sa.Column("subject", sa.String(255), primary_key=True),
        sa.Column("user", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("teams", sa.Text, nullable=False),
        sa.Column("signed_in_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_sso_identities_user", "sso_identities", ["user"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_sso_identities_user", "sso_identities")
    op.drop_table("sso_identities")
