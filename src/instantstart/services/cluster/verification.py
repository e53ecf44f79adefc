"""The verification stage: wait until the new cluster's status is ready, or fail naming what is not."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from instantstart.context import StageContext
from instantstart.errors import PreconditionFailed, ProviderError, VerificationFailed
from instantstart.manifests.storage import DEFAULT_CLAIM
from instantstart.operations.kinds import StageSpec
from instantstart.operations.waiting import next_poll
from instantstart.services.base.cluster_status import collect_status
from instantstart.services.base.params import VerificationParams
from instantstart.services.base.registry import record_details

VERIFY_WAIT_SECONDS = 20 * 60


async def stage_verification(stage: StageContext) -> dict[str, Any]:
    """Wait until the cluster verifies (nodes Ready/schedulable matching the instance groups, GPU totals,
    the storage claim Bound, dependencies healthy where recorded); fail with the remaining problems.
    The cluster row's stage "verification" follows this stage (the engine mirrors it)."""
    p = stage.params_as(VerificationParams)
    tag = p.cluster_tag
    claim = (p.storage.name if p.storage else None) or DEFAULT_CLAIM
    limit = float(p.verify_wait_seconds or VERIFY_WAIT_SECONDS)
    started = time.monotonic()
    deadline = started + limit
    last = ""
    while True:
        status = await collect_status(stage.app, tag, (claim,))
        if status.hyperpod_status in ("Failed", "Deleting", "NOT_FOUND"):
            error = PreconditionFailed if status.hyperpod_status == "NOT_FOUND" else ProviderError
            raise error(
                status.problems[0] if status.problems else f"HyperPod cluster is {status.hyperpod_status}.",
                hint="Create the HyperPod cluster (hyperpod_create) or fix its failure, then retry this operation.",
                retryable=False,
            )
        if status.ready:
            break
        message = "verifying: " + "; ".join(status.problems)
        if message != last:
            await stage.progress(message[:2000])
            last = message
        if time.monotonic() > deadline:
            raise VerificationFailed(
                f"The cluster did not verify within {limit:.0f}s: " + "; ".join(status.problems),
                hint="cluster_get_status shows each problem; fix the one named (nodes, device plugin, storage "
                "claim, dependencies) and retry the operation (operation_retry).",
                retryable=True,
            )
        await asyncio.sleep(next_poll(time.monotonic() - started, stage.app.settings.poll_seconds))
    summary = {
        "nodesReadySchedulable": status.nodes_ready_schedulable,
        "accelerators": [a.model_dump(by_alias=True) for a in status.accelerators],
        "storageClaim": claim,
        "dependenciesRecorded": status.dependencies_recorded,
    }
    await record_details(stage, tag, verification=summary)
    await stage.progress(
        f"verified: {status.nodes_ready_schedulable} node(s) Ready and schedulable, "
        + ", ".join(f"{a.instance_type}: {a.gpu_total} GPU" for a in status.accelerators)
        + f", claim {claim} Bound"
    )
    return summary


VERIFICATION_STAGE = StageSpec(
    "verification", stage_verification, max_attempts=3, timeout_seconds=VERIFY_WAIT_SECONDS + 300, backoff_seconds=10
)
