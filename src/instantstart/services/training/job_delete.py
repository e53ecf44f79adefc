"""Deleting a training job of either path (HyperPodPyTorchJob, or RayJob with its Ray cluster) and its pods."""

from __future__ import annotations

import contextlib
from typing import Any

from instantstart.catalog import operation
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import NotFound
from instantstart.kube import core_kinds, custom_objects, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import training as training_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.training import ray_jobs
from instantstart.services.training.jobs import JobRef, _row, read_job


class DeleteParams(ParamsModel):
    """What a deletion records."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str


@operation("training_job_delete", destructive=True, idempotent=True, method="POST", path="/training/jobs/delete",
           completion="operation_get", example={"jobName": "missing-job"})
async def training_job_delete(ctx: CallContext, req: JobRef) -> OperationRef:
    """Delete a training job of either path (HyperPodPyTorchJob, or RayJob with its Ray cluster) and its pods
    (their GPUs are released); finished when the pods are gone."""
    row = await _row(ctx.app, req.cluster_tag)
    await blocking(read_job, ctx.app, row, req.job_name, req.namespace)
    params = DeleteParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                          name=req.job_name, namespace=req.namespace)
    return await submit_for_cluster(ctx, "training_job_delete", row.tag, params, status_tool="operation_get",
                                    poll_after_seconds=5)


def _delete(app: AppContext, p: DeleteParams) -> int:
    api = kube_api(app.kube, p.eks_cluster, p.region)
    with contextlib.suppress(NotFound):
        kube_call(
            "delete the HyperPodPyTorchJob",
            custom_objects.delete_custom,
            api,
            training_manifests.GROUP,
            training_manifests.VERSION,
            p.namespace,
            training_manifests.PLURAL,
            p.name,
            propagation_policy="Background",
        )
    kube_call("delete the job's pods", core_kinds.delete_pods, api, p.namespace,
              label_selector=f"{training_manifests.POD_JOB_LABEL}={p.name}")
    left = kube_call("list the job's pods", core_kinds.list_pods, api, p.namespace,
                     label_selector=f"{training_manifests.POD_JOB_LABEL}={p.name}")
    return len(wire.items(left))


async def stage_delete(stage: StageContext) -> dict[str, Any]:
    """Delete the job and its pods; wait until no pod is left."""
    p = stage.params_as(DeleteParams)

    ray_cluster: list[str | None] = [None]

    def delete_both() -> int:
        api = kube_api(stage.app.kube, p.eks_cluster, p.region)
        ray_left, ray_cluster[0] = ray_jobs.delete_ray(api, p.name, p.namespace, ray_cluster[0])
        return _delete(stage.app, p) + ray_left

    async def gone() -> tuple[bool, str]:
        left = await blocking(delete_both)
        return left == 0, f"{left} pod(s) of {p.name} left"

    await wait_until(stage, gone, limit_seconds=600, what=f"pods of {p.name}")
    return {"jobName": p.name, "namespace": p.namespace, "deleted": True}


KINDS.register(OperationKind(name="training_job_delete", params=DeleteParams,
                             stages=(StageSpec("delete", stage_delete, max_attempts=3),)))
