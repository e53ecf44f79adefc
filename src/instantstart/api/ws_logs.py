"""The WebSocket at /api/v1/ws/logs: one container's log followed live, resumable without repeating a line."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from pydantic import Field, ValidationError

from instantstart.api.ws_limits import SocketSlots, client_key, refuse, send
from instantstart.catalog.base import WireModel
from instantstart.catalog.routes import API_PREFIX
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.services.diagnostics.log_stream import stream_log
from instantstart.validation import ClusterTag, KubeName

NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class LogQuery(WireModel):
    """The query string: which container, and where to resume (the ts of the last line and how many lines with
    exactly that ts the client already has)."""

    cluster_tag: ClusterTag | None = None
    namespace: KubeName = "default"
    pod: str = Field(pattern=NAME)
    container: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    after: str | None = Field(default=None, max_length=40)
    skip: int = Field(default=0, ge=0, le=10_000)
    tail: int = Field(default=200, ge=1, le=1000)


def add_log_ws_route(app: FastAPI, context: AppContext, slots: SocketSlots | None = None) -> None:
    """GET /api/v1/ws/logs?pod=…[&namespace&container&clusterTag&after&skip&tail] (WebSocket, authenticated by
    the Gate). Messages: {"type": "line", "ts", "text"} per line, then {"type": "end"} when the container has
    ended; {"type": "error", "code", "message"} for bad input or a failed read. Each stream follows its log in one
    thread, so streams are bounded per client and in all (`slots`): over a limit the socket closes with 4429; a
    send stalled 30 s closes it with 4408 (a reader slower than the log loses its oldest lines meanwhile)."""
    stream_slots = slots or SocketSlots("log streams", 4, 16)

    @app.websocket(API_PREFIX + "/ws/logs")
    async def logs(socket: WebSocket) -> None:
        client = client_key(socket)
        refusal = stream_slots.acquire(client)
        if refusal is not None:
            await refuse(socket, refusal)
            return
        try:
            await _follow(socket, context, stream_slots)
        finally:
            stream_slots.release(client)


async def _follow(socket: WebSocket, context: AppContext, slots: SocketSlots) -> None:
    """One log stream on a socket, until the log ends, an error, or the client leaves."""
    await socket.accept()
    try:
        query = LogQuery.model_validate(dict(socket.query_params))
    except ValidationError as exc:
        fields = [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]
        await socket.send_json({"type": "error", "code": "INVALID_INPUT", "message": "Invalid query.",
                                "fields": fields})
        await socket.close(code=1008)
        return

    async def pump() -> None:
        try:
            async for message in stream_log(context, cluster_tag=query.cluster_tag, namespace=query.namespace,
                                            pod=query.pod, container=query.container, after=query.after,
                                            skip=query.skip, tail=query.tail):
                if not await send(socket, message, slots):
                    return
        except InstantStartError as exc:
            await socket.send_json({"type": "error", "code": exc.code.value, "message": exc.message[:300]})

    async def closed() -> None:
        while True:
            message: Any = await socket.receive()
            if message.get("type") == "websocket.disconnect":
                return

    tasks = [asyncio.create_task(pump()), asyncio.create_task(closed())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, Exception):
                await task
        with contextlib.suppress(Exception):
            await socket.close()
