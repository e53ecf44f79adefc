"""The resource ledger and tagging: every AWS resource created is tagged and recorded for deletion."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from instantstart.store.db import Database
from instantstart.store.models import ResourceRow, utcnow

TAG_CLUSTER = "instantstart:cluster-tag"
TAG_OPERATION = "instantstart:operation-id"
TAG_ROLE = "instantstart:role"
TAG_INSTALLATION = "instantstart:installation"


def aws_tags(
    cluster_tag: str,
    operation_id: str,
    name: str | None = None,
    role: str | None = None,
    installation: str | None = None,
) -> list[dict[str, str]]:
    """The tag list every created resource carries (EC2/IAM/S3 form: [{Key, Value}]); `installation` is the
    id of this control plane's installation (services.core.project_bucket.installation_id)."""
    tags = [{"Key": TAG_CLUSTER, "Value": cluster_tag}, {"Key": TAG_OPERATION, "Value": operation_id}]
    if installation:
        tags.append({"Key": TAG_INSTALLATION, "Value": installation})
    if name:
        tags.append({"Key": "Name", "Value": name})
    if role:
        tags.append({"Key": TAG_ROLE, "Value": role})
    return tags


def tag_map(cluster_tag: str, operation_id: str, installation: str | None = None) -> dict[str, str]:
    """The same tags as a map (EKS, SageMaker tag-map APIs)."""
    tags = {TAG_CLUSTER: cluster_tag, TAG_OPERATION: operation_id}
    if installation:
        tags[TAG_INSTALLATION] = installation
    return tags


def record(
    db: Database,
    *,
    cluster_tag: str,
    operation_id: str | None,
    resource_type: str,
    resource_id: str,
    region: str,
    details: dict[str, Any] | None = None,
) -> None:
    """Add a created resource to the ledger (recording the same resource twice is a no-op)."""
    try:
        with db.session() as session:
            existing = session.scalar(
                select(ResourceRow).where(
                    ResourceRow.resource_type == resource_type,
                    ResourceRow.resource_id == resource_id,
                    ResourceRow.region == region,
                )
            )
            if existing is not None:
                existing.deleted_at = None
                return
            session.add(
                ResourceRow(
                    cluster_tag=cluster_tag,
                    operation_id=operation_id,
                    resource_type=resource_type,
                    resource_id=resource_id,
                    region=region,
                    details=details or {},
                    created_at=utcnow(),
                )
            )
    except IntegrityError:
        return


def resources_of(db: Database, cluster_tag: str, include_deleted: bool = False) -> list[ResourceRow]:
    """Ledger rows of a cluster, in creation order."""
    with db.session() as session:
        query = select(ResourceRow).where(ResourceRow.cluster_tag == cluster_tag)
        if not include_deleted:
            query = query.where(ResourceRow.deleted_at.is_(None))
        rows = list(session.scalars(query.order_by(ResourceRow.id)).all())
        for row in rows:
            session.expunge(row)
        return rows


def mark_deleted(db: Database, row_id: int) -> None:
    """A ledger resource is gone."""
    with db.session() as session:
        row = session.get(ResourceRow, row_id)
        if row is not None:
            row.deleted_at = utcnow()


DELETION_STARTED_BY = "deletionStartedBy"


def mark_deleting(db: Database, row_id: int, operation_id: str | None) -> None:
    """A ledger resource's delete call is being made by `operation_id` (None: the call failed, it stays). When
    that operation ends before it can mark the resource deleted (cancelled while AWS still deletes it), the ledger
    reconcile reports the row as a phantom that names the operation (operation_retry of it marks it deleted)."""
    with db.session() as session:
        row = session.get(ResourceRow, row_id)
        if row is not None:
            details = {k: v for k, v in (row.details or {}).items() if k != DELETION_STARTED_BY}
            row.details = {**details, DELETION_STARTED_BY: operation_id} if operation_id else details


def mark_gone(db: Database, *, resource_type: str, resource_id: str, region: str) -> None:
    """Mark a ledgered resource deleted because a feature removed it (no row: nothing to do)."""
    with db.session() as session:
        row = session.scalar(
            select(ResourceRow).where(
                ResourceRow.resource_type == resource_type,
                ResourceRow.resource_id == resource_id,
                ResourceRow.region == region,
            )
        )
        if row is not None and row.deleted_at is None:
            row.deleted_at = utcnow()
