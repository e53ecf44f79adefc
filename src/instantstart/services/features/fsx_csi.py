"""fsx_storage_create as a workflow: the FSx CSI driver first (the fsxCsiDriver feature enabled when the caller
asked), then storage's file system and claim stages (services/storage/fsx.py, which holds the tool). The kind sits
here, above the domains, because its first stage drives the features workflow."""

from __future__ import annotations

from typing import Any

from instantstart.context import StageContext
from instantstart.errors import PreconditionFailed
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import fsx as fsx_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import get_cluster
from instantstart.services.features.orchestrate import save_result
from instantstart.services.features.toggles import run_feature
from instantstart.services.storage.fsx import (
    BIND_TIMEOUT,
    CREATE_TIMEOUT,
    DRIVER_TIMEOUT,
    KIND,
    driver_hint,
    stage_claim,
    stage_file_system,
)
from instantstart.services.storage.fsx_params import FsxParams
from instantstart.services.storage.s3_claims import csi_driver_installed


async def stage_driver(stage: StageContext) -> dict[str, Any]:
    """The FSx CSI driver must be on the cluster: present → nothing to do; absent → enable the fsxCsiDriver
    feature when the caller asked (enableCsiDriver), else refuse with the hint."""
    p = stage.params_as(FsxParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
    if await blocking(kube_call, "read CSIDriver", csi_driver_installed, api, fsx_manifests.FSX_CSI_DRIVER):
        await stage.progress(f"CSIDriver {fsx_manifests.FSX_CSI_DRIVER} is installed")
        return {"enabled": False}
    if not p.enable_csi_driver:
        raise PreconditionFailed(
            f"The FSx for Lustre CSI driver ({fsx_manifests.FSX_CSI_DRIVER}) is not enabled on cluster "
            f"{p.cluster_tag}.",
            hint=driver_hint(p.name),
            retryable=False,
        )
    await stage.progress("enabling the fsxCsiDriver feature (FSx CSI add-on and its role)")
    result = await run_feature(app, stage, p.cluster_tag, "fsxCsiDriver", {"enabled": True})
    await blocking(save_result, app.db, p.cluster_tag, "fsxCsiDriver", result.to_dict())

    async def registered() -> tuple[bool, str]:
        there = await blocking(kube_call, "read CSIDriver", csi_driver_installed, api, fsx_manifests.FSX_CSI_DRIVER)
        return there, f"CSIDriver {fsx_manifests.FSX_CSI_DRIVER}: {'registered' if there else 'waiting'}"

    await wait_until(stage, registered, limit_seconds=DRIVER_TIMEOUT, what=f"CSIDriver {fsx_manifests.FSX_CSI_DRIVER}")
    return {"enabled": True, "feature": result.to_dict()}


KINDS.register(
    OperationKind(
        name=KIND,
        params=FsxParams,
        stages=(
            StageSpec("csi-driver", stage_driver, max_attempts=3, timeout_seconds=DRIVER_TIMEOUT + 600),
            StageSpec("filesystem", stage_file_system, max_attempts=3, timeout_seconds=CREATE_TIMEOUT + 300),
            StageSpec("claim", stage_claim, max_attempts=5, timeout_seconds=BIND_TIMEOUT + 300),
        ),
    )
)
