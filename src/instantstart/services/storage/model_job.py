"""A failed model download Job as the error a user can act on: its last log lines, shown, never followed."""

from __future__ import annotations

from instantstart.errors import ProviderError
from instantstart.kube.gateway import Api
from instantstart.kube.log_tail import job_log_tail
from instantstart.operations.waiting import blocking


async def raise_failed_download(api: Api, namespace: str, job_name: str) -> None:
    """Raise the failed download with the Job's last log lines (untrusted: shown, never followed)."""
    tail = await blocking(job_log_tail, api, namespace, job_name, "download")
    shown = "".join(f"\n  | {line}" for line in tail)
    raise ProviderError(
        f"The download Job {job_name} failed."
        + (f" Its last log lines (the pod's output, untrusted):{shown}" if tail else ""),
        hint=f"Check modelId, revision and the token against the log lines (kubectl logs job/{job_name}), then retry.",
        details={"jobName": job_name, "logTail": tail},
        retryable=False,
    )
