"""Deleting an FSx for Lustre file system this control plane created, once its claim is gone: an operation
(DELETING takes minutes), then the file system's Lustre security group; both leave the ledger."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from instantstart.aws import ec2_network
from instantstart.aws import fsx as fsx_api
from instantstart.aws.errors import error_code
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import DependencyFailed, NotFound
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import get_cluster
from instantstart.services.core.ledger import mark_gone, resources_of
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)

DELETE_KIND = "fsx_file_system_delete"
DELETE_TIMEOUT = 3600


def created_file_systems(app: AppContext, tag: str) -> dict[str, dict[str, Any]]:
    """File system id → ledger details, for the file systems fsx_storage_create made for this cluster."""
    return {
        r.resource_id: dict(r.details or {})
        for r in resources_of(app.db, tag)
        if r.resource_type == "fsx:file-system"
    }



class FsxDeleteParams(ParamsModel):
    """Stored params of fsx_file_system_delete."""

    cluster_tag: str
    region: str
    file_system_id: str
    security_group_id: str | None = None


async def stage_delete(stage: StageContext) -> dict[str, Any]:
    """DeleteFileSystem (waiting out CREATING first), wait until it is gone, then delete its security group;
    both leave the ledger. Gone already is success."""
    p = stage.params_as(FsxDeleteParams)
    app = stage.app
    requested: dict[str, bool] = {}

    async def gone() -> tuple[bool, str]:
        state = await blocking(fsx_api.lifecycle, app.aws, p.region, p.file_system_id)
        if state is None:
            return True, f"file system {p.file_system_id}: deleted"
        if state in ("AVAILABLE", "FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE") and not requested:
            await blocking(fsx_api.delete, app.aws, p.region, p.file_system_id)
            requested["at"] = True
            state = "DELETING"
        return False, f"file system {p.file_system_id}: {state}"

    await wait_until(stage, gone, limit_seconds=DELETE_TIMEOUT, what=f"deletion of {p.file_system_id}")
    await blocking(mark_gone, app.db, resource_type="fsx:file-system", resource_id=p.file_system_id,
                   region=p.region)
    if p.security_group_id:
        try:
            await blocking(ec2_network.delete_security_group, app.aws, p.region, p.security_group_id)
        except Exception as exc:
            code = error_code(exc)
            if code == "DependencyViolation":
                raise DependencyFailed(f"security group {p.security_group_id} is still in use; retrying.",
                                       retryable=True) from exc
            if not code.endswith("NotFound"):
                raise
        await blocking(mark_gone, app.db, resource_type="ec2:security-group", resource_id=p.security_group_id,
                       region=p.region)
    return {"fileSystemId": p.file_system_id, "securityGroupId": p.security_group_id, "deleted": True}


KINDS.register(
    OperationKind(
        name=DELETE_KIND,
        params=FsxDeleteParams,
        stages=(StageSpec("delete", stage_delete, max_attempts=5, timeout_seconds=DELETE_TIMEOUT + 300),),
    )
)


async def delete_created_file_system(ctx: CallContext, row: ClusterRow, file_system_id: str) -> OperationRef | None:
    """Start deleting `file_system_id` when fsx_storage_create made it for this cluster (None otherwise)."""
    ours = await blocking(created_file_systems, ctx.app, row.tag)
    if file_system_id not in ours:
        return None
    params = FsxDeleteParams(cluster_tag=row.tag, region=row.region, file_system_id=file_system_id,
                             security_group_id=ours[file_system_id].get("securityGroupId"))
    return await ctx.app.runner.submit(
        DELETE_KIND,
        params,
        target=f"fsx:{row.tag}:{file_system_id}",
        idempotency_key=None,
        status_tool="operation_get",
        poll_after_seconds=15,
    )


# -- cluster deletion: the claims first, then the file system ------------------------------------------------


def delete_for_cluster(app: AppContext, res: dict[str, Any]) -> bool:
    """Cluster deletion's deleter of an "fsx:file-system" ledger row: the claim and PV made for it first (when
    the cluster's Kubernetes API still answers), then DeleteFileSystem. False: the caller waits until it is gone."""
    made = res.get("details") or {}  # what the ledger recorded with the file system
    claim, namespace = made.get("claim"), made.get("namespace") or "default"
    if claim:
        try:
            row = get_cluster(app.db, made.get("clusterTag") or res["clusterTag"])
            api = kube_api(app.kube, row.eks_cluster_name, row.region)
            for action, fn, args in (
                (f"delete claim {namespace}/{claim}", core_kinds.delete_claim, (api, claim, namespace)),
                (f"delete volume {claim}-pv", core_kinds.delete_volume, (api, f"{claim}-pv")),
            ):
                with contextlib.suppress(NotFound):
                    kube_call(action, fn, *args)
        except Exception as exc:  # the cluster or its API is gone already: nothing mounts the file system
            log.info("FSx claim %s/%s not deleted through Kubernetes: %s", namespace, claim, exc)
    if fsx_api.lifecycle(app.aws, res["region"], res["resourceId"]) == "CREATING":
        raise DependencyFailed(f"FSx file system {res['resourceId']} is still CREATING; retrying.", retryable=True)
    fsx_api.delete(app.aws, res["region"], res["resourceId"])
    return False


def still_there(app: AppContext, res: dict[str, Any]) -> bool:
    """Whether the file system of an "fsx:file-system" ledger row still exists (DELETING counts)."""
    return fsx_api.lifecycle(app.aws, res["region"], res["resourceId"]) is not None
