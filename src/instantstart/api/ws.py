"""The WebSocket at /api/v1/ws: operation changes as they happen, and resource snapshots (periodic, and at
once when the cluster's watches see a change)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from instantstart.api.ws_limits import Outbox, SocketSlots, client_key, refuse, send, too_slow
from instantstart.catalog.invoke import invoke
from instantstart.catalog.registry import Catalog
from instantstart.catalog.routes import API_PREFIX
from instantstart.context import AppContext, CallContext
from instantstart.errors import InstantStartError

log = logging.getLogger(__name__)

QUEUE_SIZE = 256  # events waiting for one socket; a socket this far behind is dropped
KICK_DEBOUNCE = 0.3  # seconds a watch-triggered snapshot waits for more changes
# Read-only tools whose answers make up a resource snapshot (each is cached server-side).
SNAPSHOT_TOOLS = (
    ("clusters", "cluster_list_all"),
    ("status", "cluster_get_status"),
    ("workloads", "cluster_list_workloads"),
    # The custom resources' tools (watch-fed): a training job or endpoint change pushes a snapshot at once.
    ("jobs", "training_job_list"),
    ("servers", "inference_list_services"),
    ("managed", "inference_managed_list"),
)


class EventHub:
    """Fans events out to connected sockets. Operation changes are coalesced per id; a resource snapshot is
    built every `interval` seconds while anyone listens (one build however many sockets)."""

    def __init__(self, context: AppContext, catalog: Catalog, interval: float = 5.0, *,
                 slots: SocketSlots | None = None, queue_size: int = QUEUE_SIZE) -> None:
        self.context = context
        self.catalog = catalog
        self.interval = interval
        self.slots = slots or SocketSlots("event sockets", 8, 64)
        self.queue_size = queue_size
        self.clients: set[Outbox] = set()
        self._changed: set[str] = set()
        self._wake = asyncio.Event()
        self._kick = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        context.change_hooks.append(self.on_cluster_change)

    def on_cluster_change(self, app: AppContext, _tag: str, _kind: str) -> None:
        """Watch hook (any thread): something the live views show changed, so push a snapshot soon."""
        if app is self.context and self.clients and self._loop is not None:
            self._loop.call_soon_threadsafe(self._kick.set)

    def on_operation(self, operation_id: str) -> None:
        """Runner listener: note the change; the broadcaster reads and sends it."""
        if self.clients:
            self._changed.add(operation_id)
            self._wake.set()

    def start(self) -> None:
        """Start the broadcaster and the snapshot loop (in the server's event loop)."""
        self._wake = asyncio.Event()
        self._kick = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._tasks = [asyncio.create_task(self._operations()), asyncio.create_task(self._snapshots())]

    async def stop(self) -> None:
        """Stop both loops and the watch hook."""
        if self.on_cluster_change in self.context.change_hooks:
            self.context.change_hooks.remove(self.on_cluster_change)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def publish(self, event: dict[str, Any]) -> None:
        """Queue an event for every socket (a socket `queue_size` events behind is dropped, see `Outbox`)."""
        for outbox in list(self.clients):
            outbox.offer(event)

    async def _operations(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            changed, self._changed = self._changed, set()
            for operation_id in sorted(changed):
                try:
                    view = await to_thread.run_sync(self.context.runner.store.get, operation_id)
                except Exception:
                    log.exception("operation event read failed")
                    continue
                self.publish({"type": "operation", "operation": view.model_dump(mode="json", by_alias=True)})

    async def snapshot(self) -> dict[str, Any]:
        """One resource snapshot: each tool's answer, or its error body."""
        event: dict[str, Any] = {"type": "resources"}
        for key, name in SNAPSHOT_TOOLS:
            try:
                event[key] = await invoke(self.catalog, name, {}, CallContext(app=self.context, face="ws"))
            except InstantStartError as exc:
                event[key] = {"error": exc.to_dict()}
            if key == "clusters" and not (event[key].get("activeCluster")):
                break
        return event

    async def _snapshots(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.interval)
            if self._kick.is_set():
                await asyncio.sleep(KICK_DEBOUNCE)  # gather a burst of changes into one snapshot
                self._kick.clear()
            if not self.clients:
                continue
            try:
                self.publish(await self.snapshot())
            except Exception:
                log.exception("resource snapshot failed")


def add_ws_route(app: FastAPI, hub: EventHub) -> None:
    """GET /api/v1/ws (WebSocket). The Gate has authenticated it (bearer token, or the session cookie
    from this server's own origin). Messages are JSON: {"type": "hello"}, {"type": "operation",
    "operation": OperationView}, {"type": "resources", "clusters", "status", "workloads", "jobs", "servers",
    "managed"} (each the answer of its tool in SNAPSHOT_TOOLS, or {"error": ...}); the client may send
    {"type": "refresh"} to get a snapshot at once (one at a time: the next is read when it is queued).
    Bounded: a client (browser session, or bearer caller's address) over its socket limit, or any client when the
    server is at its limit, is closed with 4429; a client that does not read its events (its queue of
    `queue_size` full, or one send stalled 30 s) is closed with 4408."""

    @app.websocket(API_PREFIX + "/ws")
    async def events(socket: WebSocket) -> None:
        client = client_key(socket)
        refusal = hub.slots.acquire(client)
        if refusal is not None:
            await refuse(socket, refusal)
            return
        try:
            await socket.accept()
            await _serve(socket, hub)
        finally:
            hub.slots.release(client)


async def _serve(socket: WebSocket, hub: EventHub) -> None:
    outbox = Outbox(hub.queue_size)
    hub.clients.add(outbox)

    async def reader() -> None:
        while True:
            message = await socket.receive_json()
            if isinstance(message, dict) and message.get("type") == "refresh":
                outbox.offer(await hub.snapshot())

    read_task = asyncio.create_task(reader())
    slow = asyncio.create_task(outbox.overflow.wait())
    try:
        outbox.offer({"type": "hello", "snapshotSeconds": hub.interval})
        while not read_task.done():
            get = asyncio.create_task(outbox.queue.get())
            done, _ = await asyncio.wait({get, read_task, slow}, return_when=asyncio.FIRST_COMPLETED)
            if get in done:
                if await send(socket, get.result(), hub.slots, outbox):
                    continue
                return
            get.cancel()
            if slow in done:
                await too_slow(socket, hub.slots, outbox)
                return
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        hub.clients.discard(outbox)
        for task in (read_task, slow):
            task.cancel()
        for task in (read_task, slow):
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, Exception):
                await task
