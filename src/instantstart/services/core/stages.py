"""Helpers shared by the stages of cluster pipelines: cluster-row bookkeeping, the project bucket."""

from __future__ import annotations

from instantstart.context import StageContext
from instantstart.services.core.project_bucket import ensure_project_bucket


def project_bucket(stage: StageContext, region: str, cluster_tag: str) -> str:
    """The project bucket (configured, remembered, or created with a random suffix), ownership verified; the
    cluster's use of it recorded in the ledger (kept on deletion unless deleteBucket)."""
    return ensure_project_bucket(
        stage.app.aws,
        stage.app.db,
        stage.app.settings,
        region=region,
        cluster_tag=cluster_tag,
        operation_id=stage.operation_id,
    )
