"""Model downloads into an FSx for Lustre claim: no API reads a Lustre file back, so the outcome comes from the
download Job's log and the status from InstantStart's download operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instantstart.errors import ProviderError
from instantstart.manifests import model_download as md
from instantstart.manifests.fsx import FSX_MOUNT
from instantstart.operations.models import OperationView
from instantstart.services.storage.model_params import DEFAULT_HUB, ModelDownloadParams, ModelStatus


def fsx_outcome(lines: list[str], progress: dict[str, int] | None) -> dict[str, Any] | None:
    """What a finished download into an FSx claim did, from its log (FSx has no API to read the manifest back):
    {alreadyPresent, files, totalBytes}, or None when the log shows no finished copy."""
    if "already present" in lines:
        return {"alreadyPresent": True, "files": None, "totalBytes": None}
    done = [ln for ln in lines if ln.startswith("done ") and ln.endswith(" files")]
    if not done:
        return None
    files = int(done[-1].split()[1])
    return {"alreadyPresent": False, "files": files, "totalBytes": (progress or {}).get("bytesTotal", 0)}


def fsx_result(lines: list[str], p: ModelDownloadParams, progress: Any) -> dict[str, Any]:
    """The download stage's outputs for an FSx claim, from the Job's last log lines (the program prints
    `done N files` after writing manifest.json, or `already present`); ProviderError when neither is there."""
    outcome = fsx_outcome(lines, progress)
    if outcome is None:
        raise ProviderError(f"The Job {p.job_name} ended but its log shows no finished copy into {p.claim}.",
                            hint="Retry the download (a model whose manifest.json is there is left alone).")
    path = md.model_dir(p.model_id, p.revision)
    return {**outcome, "progress": progress, "jobName": p.job_name, "hubEndpoint": p.hf_endpoint or DEFAULT_HUB,
            "path": path, "mountPath": f"{FSX_MOUNT}/{path}", "fsxClaim": p.claim}


def fsx_status(base: ModelStatus, latest: OperationView | None,
               progress: Callable[[], dict[str, int] | None]) -> ModelStatus:
    """model_download_status for an FSx claim from the model's latest download operation (blocking `progress`
    reads the running Job's last progress line)."""
    if latest is None:
        return base
    if latest.status == "SUCCEEDED":
        outputs = latest.stages[0].outputs if latest.stages else {}
        return base.model_copy(update={"state": "COMPLETE", "total_bytes": outputs.get("totalBytes")})
    if latest.status in ("FAILED", "CANCELLED"):
        return base.model_copy(update={"state": "FAILED"})
    return base.model_copy(update={"state": "RUNNING", "progress": progress()})
