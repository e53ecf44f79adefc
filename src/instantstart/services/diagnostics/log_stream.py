"""Live pod logs for the browser: follow one container, resuming after a reconnect without repeating a line."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from anyio import to_thread

from instantstart.context import AppContext
from instantstart.errors import InvalidInput
from instantstart.kube.calls import kube_api
from instantstart.kube.log_follow import follow_log, interrupt
from instantstart.services.base.registry import get_cluster, resolve_tag

RESUME_MARGIN_SECONDS = 2  # asked for beyond the last line's age, for clocks that disagree a little
QUEUE_LINES = 1000


def _parse(stamp: str) -> datetime:
    """An RFC 3339 timestamp with up to nanoseconds (Python keeps microseconds)."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "." + (frac + "000000")[:6]).replace(tzinfo=UTC)


def resume_window(after: str | None) -> int | None:
    """sinceSeconds that surely covers the lines from `after` on (None: from the tail)."""
    if not after:
        return None
    try:
        age = (datetime.now(UTC) - _parse(after)).total_seconds()
    except ValueError:
        raise InvalidInput(f"Invalid input: after: {after[:40]!r} is not an RFC 3339 timestamp",
                           hint="Send back the ts of the last line received.") from None
    return max(1, math.ceil(age) + RESUME_MARGIN_SECONDS)


class Resume:
    """Drops what the client already has: lines older than `after`, and the first `skip` lines stamped `after`."""

    def __init__(self, after: str | None, skip: int) -> None:
        self.after = after
        self.skip = skip

    def keep(self, stamp: str) -> bool:
        """Whether a line with this timestamp is new to the client."""
        if not self.after or not stamp:
            return True
        if stamp < self.after:  # RFC 3339 UTC with fixed-width fractions sorts as text
            return False
        if stamp == self.after and self.skip > 0:
            self.skip -= 1
            return False
        return True


async def stream_log(app: AppContext, *, cluster_tag: str | None, namespace: str, pod: str, container: str | None,
                     after: str | None, skip: int, tail: int) -> AsyncIterator[dict[str, Any]]:
    """Messages for the socket: {"type": "line", "ts", "text"} as lines arrive, then {"type": "end"}."""
    tag = await to_thread.run_sync(resolve_tag, app.db, cluster_tag)
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    since = resume_window(after)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_LINES)
    stop, opened = threading.Event(), list[Any]()
    resume = Resume(after, skip)

    def put(message: dict[str, Any]) -> None:
        if queue.full():  # a reader that cannot keep up loses the oldest lines, never blocks the follower
            queue.get_nowait()
        queue.put_nowait(message)

    def follow() -> None:
        try:
            for stamp, text in follow_log(api, namespace, pod, container, since_seconds=since,
                                          tail_lines=None if after else tail, stop=stop, opened=opened):
                if resume.keep(stamp):
                    loop.call_soon_threadsafe(put, {"type": "line", "ts": stamp, "text": text})
            loop.call_soon_threadsafe(put, {"type": "end"})
        except Exception as exc:  # reported to the socket; the follower thread ends
            message = getattr(exc, "message", None) or str(exc)
            loop.call_soon_threadsafe(put, {"type": "error", "message": str(message)[:300]})

    thread = threading.Thread(target=follow, name=f"log-follow-{pod}", daemon=True)
    thread.start()
    try:
        while True:
            message = await queue.get()
            yield message
            if message["type"] in ("end", "error"):
                return
    finally:
        stop.set()
        for response in opened:  # never close it here: that blocks until a quiet container writes again
            interrupt(response)
