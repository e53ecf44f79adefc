"""Helpers shared by the stages of cluster pipelines: cluster-row bookkeeping, the project bucket."""

from __future__ import annotations

from typing import Any

from instantstart.context import StageContext
from instantstart.operations.waiting import blocking
from instantstart.services.core.project_bucket import ensure_project_bucket
from instantstart.services.core.registry import update_cluster


async def record_details(stage: StageContext, tag: str, **details: Any) -> None:
    """Merge facts a stage learned (network ids, outputs) into the cluster row's details. Stage statuses are
    not written here: the engine mirrors them (see `mirror_pipeline_stages`)."""
    await blocking(update_cluster, stage.app.db, tag, details=details)


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
