"""Helpers shared by the stages of cluster pipelines: blocking calls, waiting, cluster-row bookkeeping."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anyio import to_thread

from instantstart.context import StageContext
from instantstart.errors import Timeout
from instantstart.services.core.project_bucket import ensure_project_bucket

T = TypeVar("T")


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (boto3, the Kubernetes client) in a worker thread."""
    return await to_thread.run_sync(functools.partial(fn, *args, **kwargs))


POLL_FRACTION = 0.02  # a wait is polled again after 2 % more of it elapsed …
POLL_FLOOR_SECONDS = 0.2  # … but not sooner than this once it has run that long …
POLL_START_SECONDS = 0.05  # … and its first checks come quickly (0.05, 0.05, 0.1, 0.2 s): many waits are short


def next_poll(elapsed: float, poll_seconds: float) -> float:
    """How long to sleep before the next check of a wait that has run `elapsed` seconds: a fraction of the
    time waited so far (so the check lands at most ~2 % after the wait really ended, whatever its length),
    at least the floor (reached by doubling from a short first sleep, so a wait that ends at once is seen at
    once), never later than the configured poll interval."""
    floor = min(max(elapsed, POLL_START_SECONDS), POLL_FLOOR_SECONDS)
    return min(max(elapsed * POLL_FRACTION, floor), poll_seconds)


async def wait_until(
    stage: StageContext, check: Callable[[], Awaitable[tuple[bool, str]]], *, limit_seconds: float, what: str
) -> None:
    """Poll `check` until it reports done, recording its message as progress. Checks follow the wait:
    frequent at first, then spaced out up to the poll interval (see `next_poll`). Once a check says not yet,
    the stage is waiting (`StageContext.waiting`), which starts the stages declared alongside it."""
    started = time.monotonic()
    deadline = started + limit_seconds
    last = ""
    while True:
        done, message = await check()
        if message != last:
            await stage.progress(message)
            last = message
        if done:
            return
        stage.waiting()  # only the wait is left: stages declared alongside this one may start
        if time.monotonic() > deadline:
            raise Timeout(
                f"{what} did not finish within {limit_seconds:.0f}s (last: {message}).", retryable=True
            )
        await asyncio.sleep(next_poll(time.monotonic() - started, stage.app.settings.poll_seconds))


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
