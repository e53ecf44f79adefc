"""Timeline feeds of each registered cluster (its Kubernetes events watch, a HyperPod events poll), started from the
cluster registry at start-up and whenever an operation on a cluster changes; a read never starts one."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from dataclasses import dataclass, field

import anyio
from anyio import to_thread

from instantstart.context import AppContext, Slot
from instantstart.errors import InstantStartError, NotFound
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, list_clusters
from instantstart.services.base.target import cluster_of
from instantstart.services.base.watch.state import FIRST_SYNC_SECONDS, informer, informer_key, register_listener
from instantstart.services.base.watch.timeline import record_hyperpod_events
from instantstart.services.base.watch.watched import events_attachable
from instantstart.services.monitoring import usage_feed
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)
MAX_POLL_SECONDS = 300.0  # the HyperPod events poll's longest pause while the cluster cannot be read


def has_hyperpod(row: ClusterRow) -> bool:
    """Whether the cluster has (or is getting) a HyperPod cluster whose events can be polled."""
    return bool(row.hyperpod_cluster_name or (row.stages or {}).get("hyperpod"))


@dataclass
class HyperPodPoll:
    """A running HyperPod events poll: its first pass done, the last error (None after a good pass)."""

    name: str
    first: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # cut a back-off short (the cluster changed)
    error: str | None = None
    task: asyncio.Task[None] | None = None


@dataclass
class ClusterFeeds:
    """The feeds of one cluster: its events watch's key, its HyperPod poll, its pods watch's key and usage sampler."""

    events_key: str | None = None
    hyperpod: HyperPodPoll | None = None
    pods_key: str | None = None
    usage: asyncio.Task[None] | None = None


FEEDS: Slot[dict[str, ClusterFeeds]] = Slot("cluster feeds")  # per application: {cluster tag: its feeds}


def _feeds(app: AppContext) -> dict[str, ClusterFeeds]:
    return app.owned.get(FEEDS, dict)


async def _poll_hyperpod(app: AppContext, row: ClusterRow, poll: HyperPodPoll) -> None:
    """Pull the HyperPod cluster's latest events into the timeline every poll_seconds (until cancelled), backing
    off while it cannot be read (not created yet, or gone)."""
    name, delay = poll.name, app.settings.poll_seconds
    while True:
        try:
            await record_hyperpod_events(app, row.tag, row.region, name)
            poll.error, delay = None, app.settings.poll_seconds
        except Exception as exc:  # one bad answer never ends the feed
            if not isinstance(exc, InstantStartError):
                log.exception("HyperPod events poll of %s failed", name)
            poll.error = exc.message if isinstance(exc, InstantStartError) else f"{type(exc).__name__}: {exc}"[:300]
            delay = min(delay * 2, MAX_POLL_SECONDS)
        poll.first.set()
        with anyio.move_on_after(delay):
            await poll.wake.wait()
        poll.wake.clear()


def _ensure_usage(app: AppContext, row: ClusterRow, feeds: ClusterFeeds) -> None:
    """The pods watch whose listener records accelerator holds (usage_feed.pod_holds), and the usage sampler."""
    key = informer_key(row.region, row.eks_cluster_name, "pods")
    if feeds.pods_key != key or app.informers.peek(key) is None:
        informer(app, row.tag, row.region, row.eks_cluster_name, "pods", pinned=True)
        feeds.pods_key = key
    if feeds.usage is None or feeds.usage.done():
        feeds.usage = usage_feed.start_sampler(app, row.tag, row.region, row.eks_cluster_name)


def ensure(app: AppContext, row: ClusterRow) -> None:
    """Start what the cluster's timeline needs and is not running yet (on the event loop; idempotent)."""
    feeds = _feeds(app).setdefault(row.tag, ClusterFeeds())
    if events_attachable(row):
        key = informer_key(row.region, row.eks_cluster_name, "events")
        if feeds.events_key != key or app.informers.peek(key) is None:
            informer(app, row.tag, row.region, row.eks_cluster_name, "events", pinned=True)
            feeds.events_key = key
        _ensure_usage(app, row, feeds)
    running = feeds.hyperpod
    if running is not None and running.error is not None:
        running.wake.set()  # an operation changed the cluster: its HyperPod cluster may be readable now
    name = hyperpod_cluster_name(row)
    if has_hyperpod(row) and (running is None or running.task is None or running.task.done() or running.name != name):
        if running is not None and running.task is not None:
            running.task.cancel()  # the cluster's HyperPod name was recorded since: poll that one
        poll = feeds.hyperpod = HyperPodPoll(name)
        # A fresh context: the poll outlives the call that started it and must not log under its request id.
        loop = asyncio.get_running_loop()
        poll.task = loop.create_task(_poll_hyperpod(app, row, poll), context=contextvars.Context())


async def stop(app: AppContext, tag: str) -> None:
    """Stop the feeds of a cluster that left the registry."""
    feeds = _feeds(app).pop(tag, None)
    if feeds is None:
        return
    if feeds.events_key:
        app.informers.stop(feeds.events_key)
    if feeds.pods_key:
        app.informers.stop(feeds.pods_key)
    if feeds.usage is not None:
        feeds.usage.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeds.usage
    if feeds.hyperpod is not None and feeds.hyperpod.task is not None:
        feeds.hyperpod.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeds.hyperpod.task


async def start_known(app: AppContext) -> None:
    """At start-up: the feeds of every cluster in the registry."""

    def rows() -> list[ClusterRow]:
        return [get_cluster(app.db, c.cluster_tag) for c in list_clusters(app.db).clusters]

    for row in await to_thread.run_sync(rows):
        ensure(app, row)


async def stop_all(app: AppContext) -> None:
    """At shutdown: every feed of this application."""
    for tag in list(_feeds(app)):
        await stop(app, tag)


def attach(app: AppContext) -> None:
    """Follow the registry: when an operation on a cluster changes (creation, import, deletion), start the feeds
    it now needs, or stop them when the cluster left the registry (the runner's listener). The pods watches
    record accelerator holds (usage_feed)."""
    register_listener(app, "pods", usage_feed.pod_holds)

    async def listener(operation_id: str) -> None:
        try:
            view = await to_thread.run_sync(app.runner.store.get, operation_id)
            tag = cluster_of(view.target)
            if tag is None:
                return
            try:
                row = await to_thread.run_sync(get_cluster, app.db, tag)
            except NotFound:
                await stop(app, tag)
                return
            ensure(app, row)
        except Exception:
            log.exception("timeline feeds: operation %s not followed", operation_id)

    app.runner.add_listener(listener)


async def events_unavailable(app: AppContext, row: ClusterRow) -> str | None:
    """Why the cluster's events feed is not current (None when it is), after waiting (bounded) for its first list."""
    inf = app.informers.peek(informer_key(row.region, row.eks_cluster_name, "events"))
    if inf is None:
        return "the events watch is not running (it starts when the cluster is registered, imported or its EKS stage"\
               " succeeds)"
    if not inf.settled.is_set():
        await to_thread.run_sync(inf.settled.wait, FIRST_SYNC_SECONDS)
    if not inf.synced.is_set() or not inf.health.connected:
        return f"the events watch is not current ({inf.health.last_error or 'starting'})"
    return None


async def hyperpod_unavailable(app: AppContext, tag: str) -> str | None:
    """Why the cluster's HyperPod events are not current (None when they are), after waiting (bounded) for the
    poll's first pass."""
    feeds = _feeds(app).get(tag)
    poll = feeds.hyperpod if feeds is not None else None
    if poll is None:
        return "the HyperPod events poll is not running (it starts with the cluster's HyperPod stage)"
    with anyio.move_on_after(FIRST_SYNC_SECONDS):
        await poll.first.wait()
    if not poll.first.is_set():
        return "the HyperPod events poll has not answered yet"
    return poll.error
