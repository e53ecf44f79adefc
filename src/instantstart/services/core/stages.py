"""Helpers shared by the stages of cluster pipelines: blocking calls, waiting, cluster-row bookkeeping."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anyio import to_thread

from instantstart.aws.errors import error_code, translate
from instantstart.operations.kinds import TemporaryError
from instantstart.operations.runner import StageContext
from instantstart.services.core.ledger import aws_tags, record
from instantstart.services.core.registry import update_cluster

T = TypeVar("T")


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (boto3, the Kubernetes client) in a worker thread."""
    return await to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def wait_until(
    stage: StageContext, check: Callable[[], Awaitable[tuple[bool, str]]], *, limit_seconds: float, what: str
) -> None:
    """Poll `check` every poll interval until it reports done, recording its message as progress."""
    deadline = time.monotonic() + limit_seconds
    last = ""
    while True:
        done, message = await check()
        if message != last:
            await stage.progress(message)
            last = message
        if done:
            return
        if time.monotonic() > deadline:
            raise TemporaryError(
                f"{what} did not finish within {limit_seconds:.0f}s (last: {message}).", code="TIMEOUT"
            )
        await asyncio.sleep(stage.app.settings.poll_seconds)


async def mark(stage: StageContext, tag: str, name: str, status: str, **details: Any) -> None:
    """Record a pipeline stage's status (and details) on the cluster row, for cluster_list_all."""
    await blocking(update_cluster, stage.app.db, tag, stages={name: status}, details=details or None)


def project_bucket(stage: StageContext, region: str, cluster_tag: str) -> str:
    """The project bucket: configured, or instantstart-<account>-<region>; created (tagged) when absent."""
    settings = stage.app.settings
    s3 = stage.app.aws.client("s3", region)
    try:
        if settings.project_bucket:
            name = settings.project_bucket
        else:
            account = stage.app.aws.client("sts", region).get_caller_identity()["Account"]
            name = f"instantstart-{account}-{region}"
        try:
            s3.head_bucket(Bucket=name)
            return name
        except Exception as exc:
            if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
                raise
        kwargs: dict[str, Any] = {"Bucket": name}
        if region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        s3.create_bucket(**kwargs)
        s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": aws_tags(cluster_tag, stage.operation_id)})
        # Kept on cluster deletion unless asked (the ledger marks it so).
        record(
            stage.app.db,
            cluster_tag=(stage.target or "").removeprefix("cluster:"),
            operation_id=stage.operation_id,
            resource_type="s3:bucket",
            resource_id=name,
            region=region,
            details={"keep": True},
        )
        return name
    except Exception as exc:
        raise translate(exc, "ensure the project bucket") from exc
